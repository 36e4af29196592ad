package replication

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
	"go.uber.org/zap/zaptest"
)

// Hung backups (hung.go): the watchdog runs on injected ticks, so every
// test here is about injected time; nothing waits for HungAfter to pass.

// hungAfter is the tests' HungAfter (injected time only): a tick period
// of 250 ms.
const hungAfter = time.Second

// stallLink is a backup's command link that, once stalled, holds every
// Send until the test releases it or the Send's context ends: a backup
// that stopped taking commands (a stopped process, a partition).
type stallLink struct {
	Link
	stalled   atomic.Bool
	entered   chan *Command // a Send began while stalled
	release   chan struct{} // lets one held Send through
	cancelled atomic.Int32  // held Sends ended by their context
}

func newStallLink(l Link) *stallLink {
	return &stallLink{Link: l, entered: make(chan *Command, 64), release: make(chan struct{})}
}

func (l *stallLink) Send(ctx context.Context, c *Command) ([]byte, error) {
	if l.stalled.Load() {
		l.entered <- c
		select {
		case <-l.release:
		case <-ctx.Done():
			l.cancelled.Add(1)
			return nil, ctx.Err()
		}
	}
	return l.Link.Send(ctx, c)
}

// heldQP is a backup's mirror QP (over a loopback one) whose WRITEs land
// at once, but whose completions are its own: the mirror matches a
// completion to its backup by QP, so heldQP posts unsignaled and delivers
// the completion itself, at once, or once held only when the test
// completes the WRITE: a backup whose WRITE completions stopped (tcp to a
// stopped process, a partition).
type heldQP struct {
	rdma.QP
	m       *Mirror
	mu      sync.Mutex
	held    bool
	pending []uint64 // IDs of signaled WRITEs posted while held
	// posted, if set, sees every WRITE posted to the backup (under the
	// mirror's lock: it must not block).
	posted func(rdma.WriteWR)
}

// PostWrite is called by the mirror under its lock (postLocked).
func (q *heldQP) PostWrite(wr rdma.WriteWR) error {
	signaled := wr.Signaled
	wr.Signaled = false
	if err := q.QP.PostWrite(wr); err != nil || !signaled {
		return err
	}
	q.mu.Lock()
	held, posted := q.held, q.posted
	if held {
		q.pending = append(q.pending, wr.ID)
	}
	q.mu.Unlock()
	if posted != nil {
		posted(wr)
	}
	if !held {
		q.m.applyLocked([]rdma.Completion{{Op: rdma.OpWrite, WRID: wr.ID, QP: q}})
	}
	return nil
}

func (q *heldQP) hold() {
	q.mu.Lock()
	q.held = true
	q.mu.Unlock()
}

func (q *heldQP) watch(f func(rdma.WriteWR)) {
	q.mu.Lock()
	q.posted = f
	q.mu.Unlock()
}

// outstanding is how many held WRITEs have not completed.
func (q *heldQP) outstanding() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// completeOne completes the oldest held WRITE, as its completion arriving.
func (q *heldQP) completeOne(t *testing.T) {
	t.Helper()
	q.mu.Lock()
	if len(q.pending) == 0 {
		q.mu.Unlock()
		t.Fatal("no held WRITE to complete")
	}
	id := q.pending[0]
	q.pending = q.pending[1:]
	q.mu.Unlock()
	q.m.mu.Lock()
	q.m.applyLocked([]rdma.Completion{{Op: rdma.OpWrite, WRID: id, QP: q}})
	q.m.mu.Unlock()
}

// hungRig is a stream of a primary to two Send-Index backups, b0 and b1,
// whose b1 can hang (its commands: link; its WRITE completions: qp); the
// watchdog samples at the test's ticks.
type hungRig struct {
	t       *testing.T
	g       *replGroup
	ticks   chan time.Time
	sampled chan struct{}
	now     time.Time
	link    *stallLink
	qp      *heldQP
	drops   chan error // OnDrop of b1
}

// newHungRig writes a little through a fresh group, then re-attaches it
// with the rig's stream (strict or not, minCopies; opts edit its
// configuration).
func newHungRig(t *testing.T, strict bool, minCopies int, opts ...func(*ShipperConfig)) *hungRig {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 18))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	g.write(rng, 2, 100, 2400)
	g.settle()
	g.shipper.Close()
	g.mirror.Close()
	r := &hungRig{t: t, g: g, ticks: make(chan time.Time), sampled: make(chan struct{}), now: time.Unix(1000, 0), drops: make(chan error, 4)}
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("hung%d", loopAddrs) }, 2)
	r.qp = &heldQP{QP: bs[1].QP}
	bs[1].QP = r.qp
	links := map[string]Link{}
	for i, rep := range g.reps {
		if err := rep.SetBuffer(ends[i].buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		links[bs[i].Name] = &LocalLink{Replica: rep}
	}
	r.link = newStallLink(links["b1"])
	links["b1"] = r.link
	m := newTailMirror(t, g.pr, cq, bs)
	r.qp.m = m
	cfg := ShipperConfig{Region: g.pr, Epoch: 3, Mode: SendIndex, SegSize: mirrorSeg, Mirror: m,
		Links: links, Credits: 2, Log: zaptest.NewLogger(t), Strict: strict, MinCopies: minCopies,
		OnDrop: func(name string, err error) {
			if name == "b1" {
				r.drops <- err
			}
		},
		HungAfter: hungAfter, hungTicks: r.ticks, hungSampled: r.sampled}
	for _, o := range opts {
		o(&cfg)
	}
	sh, err := startShipper(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.Close)
	g.mirror, g.shipper, g.ends = m, sh, ends
	if d := sh.Dropped(); len(d) != 0 {
		t.Fatalf("dropped at attach: %v", d)
	}
	return r
}

