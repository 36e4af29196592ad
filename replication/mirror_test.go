package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/rdma"
)

const mirrorSeg = 64 << 10

type backupEnd struct {
	buf *rdma.MR
	qp  rdma.QP // the backup's side
}

// connectBackups makes n backups exposing 2-segment buffers and returns
// the primary's view of them, with one CQ for the mirror.
func connectBackups(t testing.TB, tr rdma.Transport, addr func() string, n int) ([]Backup, []*backupEnd, *rdma.CQ) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cq := rdma.NewCQ()
	var bs []Backup
	var ends []*backupEnd
	for i := range n {
		ln, err := tr.Listen(addr())
		if err != nil {
			t.Fatal(err)
		}
		buf, err := rdma.Register(2 * mirrorSeg)
		if err != nil {
			t.Fatal(err)
		}
		end := &backupEnd{buf: buf}
		accepted := make(chan error, 1)
		go func() {
			req, err := ln.Accept(ctx)
			if err == nil {
				end.qp, err = req.Accept(rdma.ConnConfig{CQ: rdma.NewCQ(), Expose: []*rdma.MR{buf}})
			}
			accepted <- err
		}()
		qp, err := tr.Dial(ctx, ln.Addr(), rdma.ConnConfig{CQ: cq})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-accepted; err != nil {
			t.Fatal(err)
		}
		ln.Close()
		t.Cleanup(func() { qp.Close(); end.qp.Close(); buf.Deregister() })
		bs = append(bs, Backup{Name: fmt.Sprintf("b%d", i), QP: qp, Buffer: qp.PeerRegions()[0]})
		ends = append(ends, end)
	}
	return bs, ends, cq
}

// newTestMirror starts a mirror (tail in segment 1) over n connected
// backups; it is closed when the test ends.
func newTestMirror(t testing.TB, tr rdma.Transport, addr func() string, n int) (*Mirror, []*backupEnd) {
	t.Helper()
	bs, ends, cq := connectBackups(t, tr, addr, n)
	m, err := NewMirror(mirrorSeg, 1, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, ends
}

var loopAddrs int

func transports(t *testing.T) map[string]struct {
	tr   rdma.Transport
	addr func() string
} {
	lb := rdma.NewLoopback()
	return map[string]struct {
		tr   rdma.Transport
		addr func() string
	}{
		"loopback": {lb, func() string { loopAddrs++; return fmt.Sprintf("m%d", loopAddrs) }},
		"shm":      {&rdma.Shm{}, func() string { loopAddrs++; return filepath.Join(t.TempDir(), fmt.Sprintf("m%d", loopAddrs)) }},
		"tcp":      {&rdma.TCP{}, func() string { return "127.0.0.1:0" }},
	}
}

// TestMirrorImage: concurrent writers append records in log order and
// wait for their own end; the backups' halves are byte-exact images of the
// primary's tail, across a segment switch.
func TestMirrorImage(t *testing.T) {
	for name, tc := range transports(t) {
		t.Run(name, func(t *testing.T) {
			m, ends := newTestMirror(t, tc.tr, tc.addr, 2)
			var logMu sync.Mutex // the engine's log lock
			image := make([]byte, 2*mirrorSeg)
			off, half := int64(4096), 0
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for seg := uint64(1); seg <= 3; seg++ {
				runWriters(t, 8, func(w int) error {
					for i := range 40 {
						logMu.Lock()
						rec := bytes.Repeat([]byte{byte(w*40 + i)}, 10+(w*7+i*13)%200)
						at := off
						if at+int64(len(rec)) >= mirrorSeg {
							logMu.Unlock()
							return nil
						}
						copy(image[int64(half)*mirrorSeg+at:], rec)
						pos, err := m.Append(at, rec)
						off += int64(len(rec))
						logMu.Unlock()
						if err := ack(ctx, m, pos, err); err != nil {
							return err
						}
					}
					return nil
				})
				for i, e := range ends {
					h := int64(half) * mirrorSeg
					if !bytes.Equal(e.buf.Bytes()[h:h+mirrorSeg], image[h:h+mirrorSeg]) {
						t.Fatalf("segment %d: backup %d's buffer is not the primary's tail image", seg, i)
					}
				}
				if err := m.Switch(ctx, seg+1); err != nil {
					t.Fatal(err)
				}
				half ^= 1
				clear(image[int64(half)*mirrorSeg : int64(half+1)*mirrorSeg])
				off = 4096
			}
		})
	}
}

// TestMirrorBackupDies: a dead backup is dropped, the others still ack;
// with none left, Wait fails instead of blocking.
func TestMirrorBackupDies(t *testing.T) {
	for name, tc := range transports(t) {
		t.Run(name, func(t *testing.T) {
			m, ends := newTestMirror(t, tc.tr, tc.addr, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rec := bytes.Repeat([]byte{7}, 100)
			if _, err := m.Append(4096, rec); err != nil {
				t.Fatal(err)
			}
			if err := m.Wait(ctx, m.Tail()); err != nil {
				t.Fatal(err)
			}
			ends[0].qp.Close() // backup 0 dies
			off := int64(4196)
			deadline := time.Now().Add(10 * time.Second)
			for len(m.Dropped()) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("dead backup never dropped")
				}
				if off+100 >= mirrorSeg { // the peer's death may take a while to show
					if err := m.Switch(ctx, 2); err != nil {
						t.Fatal(err)
					}
					off = 4096
				}
				if _, err := m.Append(off, rec); err != nil {
					t.Fatal(err)
				}
				off += 100
				if err := m.Wait(ctx, m.Tail()); err != nil {
					t.Fatalf("wait with one live backup: %v", err)
				}
			}
			if _, ok := m.Dropped()["b0"]; !ok {
				t.Fatalf("dropped %v, want b0", m.Dropped())
			}
			ends[1].qp.Close()
			for {
				if off+100 >= mirrorSeg {
					m.Switch(ctx, 3)
					off = 4096
				}
				m.Append(off, rec)
				off += 100
				err := m.Wait(ctx, m.Tail())
				if errors.Is(err, ErrNoBackups) {
					break
				}
				if err != nil || time.Now().After(deadline) {
					t.Fatalf("wait with every backup dead: %v", err)
				}
			}
		})
	}
}

