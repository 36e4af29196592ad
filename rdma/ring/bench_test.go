package ring

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tebis-go/tebis/rdma"
)

// BenchmarkCallParallel is the protocol's cost per request over shm
// (server and client in this process): 16 goroutines call an echo handler
// with a 64-byte payload. It reports the process's CPU per call
// (cpu-ns/op) beside the wall time.
func BenchmarkCallParallel(b *testing.B) {
	for _, inline := range []bool{false, true} {
		name := "workers"
		if inline {
			name = "short-inline"
		}
		b.Run(name, func(b *testing.B) {
			served := new(atomic.Int64)
			h := handlers(served)
			cfg := ServerConfig{Transport: &rdma.Shm{}, Addr: filepath.Join(b.TempDir(), "s"), Handlers: h, Workers: 16}
			if inline {
				cfg.Short = map[uint16]ShortFunc{typeEcho: func(r *ServerRequest) (Reply, bool) {
					served.Add(1)
					return Reply{Status: StatusFirstApp, Payload: r.Payload}, true
				}}
			}
			s, err := Listen(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			c, err := Dial(ctx, ClientConfig{Transport: &rdma.Shm{}, Addr: s.Addr()})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			payload := make([]byte, 64)
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Call(ctx, Request{Type: typeEcho, Payload: payload, ReplySize: 64}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(cpuTime(b)-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}
