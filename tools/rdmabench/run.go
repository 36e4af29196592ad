package rdmabench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

// DefaultDuration is the measuring time of one round-trip cell.
const DefaultDuration = 2 * time.Second

// Config is one `tebis bench rdma` run.
type Config struct {
	Transports  []string      // default shm, tcp
	Payloads    []int         // default 128, 1024, 65536
	Outstanding []int         // default 1, 16
	Duration    time.Duration // per round-trip cell (default 2 s)
	StreamBytes int64         // one-sidedness stream (default 1 GiB; 0 skips)
	// PeerArgv starts a peer process (the tebis binary's `bench rdma-peer`);
	// --mode, --transport and --addr are appended.
	PeerArgv []string
}

// RTTResult is one round-trip cell.
type RTTResult struct {
	Transport   string  `json:"transport"`
	Payload     int     `json:"payload_bytes"`
	Outstanding int     `json:"outstanding"`
	Messages    int64   `json:"messages"`
	MsgsPerSec  float64 `json:"msgs_per_sec"`
	P50us       float64 `json:"p50_us"`
	P99us       float64 `json:"p99_us"`
}

// StreamResult is the one-sidedness figure of one transport.
type StreamResult struct {
	Transport  string  `json:"transport"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	WriterCPU  float64 `json:"writer_cpu_s"`
	PeerCPU    float64 `json:"peer_cpu_s"`
	PeerPerCPU float64 `json:"peer_over_writer"`
}

// Result is a whole run.
type Result struct {
	RTT    []RTTResult    `json:"rtt"`
	Stream []StreamResult `json:"stream"`
}

func (c *Config) defaults() {
	if len(c.Transports) == 0 {
		c.Transports = []string{"shm", "tcp"}
	}
	if len(c.Payloads) == 0 {
		c.Payloads = []int{128, 1024, 65536}
	}
	if len(c.Outstanding) == 0 {
		c.Outstanding = []int{1, 16}
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
}

// Run measures every transport in turn.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.defaults()
	dir, err := os.MkdirTemp("", "tebis-rdmabench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	res := &Result{}
	for _, tname := range cfg.Transports {
		tr, err := Transport(tname)
		if err != nil {
			return res, err
		}
		addr := "127.0.0.1:0"
		if tname == "shm" {
			addr = filepath.Join(dir, tname+".echo")
		}
		cells, err := runRTT(ctx, cfg, tr, addr)
		res.RTT = append(res.RTT, cells...)
		if err != nil {
			return res, err
		}
		if cfg.StreamBytes > 0 {
			if tname == "shm" {
				addr = filepath.Join(dir, tname+".sink")
			}
			s, err := runStream(ctx, cfg, tr, addr)
			if err != nil {
				return res, err
			}
			res.Stream = append(res.Stream, s)
		}
	}
	return res, nil
}

// runRTT starts an echo peer and measures each payload x outstanding cell.
func runRTT(ctx context.Context, cfg Config, tr rdma.Transport, addr string) ([]RTTResult, error) {
	p, err := startPeer(cfg.PeerArgv, ModeEcho, tr.Name(), addr)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	var out []RTTResult
	for _, size := range cfg.Payloads {
		for _, n := range cfg.Outstanding {
			r, err := rttCell(ctx, cfg, tr, p.addr, size, n)
			if err != nil {
				return out, fmt.Errorf("rdmabench: %s %d B x %d: %w", tr.Name(), size, n, err)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// rttCell runs n goroutines, each with one request outstanding, over one
// connection, for cfg.Duration (after a short warm-up).
func rttCell(ctx context.Context, cfg Config, tr rdma.Transport, addr string, size, n int) (RTTResult, error) {
	c, err := ring.Dial(ctx, ring.ClientConfig{Transport: tr, Addr: addr})
	if err != nil {
		return RTTResult{}, err
	}
	defer c.Close()
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i)
	}
	req := ring.Request{Type: TypeEcho, Payload: payload, ReplySize: size}
	var (
		mu    sync.Mutex
		hist  = hdrhistogram.New(100, int64(10*time.Second), 3) // ns
		count int64
		first error
		wg    sync.WaitGroup
	)
	warm := time.Now().Add(cfg.Duration / 10)
	end := warm.Add(cfg.Duration)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hdrhistogram.New(100, int64(10*time.Second), 3)
			var k int64
			for {
				t0 := time.Now()
				if t0.After(end) {
					break
				}
				rep, err := c.Call(ctx, req)
				if err == nil && len(rep.Payload) != size {
					err = fmt.Errorf("echo of %d bytes came back with %d", size, len(rep.Payload))
				}
				if err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				if t0.After(warm) {
					_ = h.RecordValue(int64(time.Since(t0)))
					k++
				}
			}
			mu.Lock()
			hist.Merge(h)
			count += k
			mu.Unlock()
		}()
	}
	wg.Wait()
	if first != nil {
		return RTTResult{}, first
	}
	return RTTResult{
		Transport: tr.Name(), Payload: size, Outstanding: n, Messages: count,
		MsgsPerSec: float64(count) / cfg.Duration.Seconds(),
		P50us:      float64(hist.ValueAtQuantile(50)) / 1e3,
		P99us:      float64(hist.ValueAtQuantile(99)) / 1e3,
	}, nil
}

// runStream WRITEs cfg.StreamBytes into a sink peer in 1 MiB WRITEs and
// compares the peer's CPU with ours over the stream.
func runStream(ctx context.Context, cfg Config, tr rdma.Transport, addr string) (StreamResult, error) {
	p, err := startPeer(cfg.PeerArgv, ModeSink, tr.Name(), addr)
	if err != nil {
		return StreamResult{}, err
	}
	defer p.stop()
	const chunk = 1 << 20
	local, err := rdma.Register(SinkSize)
	if err != nil {
		return StreamResult{}, err
	}
	defer local.Deregister()
	for i := range local.Bytes() {
		local.Bytes()[i] = byte(i * 7)
	}
	cq := rdma.NewCQ()
	qp, err := tr.Dial(ctx, p.addr, rdma.ConnConfig{CQ: cq})
	if err != nil {
		return StreamResult{}, err
	}
	defer qp.Close()
	remote := qp.PeerRegions()[0]
	time.Sleep(100 * time.Millisecond) // let the peer settle after set-up
	peer0, err := p.cpu()
	if err != nil {
		return StreamResult{}, err
	}
	self0, t0 := selfCPU(), time.Now()
	var comp [16]rdma.Completion
	outstanding := 0
	chunks := cfg.StreamBytes / chunk
	for i := int64(0); i < chunks; i++ {
		off := int(i%(SinkSize/chunk)) * chunk
		signaled := i%16 == 15 || i == chunks-1
		if err := qp.PostWrite(rdma.WriteWR{ID: uint64(i), Local: local, LocalOff: off, Len: chunk, Remote: remote, RemoteOff: uint64(off), Signaled: signaled}); err != nil {
			return StreamResult{}, err
		}
		if signaled {
			outstanding++
		}
		for outstanding > 4 || (i == chunks-1 && outstanding > 0) {
			k, err := cq.Wait(ctx, comp[:])
			if err != nil {
				return StreamResult{}, err
			}
			for _, c := range comp[:k] {
				if c.Err != nil {
					return StreamResult{}, c.Err
				}
				outstanding--
			}
		}
	}
	elapsed, self := time.Since(t0), selfCPU()-self0
	peer1, err := p.cpu()
	if err != nil {
		return StreamResult{}, err
	}
	peer := peer1 - peer0
	return StreamResult{
		Transport: tr.Name(), Bytes: chunks * chunk, Seconds: elapsed.Seconds(),
		WriterCPU: self.Seconds(), PeerCPU: peer.Seconds(), PeerPerCPU: peer.Seconds() / self.Seconds(),
	}, nil
}
