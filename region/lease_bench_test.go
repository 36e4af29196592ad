package region

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client"
	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// BenchmarkGetLease measures what the read lease costs a get through a
// client over shm: the same server answers gets alternately without a
// lease (a standalone server) and with one (a managed server's, held),
// in batches of 1000, and the p50/p99 latencies of each are reported.
func BenchmarkGetLease(b *testing.B) {
	dir := b.TempDir()
	m := &regionmap.Map{Version: 1, Servers: []regionmap.Server{{Name: "p", Shm: filepath.Join(dir, "p.sock")}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Epoch: 1}}}
	mapFile := filepath.Join(dir, "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm, cfg.MapFile = "p", filepath.Join(dir, "p"), "", filepath.Join(dir, "p.sock"), mapFile
	s, err := Start(cfg, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	cl, err := client.Open(ctx, client.Config{Map: regionmap.Static{M: m}, Transport: "shm"})
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	const keys = 10000
	for i := range keys {
		if err := cl.Put(ctx, fmt.Appendf(nil, "user%08d", i), make([]byte, 100)); err != nil {
			b.Fatal(err)
		}
	}
	lease := coord.NewLease(nil)
	lease.SetSessionTimeout(time.Hour)
	if !lease.Confirm(lease.Begin()) {
		b.Fatal("lease")
	}
	lat := map[bool][]time.Duration{}
	b.ResetTimer()
	for done := 0; done < b.N; {
		for _, leased := range []bool{false, true} {
			if leased {
				s.lease.Store(lease)
			} else {
				s.lease.Store(nil)
			}
			for j := 0; j < 1000 && done < b.N; j++ {
				k := fmt.Appendf(nil, "user%08d", (done*7919)%keys)
				start := time.Now()
				if _, err := cl.Get(ctx, k); err != nil {
					b.Fatal(err)
				}
				lat[leased] = append(lat[leased], time.Since(start))
				done++
			}
		}
	}
	b.StopTimer()
	for _, leased := range []bool{false, true} {
		d := lat[leased]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		name := "nolease"
		if leased {
			name = "lease"
		}
		b.ReportMetric(float64(d[len(d)/2].Nanoseconds()), name+"-p50-ns")
		b.ReportMetric(float64(d[len(d)*99/100].Nanoseconds()), name+"-p99-ns")
	}
}
