package region

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/replication"
)

// TestHungBackupDroppedWritesResume: region 1 (static map: primary p,
// backups b1 and b2, shm) writes while b1 stops handling replication
// commands (its handlers wait for its replication lock, which the test
// holds: a stopped process over shm, whose WRITEs still land but whose
// command ring nobody reads). The writes soon wait for b1 (a segment
// switch waits for its flush of the half it reuses, a compaction for its
// credits); the stream drops b1 once it completed nothing for
// HungBackupAfter (twice zk_session_timeout: 0.5 s here), not after the
// 30 s command timeout, and the writes go on with b2 while min_copies
// holds (2), or are refused (ErrTooFewCopies) when it does not (3). b1,
// released, is out of the stream: the writes go on without it.
func TestHungBackupDroppedWritesResume(t *testing.T) {
	for _, minCopies := range []int{2, 3} {
		t.Run(fmt.Sprintf("min-copies-%d", minCopies), func(t *testing.T) {
			dir := t.TempDir()
			m := &regionmap.Map{Version: 1, Replication: "send-index", MinCopies: minCopies,
				Servers: []regionmap.Server{{Name: "p", Shm: filepath.Join(dir, "p.sock")}, {Name: "b1", Shm: filepath.Join(dir, "b1.sock")}, {Name: "b2", Shm: filepath.Join(dir, "b2.sock")}},
				Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Backups: []string{"b1", "b2"}, Epoch: 1}}}
			session := 250 * time.Millisecond
			start := staticServersWith(t, dir, m, 2*time.Second, nil, func(c *Config) { c.ZKSessionTimeout = Duration(session) })
			b1 := start("b1")
			start("b2")
			p := start("p")
			bound := p.cfg.HungBackupAfter()
			if bound != 2*session {
				t.Fatalf("HungBackupAfter %v, want %v", bound, 2*session)
			}
			for deadline := time.Now().Add(10 * time.Second); p.state.Load().attaching(1); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("region 1 never attached to its backups")
				}
				_ = p.attachAll()
			}
			er := p.state.Load().hosted(1)
			val := bytes.Repeat([]byte("v"), 1000) // ~64 per 64 KiB segment; the L0 holds 64 pairs
			put := func(i int) error { return er.Put(fmt.Appendf(nil, "k%05d", i), val) }
			for i := range 100 {
				if err := put(i); err != nil {
					t.Fatal(err)
				}
			}

			b1.replMu.Lock() // b1 hangs: its replication commands wait
			released := false
			release := func() {
				if !released {
					released = true
					b1.replMu.Unlock()
				}
			}
			defer release()
			type result struct {
				n       int
				longest time.Duration
				err     error
			}
			done := make(chan result, 1)
			go func() {
				var r result
				for i := 100; i < 500; i++ {
					t0 := time.Now()
					err := put(i)
					r.longest = max(r.longest, time.Since(t0))
					if err != nil {
						r.err = err
						break
					}
					r.n++
				}
				done <- r
			}()
			var r result
			select {
			case r = <-done:
			case <-time.After(5 * bound):
				t.Fatalf("writes still held %v after b1 hung (the hung-backup bound is %v)", 5*bound, bound)
			}
			dropped := p.Stats().Dropped
			if !slices.Contains(dropped, "b1 (region 1)") {
				t.Fatalf("dropped backups %v, want b1 of region 1", dropped)
			}
			sh := p.streamOf(1).shipper
			if d := sh.Dropped()["b1"]; !errors.Is(d, replication.ErrBackupHung) {
				t.Fatalf("b1 dropped for %v, want ErrBackupHung", d)
			}
			t.Logf("%d writes while b1 hung, the longest %v (bound %v)", r.n, r.longest.Round(time.Millisecond), bound)
			if minCopies == 3 {
				if !errors.Is(r.err, replication.ErrTooFewCopies) {
					t.Fatalf("a write once b1 was dropped: %v, want ErrTooFewCopies (2 copies, min_copies 3)", r.err)
				}
				if err := put(1000); !errors.Is(err, replication.ErrTooFewCopies) {
					t.Fatalf("a later write: %v, want ErrTooFewCopies", err)
				}
				return
			}
			if r.err != nil {
				t.Fatalf("write %d: %v", 100+r.n, r.err)
			}
			if r.longest > 4*bound {
				t.Fatalf("a write waited %v, the hung-backup bound is %v", r.longest, bound)
			}
			// b1 resumes: it is out of the stream (its commands were
			// cancelled, nothing more is sent to it), the region goes on.
			release()
			for i := 500; i < 600; i++ {
				if err := put(i); err != nil {
					t.Fatalf("write %d after b1 resumed: %v", i, err)
				}
			}
			if d := p.Stats().Dropped; len(d) != 1 {
				t.Fatalf("dropped backups %v, want b1 only", d)
			}
			for i := range 600 {
				if v, err := er.Get(fmt.Appendf(nil, "k%05d", i)); err != nil || !bytes.Equal(v, val) {
					t.Fatalf("k%05d: %v", i, err)
				}
			}
		})
	}
}