// TestMirrorWaitAcrossSwitch: a writer that waits for its record after the
// tail switched is answered at once (Switch waited for the old tail).
func TestMirrorWaitAcrossSwitch(t *testing.T) {
	bs, _, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("s%d", loopAddrs) }, 2)
	m, err := NewMirror(mirrorSeg, 1, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pos, err := m.Append(4096, bytes.Repeat([]byte{1}, 64))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Switch(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(ctx, pos); err != nil {
		t.Fatalf("wait for a record of the previous tail: %v", err)
	}
	if _, err := m.Append(4096, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := m.Wait(ctx, Pos{gen: pos.gen + 5, end: 1}); err == nil {
		t.Fatal("waiting for a position past the tail succeeded")
	}
}

// TestMirrorSwitchUnderLoad: writers keep appending and waiting while one
// of them switches the tail under the log lock (as the engine does).
func TestMirrorSwitchUnderLoad(t *testing.T) {
	for name, tc := range transports(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := newTestMirror(t, tc.tr, tc.addr, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var logMu sync.Mutex
			off, seg := int64(4096), uint64(1)
			rec := make([]byte, 100)
			runWriters(t, 16, func(int) error {
				for range 300 {
					logMu.Lock()
					if off+100 >= mirrorSeg {
						seg++
						if err := m.Switch(ctx, seg); err != nil {
							logMu.Unlock()
							return err
						}
						off = 4096
					}
					pos, err := m.Append(off, rec)
					off += 100
					logMu.Unlock()
					if err := ack(ctx, m, pos, err); err != nil {
						return err
					}
				}
				return nil
			})
			if seg < 5 {
				t.Fatalf("only %d segments: the test did not switch under load", seg)
			}
		})
	}
}

// runWriters runs n writers concurrently and fails the test with their
// first error.
func runWriters(t *testing.T, n int, write func(w int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := write(w); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// ack waits for an appended record at every backup, as a client's
// acknowledgement does.
func ack(ctx context.Context, m *Mirror, pos Pos, appendErr error) error {
	if appendErr != nil {
		return appendErr
	}
	return m.Wait(ctx, pos)
}

// TestMirrorWaitPollsInline: on transports that complete a WRITE as it is
// posted, a writer finds its completions itself and never parks (no
// goroutine hand-off per write); on the others it parks and is woken.
func TestMirrorWaitPollsInline(t *testing.T) {
	for name, tc := range transports(t) {
		t.Run(name, func(t *testing.T) {
			m, _ := newTestMirror(t, tc.tr, tc.addr, 2)
			rec := bytes.Repeat([]byte{3}, 64)
			off := int64(4096)
			for range 200 {
				pos, err := m.Append(off, rec)
				if err != nil {
					t.Fatal(err)
				}
				off += int64(len(rec))
				if err := m.WaitTimeout(pos, 10*time.Second); err != nil {
					t.Fatal(err)
				}
				if !m.Acked(pos) {
					t.Fatal("waited position not acknowledged")
				}
			}
			m.mu.Lock()
			parks := m.parks
			m.mu.Unlock()
			if name != "tcp" && parks != 0 {
				t.Errorf("%d of 200 waits parked, want none", parks)
			}
			t.Logf("%d of 200 waits parked", parks)
		})
	}
}

// TestMirrorIdleBackupDropped: a backup whose QP breaks while nobody
// writes is dropped within a bounded time all the same.
func TestMirrorIdleBackupDropped(t *testing.T) {
	for name, tc := range transports(t) {
		t.Run(name, func(t *testing.T) {
			m, ends := newTestMirror(t, tc.tr, tc.addr, 2)
			pos, err := m.Append(4096, bytes.Repeat([]byte{5}, 64))
			if err != nil {
				t.Fatal(err)
			}
			if err := m.WaitTimeout(pos, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			ends[1].qp.Close()
			deadline := time.Now().Add(5 * time.Second)
			for !m.IsDropped("b1") {
				if time.Now().After(deadline) {
					t.Fatal("a backup that died while idle was not dropped in 5 s")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if m.IsDropped("b0") {
				t.Fatal("the live backup was dropped too")
			}
		})
	}
}

// postCompletions posts n signaled WRITEs of the tail's first bytes to
// every backup of m, as if the mirror had posted them: the last one's ID
// acknowledges end, the others less. Loopback completes them as posted.
func postCompletions(t *testing.T, m *Mirror, n int, end int64) {
	t.Helper()
	for _, b := range m.backups {
		for i := range n {
			id := m.gen<<40 | uint64(end-int64(n-1-i))
			err := b.QP.PostWrite(rdma.WriteWR{ID: id, Local: m.staging, Len: 8, Remote: b.Buffer, Signaled: true})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestMirrorDrainsBursts: completions queued in a burst larger than a
// poll are all collected at once, by a waiter that does not park
// (Acked) and for a waiter that parked, without waiting for a timer (the
// mirror's timers are set to an hour here).
func TestMirrorDrainsBursts(t *testing.T) {
	const burst = 300
	for _, parked := range []bool{false, true} {
		t.Run(fmt.Sprintf("parked=%v", parked), func(t *testing.T) {
			bs, _, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("m%d", loopAddrs) }, 2)
			m, err := newMirror(mirrorSeg, 1, cq, bs, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			pos, err := m.Append(4096, bytes.Repeat([]byte{7}, 4096))
			if err != nil {
				t.Fatal(err)
			}
			m.mu.Lock()
			m.posted = m.appended // the test posts in the mirror's place
			m.mu.Unlock()
			if !parked {
				postCompletions(t, m, burst, pos.end)
				if !m.Acked(pos) {
					t.Fatalf("%d queued completions per backup not all collected by Acked", burst)
				}
				return
			}
			waited := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				waited <- m.Wait(ctx, pos)
			}()
			for {
				m.mu.Lock()
				w := m.waiters
				if w > 0 {
					// The burst lands while the waiter is parked.
					postCompletions(t, m, burst, pos.end)
					m.mu.Unlock()
					break
				}
				m.mu.Unlock()
				time.Sleep(time.Millisecond)
			}
			if err := <-waited; err != nil {
				t.Fatalf("parked waiter, %d completions per backup queued at once: %v", burst, err)
			}
		})
	}
}

// TestMirrorCloseReportsNoDrop: the QPs closed after the mirror are no
// failed backups, even when Acked is asked afterwards.
func TestMirrorCloseReportsNoDrop(t *testing.T) {
	bs, _, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("m%d", loopAddrs) }, 2)
	m, err := NewMirror(mirrorSeg, 1, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var reported []string
	m.OnDrop(func(name string, err error) {
		mu.Lock()
		reported = append(reported, name)
		mu.Unlock()
	})
	pos, err := m.Append(4096, bytes.Repeat([]byte{9}, 64))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.WaitTimeout(pos, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		b.QP.Close()
	}
	m.Acked(pos)
	for _, b := range bs {
		if m.IsDropped(b.Name) {
			t.Errorf("backup %s dropped after the mirror closed: %v", b.Name, m.Dropped()[b.Name])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) > 0 {
		t.Errorf("drops reported after the mirror closed: %v", reported)
	}
}

// TestMirrorWaitOnClosedMirrorIsStreamClosed: a write waiting for its
// backups when the mirror closes (its region deposed or handed over) fails
// with ErrStreamClosed, which the server answers as UNAVAILABLE (retry at
// the next primary), not with the transport's own "closed".
func TestMirrorWaitOnClosedMirrorIsStreamClosed(t *testing.T) {
	bs, _, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("c%d", loopAddrs) }, 2)
	var held []*heldQP
	for i := range bs {
		q := &heldQP{QP: bs[i].QP}
		bs[i].QP, held = q, append(held, q)
	}
	m, err := NewMirror(mirrorSeg, 1, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range held {
		q.m = m
		q.hold() // the WRITEs land; their completions never come
	}
	pos, err := m.Append(4096, bytes.Repeat([]byte{7}, 64))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- m.WaitTimeout(pos, 30*time.Second) }()
	for held[0].outstanding() == 0 || held[1].outstanding() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // the waiter parked
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if !errors.Is(err, ErrStreamClosed) {
			t.Fatalf("waiter woken by Close: %v, want ErrStreamClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by Close")
	}
	if err := m.WaitTimeout(pos, time.Second); !errors.Is(err, ErrStreamClosed) {
		t.Fatalf("wait after Close: %v, want ErrStreamClosed", err)
	}
}

// newTailMirror starts a mirror of r's log tail to backups bs (their QPs
// report to cq), closed at the test's end.
func newTailMirror(t testing.TB, r *engine.Region, cq *rdma.CQ, bs []Backup) *Mirror {
	t.Helper()
	tail, err := r.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMirror(mirrorSeg, tail.Segment, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestMirrorConfirmFailsOnceABackupFenced: Confirm answers while every
// backup's buffer is valid (many callers at once, writes going on), and
// fails, dropping the backup, once one backup revoked its buffer (it
// fenced this primary off to be promoted): a read confirmed after that
// would not be linearizable.
func TestMirrorConfirmFailsOnceABackupFenced(t *testing.T) {
	for name, tc := range transports(t) {
		t.Run(name, func(t *testing.T) {
			m, ends := newTestMirror(t, tc.tr, tc.addr, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			rec := bytes.Repeat([]byte{7}, 100)
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 50 {
						if err := m.Confirm(5 * time.Second); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			for i := range 50 {
				pos, err := m.Append(4096+int64(i)*100, rec)
				if err != nil {
					t.Fatal(err)
				}
				if err := m.Wait(ctx, pos); err != nil {
					t.Fatal(err)
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatalf("confirm with every buffer valid: %v", err)
			}
			if len(m.Dropped()) != 0 {
				t.Fatalf("dropped %v with every buffer valid", m.Dropped())
			}
			ends[1].buf.Revoke()
			if err := m.Confirm(5 * time.Second); !errors.Is(err, ErrBackupDropped) {
				t.Fatalf("confirm after a backup fenced: %v, want ErrBackupDropped", err)
			}
			if _, ok := m.Dropped()["b1"]; !ok || len(m.Dropped()) != 1 {
				t.Fatalf("dropped %v, want b1 alone", m.Dropped())
			}
			if err := m.Confirm(5 * time.Second); !errors.Is(err, ErrBackupDropped) {
				t.Fatalf("second confirm: %v, want ErrBackupDropped", err)
			}
			m.Close()
			if err := m.Confirm(5 * time.Second); !errors.Is(err, ErrStreamClosed) {
				t.Fatalf("confirm on a closed mirror: %v, want ErrStreamClosed", err)
			}
		})
	}
}
