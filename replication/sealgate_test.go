package replication

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/rdma"
)

// sealStream is one region of a shared primary volume replicated to one
// Send-Index backup whose command link can stall.
type sealStream struct {
	r       *engine.Region
	link    *stallLink
	shipper *Shipper
}

func newSealStream(t *testing.T, fs vfs.FS, pv *engine.Volume, id uint64) *sealStream {
	t.Helper()
	r, err := pv.CreateRegion(engine.RegionDesc{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("seal%d", loopAddrs) }, 1)
	bv, err := engine.Open(replOpts(fs, 1<<20)(fmt.Sprintf("b%d", id)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bv.Close() })
	br, err := bv.CreateBackupRegion(engine.RegionDesc{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := NewSendIndexReplica(bv, br, 3, ends[0].buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m := newTailMirror(t, r, cq, bs)
	s := &sealStream{r: r, link: newStallLink(&LocalLink{Replica: rep})}
	s.shipper, err = startShipper(ShipperConfig{Region: r, Epoch: 3, Mode: SendIndex, SegSize: mirrorSeg, Mirror: m,
		Links: map[string]Link{"b0": s.link}, Credits: 2, Timeout: time.Minute, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.shipper.Close)
	return s
}

// openSealVolume opens the primary volume of sealStreams in fs: an L0
// that never fills in these tests, closed at the test's end.
func openSealVolume(t *testing.T, fs vfs.FS) *engine.Volume {
	t.Helper()
	pv, err := engine.Open(replOpts(fs, 1<<20)("p"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pv.Close() })
	return pv
}

// p99 of ds (sorted in place).
func p99(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)*99/100]
}

// TestStalledBackupDoesNotStallReads: a backup that stops taking commands
// (its process stopped reading its ring) holds its region's writes at the
// next segment switch (the buffer half cannot be reused before it
// persisted the segment in it), but reads of that region keep their
// latency, and another region of the same server keeps writing: the
// writers wait for the seal without the region's lock (engine.SealGate).
// Segments are the replication tests' 64 KiB: a seal is the same code at
// any size, only more frequent here.
func TestStalledBackupDoesNotStallReads(t *testing.T) {
	fs := vfs.NewMem()
	pv := openSealVolume(t, fs)
	a, b := newSealStream(t, fs, pv, 7), newSealStream(t, fs, pv, 8)
	if err := a.r.Put([]byte("probe"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	val := bytes.Repeat([]byte("x"), 2000)

	// read samples a's reads until stop closes.
	read := func(stop <-chan struct{}) []time.Duration {
		var ds []time.Duration
		for {
			select {
			case <-stop:
				return ds
			default:
			}
			t0 := time.Now()
			if _, err := a.r.Get([]byte("probe")); err != nil {
				t.Error(err)
				return ds
			}
			ds = append(ds, time.Since(t0))
			time.Sleep(200 * time.Microsecond)
		}
	}
	// write puts n values into r (keys from base), each through seals.
	write := func(r *engine.Region, base, n int) error {
		for i := range n {
			if err := r.Put(fmt.Appendf(nil, "k%08d", base+i), val); err != nil {
				return err
			}
		}
		return nil
	}

	// Baseline: a's reads for 500 ms while a's writes go through seals
	// (at most 3000 values, about 90 segments).
	stop := make(chan struct{})
	baseCh := make(chan []time.Duration)
	go func() { baseCh <- read(stop) }()
	wrote := make(chan error, 1)
	go func() {
		for i := 0; i < 3000; i++ {
			select {
			case <-stop:
				wrote <- nil
				return
			default:
			}
			if err := write(a.r, i, 1); err != nil {
				wrote <- err
				return
			}
		}
		wrote <- nil
	}()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	base := <-baseCh
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}

	// a's backup stops taking commands; a's writer goes on until the
	// seal that needs the backup's flush.
	a.link.stalled.Store(true)
	waitsBefore := pv.Stats().SealWaits
	var aDone atomic.Bool
	var aWrote atomic.Int64
	aErr := make(chan error, 1)
	go func() {
		defer aDone.Store(true)
		for i := range 300 {
			if err := write(a.r, 10000+i, 1); err != nil {
				aErr <- err
				return
			}
			aWrote.Add(1)
		}
		aErr <- nil
	}()
	// Held once no write completes for 300 ms (300 values are about 9
	// segments: the writer reaches the seal that needs the backup).
	for last, since, deadline := int64(-1), time.Now(), time.Now().Add(30*time.Second); time.Since(since) < 300*time.Millisecond; time.Sleep(5 * time.Millisecond) {
		if n := aWrote.Load(); n != last {
			last, since = n, time.Now()
		}
		if aDone.Load() || time.Now().After(deadline) {
			t.Fatalf("a's writes were not held with its backup stalled (%d of 300 written)", aWrote.Load())
		}
	}
	// While a's writer waits: a's reads, and b's writes.
	stop = make(chan struct{})
	stallCh := make(chan []time.Duration)
	go func() { stallCh <- read(stop) }()
	var wg sync.WaitGroup
	wg.Add(1)
	var bTook time.Duration
	go func() {
		defer wg.Done()
		t0 := time.Now()
		if err := write(b.r, 0, 300); err != nil {
			t.Error(err)
		}
		bTook = time.Since(t0)
	}()
	wg.Wait()
	time.Sleep(500 * time.Millisecond) // reads for a while longer with a still held
	close(stop)
	stalled := <-stallCh
	if aDone.Load() {
		t.Fatal("a's writes completed while its backup took no command")
	}
	close(a.link.release)
	a.link.stalled.Store(false)
	if err := <-aErr; err != nil {
		t.Fatal(err)
	}

	pb, ps := p99(base), p99(stalled)
	t.Logf("a's read p99: %v baseline (%d reads), %v with a's writes held at a seal (%d reads); b wrote 300 values (about 9 segments) in %v",
		pb, len(base), ps, len(stalled), bTook)
	if ps > 10*pb+20*time.Millisecond {
		t.Errorf("a's read p99 went from %v to %v while a's writes waited for the stalled backup", pb, ps)
	}
	if bTook > 10*time.Second {
		t.Errorf("b's writes took %v while a's backup stalled", bTook)
	}
	if pv.Stats().SealWaits == waitsBefore {
		t.Error("a's writer was held elsewhere than at the seal gate")
	}
	for name, s := range map[string]*Shipper{"a": a.shipper, "b": b.shipper} {
		if n := s.sealStalls.Load(); n != 0 {
			t.Errorf("%s: LogSealed waited %d times under the region's lock", name, n)
		}
	}
}

// pausedLink holds every Send while paused (a backup whose process
// stopped reading its ring), and lets them all through when resumed.
type pausedLink struct {
	Link
	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
}

func newPausedLink(l Link) *pausedLink {
	p := &pausedLink{Link: l}
	p.cond = sync.NewCond(&p.mu)
	return p
}

func (p *pausedLink) set(paused bool) {
	p.mu.Lock()
	p.paused = paused
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *pausedLink) Send(ctx context.Context, c *Command) ([]byte, error) {
	p.mu.Lock()
	for p.paused {
		p.cond.Wait()
	}
	p.mu.Unlock()
	return p.Link.Send(ctx, c)
}

// TestManyWritersAtSealAllAdmitted: many writers wait at a seal for a
// backup that pauses again and again; when the gate opens, the first
// seals and the others, filling the next segment, must each be admitted
// again (a writer admitted once and sealing later unadmitted made
// LogSealed wait under the region's lock, and reads with it).
func TestManyWritersAtSealAllAdmitted(t *testing.T) {
	fs := vfs.NewMem()
	pv := openSealVolume(t, fs)
	a := newSealStream(t, fs, pv, 7)
	pl := newPausedLink(a.link.Link)
	a.link.Link = pl
	if err := a.r.Put([]byte("probe"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			val := bytes.Repeat([]byte("x"), 16<<10)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := a.r.Put(fmt.Appendf(nil, "w%d-%d", w, i), val); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	blocked := 0
	for range 20 {
		pl.set(true)
		for t0 := time.Now(); time.Since(t0) < 100*time.Millisecond; {
			got := make(chan struct{})
			go func() {
				a.r.Get([]byte("probe"))
				close(got)
			}()
			select {
			case <-got:
			case <-time.After(2 * time.Second):
				blocked++
				pl.set(false)
				<-got
			}
		}
		pl.set(false)
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if n := a.shipper.sealStalls.Load(); n != 0 || blocked != 0 {
		t.Fatalf("%d seals not admitted (LogSealed waited under the region's lock); %d reads blocked for 2 s", n, blocked)
	}
}