// tick advances the injected clock by d and has the watchdog sample,
// returning once the sample is taken. The healthy backup's
// commands take microseconds but a whole HungAfter of injected time can
// pass meanwhile: the sample waits until none is in flight.
func (r *hungRig) tick(d time.Duration) {
	r.t.Helper()
	s := r.g.shipper
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Microsecond) {
		s.mu.Lock()
		busy := false
		for _, b := range s.backups {
			busy = busy || (b.name != "b1" && b.busy)
		}
		s.mu.Unlock()
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatal("b0's command in flight for 5 s")
		}
	}
	r.now = r.now.Add(d)
	r.ticks <- r.now
	<-r.sampled
}

// ticksFor samples every period for d of injected time.
func (r *hungRig) ticksFor(d time.Duration) {
	for range d / (hungAfter / 4) {
		r.tick(hungAfter / 4)
	}
}

func (r *hungRig) dropped() bool { return r.g.mirror.IsDropped("b1") }

// waitDrop waits (real time, a bound only) for b1's drop report.
func (r *hungRig) waitDrop() error {
	r.t.Helper()
	select {
	case err := <-r.drops:
		return err
	case <-time.After(5 * time.Second):
		r.t.Fatal("b1 dropped, but OnDrop did not report it")
		return nil
	}
}

func (r *hungRig) put(k string) error { return r.g.pr.Put([]byte(k), []byte("v-"+k)) }

// quiet waits until the region and the stream are idle: no command of a
// compaction the rig's writes started is left to reach a backup.
func (r *hungRig) quiet() {
	r.t.Helper()
	if err := r.g.pr.WaitIdle(); err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.g.shipper.Idle(ctx); err != nil {
		r.t.Fatal(err)
	}
}

// flushAsync runs the stream's Flush (a FLUSH to every backup) on a
// goroutine; its error comes on the channel.
func (r *hungRig) flushAsync() <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- r.g.shipper.Flush(ctx)
	}()
	return done
}

// hangUntilDropped takes samples while b1's outstanding work completes
// nothing: the first sample that sees it outstanding, then HungAfter
// less a millisecond (kept: a slow backup may still complete), then the
// millisecond (dropped).
func (r *hungRig) hangUntilDropped(what string) {
	r.t.Helper()
	r.tick(hungAfter / 4)
	r.ticksFor(hungAfter * 3 / 4)
	r.tick(hungAfter/4 - time.Millisecond)
	if r.dropped() {
		r.t.Fatalf("b1 dropped before %v without %s", hungAfter, what)
	}
	r.tick(time.Millisecond)
	if !r.dropped() {
		r.t.Fatalf("b1 not dropped after %v without %s", hungAfter, what)
	}
	if err := r.waitDrop(); !errors.Is(err, ErrBackupHung) {
		r.t.Fatalf("OnDrop: %v, want ErrBackupHung", err)
	}
	if err := r.g.shipper.Dropped()["b1"]; !errors.Is(err, ErrBackupHung) {
		r.t.Fatalf("Dropped: %v, want ErrBackupHung", err)
	}
}

// TestHungBackupCommandsDropped: a backup that stops answering commands
// (its command in flight never completes) is dropped once HungAfter of
// the primary's time passed without a completion, not after the 30 s
// command timeout, exactly as a failed command drops it: OnDrop reports
// it (ErrBackupHung), the Send in flight ends, the stream's waits go on.
// Then the region's writes follow the usual rules: a strict stream
// refuses them (ErrBackupDropped) until its group is redone; otherwise
// they are acknowledged with the backup left while MinCopies holds, and
// refused (ErrTooFewCopies) when it does not.
func TestHungBackupCommandsDropped(t *testing.T) {
	for _, tc := range []struct {
		name      string
		strict    bool
		minCopies int
		want      error
	}{
		{"strict", true, 1, ErrBackupDropped},
		{"min-copies-2", false, 2, nil},
		{"min-copies-3", false, 3, ErrTooFewCopies},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newHungRig(t, tc.strict, tc.minCopies)
			if err := r.put("before"); err != nil {
				t.Fatal(err)
			}
			r.quiet()
			r.tick(0)
			r.link.stalled.Store(true)
			flushed := r.flushAsync()
			<-r.link.entered
			r.hangUntilDropped("a command completing")
			if err := <-flushed; err != nil {
				t.Fatalf("flush to the backup left: %v", err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for r.link.cancelled.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the hung backup's command in flight was not ended by its drop")
				}
				time.Sleep(time.Millisecond)
			}
			if err := r.put("after"); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("a put after the drop: %v, want %v", err, tc.want)
			}
			if d := r.g.shipper.Dropped(); len(d) != 1 {
				t.Fatalf("dropped %v, want b1 only", d)
			}
		})
	}
}

// TestHungBackupWritesDropped: a backup whose WRITE completions stop is
// dropped after HungAfter without one, and a write waiting for it is then
// acknowledged by the backup left (MinCopies 1): it waited for HungAfter,
// not for the 30 s timeout.
func TestHungBackupWritesDropped(t *testing.T) {
	r := newHungRig(t, false, 1)
	r.quiet()
	r.tick(0)
	r.qp.hold()
	put := make(chan error, 1)
	go func() { put <- r.put("held") }()
	for r.qp.outstanding() == 0 {
		time.Sleep(time.Millisecond)
	}
	r.hangUntilDropped("a WRITE completing")
	select {
	case err := <-put:
		if err != nil {
			t.Fatalf("the put held by b1's WRITE: %v, want it acknowledged by b0", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the put held by b1's WRITE still waits after b1 was dropped")
	}
	if err := r.put("after"); err != nil {
		t.Fatal(err)
	}
}

// TestSlowBackupNotDropped: a backup that keeps completing, each command
// and each WRITE a whole HungAfter after the previous one but all of them
// together over many times HungAfter, is never dropped: progress is
// measured on completions, not on how long the backup has had work
// outstanding.
func TestSlowBackupNotDropped(t *testing.T) {
	r := newHungRig(t, true, 1)
	r.quiet()
	r.tick(0)
	r.link.stalled.Store(true)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for i := range 12 {
			if err := r.put(fmt.Sprintf("cmd-%d", i)); err != nil {
				done <- err
				return
			}
			if err := r.g.shipper.Flush(ctx); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	held := 0
	for waiting := true; waiting; {
		select {
		case <-r.link.entered:
			held++
			r.ticksFor(hungAfter) // each command completes one HungAfter after it was sent
			r.link.release <- struct{}{}
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			waiting = false
		}
	}
	if held < 12 {
		t.Fatalf("%d commands held, want at least 12", held)
	}
	r.link.stalled.Store(false)
	r.quiet()
	r.qp.hold()
	for i := range 12 {
		put := make(chan error, 1)
		go func() { put <- r.put(fmt.Sprintf("write-%d", i)) }()
		for r.qp.outstanding() == 0 {
			time.Sleep(time.Millisecond)
		}
		r.ticksFor(hungAfter) // each WRITE completes one HungAfter after it was posted
		r.qp.completeOne(t)
		if err := <-put; err != nil {
			t.Fatal(err)
		}
	}
	if r.dropped() {
		t.Fatalf("a slow backup was dropped: %v", r.g.shipper.Dropped()["b1"])
	}
}

// TestIdleBackupNotDropped: a backup with nothing outstanding is not hung,
// however long nothing is sent to it.
func TestIdleBackupNotDropped(t *testing.T) {
	r := newHungRig(t, true, 1)
	if err := r.put("k"); err != nil {
		t.Fatal(err)
	}
	r.quiet()
	r.link.stalled.Store(true) // would hold a command, but none is sent
	r.qp.hold()                // would hold a WRITE, but none is posted
	r.tick(0)
	r.ticksFor(20 * hungAfter)
	if r.dropped() {
		t.Fatalf("an idle backup was dropped: %v", r.g.shipper.Dropped()["b1"])
	}
}

// TestPrimaryPauseNotBlamedOnBackup: time the primary itself did not run
// (a pause between two samples: GC, scheduling, SIGSTOP) counts for at
// most two sample periods against a backup's outstanding work; only the
// primary's own running time adds up to HungAfter.
func TestPrimaryPauseNotBlamedOnBackup(t *testing.T) {
	r := newHungRig(t, true, 1)
	if err := r.put("k"); err != nil {
		t.Fatal(err)
	}
	r.quiet()
	r.tick(0)
	r.link.stalled.Store(true)
	flushed := r.flushAsync()
	<-r.link.entered
	r.tick(hungAfter / 4) // the first sample that sees the command
	r.tick(time.Hour)     // the primary was paused: counts as two periods
	r.tick(hungAfter / 4)
	if r.dropped() {
		t.Fatal("a pause of the primary was blamed on its backup")
	}
	r.tick(hungAfter / 4) // four periods of the primary's time
	if !r.dropped() {
		t.Fatalf("b1 not dropped after %v of the primary's time without a completion", hungAfter)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
}
