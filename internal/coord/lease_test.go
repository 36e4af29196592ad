package coord

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// fakeClock is a Clock moved by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestLease drives a lease through scripted steps on a fake clock (session
// timeout T = 1 s, the lease LeaseFraction x T from a renewal's send).
func TestLease(t *testing.T) {
	const T = time.Second
	half := time.Duration(float64(T) * LeaseFraction)
	type step struct {
		begin   string        // start renewal <name>
		confirm string        // confirm renewal <name>
		advance time.Duration // move the clock
		revoke  bool
		noTime  bool // the session timeout is not known (yet)
		holds   bool // expected after the step
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"renewal grants the lease from its send", []step{
			{begin: "a"}, {advance: 10 * time.Millisecond}, {confirm: "a", holds: true},
			{advance: half - 10*time.Millisecond - 1, holds: true}, // ends at send + fraction x T, not answer + ...
			{advance: 1, holds: false},
		}},
		{"an answer arriving after a pause does not extend it", []step{
			{begin: "a"}, {confirm: "a", holds: true},
			{begin: "b"}, {advance: 3 * T}, // paused after sending b: its answer was buffered
			{confirm: "b", holds: false},
		}},
		{"a pause shorter than the lease keeps it, the renewals extend it", []step{
			{begin: "a"}, {confirm: "a", holds: true},
			{advance: half / 2, holds: true},
			{begin: "b"}, {advance: half / 4, holds: true}, {confirm: "b", holds: true},
			{advance: half / 2, holds: true}, // past a's end, within b's
			{advance: half / 2, holds: false},
		}},
		{"a late answer to an older renewal does not shorten a newer one", []step{
			{begin: "a"}, {advance: half / 4}, {begin: "b"}, {confirm: "b", holds: true},
			{confirm: "a", holds: true}, {advance: half - half/8, holds: true},
		}},
		{"an expiry revokes it, renewals begun before do not count", []step{
			{begin: "a"}, {confirm: "a", holds: true},
			{begin: "b"}, {revoke: true, holds: false},
			{confirm: "b", holds: false},
			{begin: "c"}, {confirm: "c", holds: true}, // the new session's renewal
		}},
		{"no lease while the session timeout is unknown", []step{
			{noTime: true}, {begin: "a"}, {confirm: "a", holds: false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Unix(1000, 0)}
			l := NewLease(clk)
			l.SetSessionTimeout(T)
			ren := map[string]Renewal{}
			for i, s := range tc.steps {
				switch {
				case s.noTime:
					l.SetSessionTimeout(0)
					continue
				case s.begin != "":
					ren[s.begin] = l.Begin()
					s.holds = l.Holds() // not checked: beginning changes nothing
				case s.confirm != "":
					if got := l.Confirm(ren[s.confirm]); got != s.holds {
						t.Fatalf("step %d: Confirm(%s) = %v, want %v", i, s.confirm, got, s.holds)
					}
				case s.revoke:
					l.Revoke()
				default:
					clk.advance(s.advance)
				}
				if got := l.Holds(); got != s.holds {
					t.Fatalf("step %d (%+v): Holds = %v, want %v (remaining %v)", i, s, got, s.holds, l.Remaining())
				}
			}
		})
	}
}

// TestKeepLease: a registered session's lease holds while KeepLease runs
// and its registration is its own; partitioned, the lease ends within
// LeaseFraction of the timeout, long before the server expires the
// session; after the expiry it holds again only once the server
// registered again in the new session.
func TestKeepLease(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	p := newProxy(t, addr)
	const timeout = 800 * time.Millisecond
	s, obs := dial(t, p.Addr(), timeout), dial(t, addr, 0)
	ctx := ctxFor(t, 60*time.Second)
	// Logged by the library right after the session event Dial waits for.
	eventually(t, "the granted session timeout", func() bool { return s.Lease().SessionTimeout() != 0 })
	if got := s.Lease().SessionTimeout(); got != timeout {
		t.Fatalf("lease session timeout %v, want the granted %v", got, timeout)
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.KeepLease(kctx, "rs1") }()
	defer func() { stop(); <-done }()
	time.Sleep(timeout / 2)
	if s.Lease().Holds() {
		t.Fatal("the lease holds with no registration")
	}
	if err := s.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lease", s.Lease().Holds)
	if r := s.Lease().Remaining(); r > time.Duration(float64(timeout)*LeaseFraction) {
		t.Fatalf("lease remaining %v, more than %v x the session timeout", r, LeaseFraction)
	}
	expired := s.Expired()
	p.Cut()
	cut := time.Now()
	eventually(t, "the lease ending", func() bool { return !s.Lease().Holds() })
	lapsed := time.Since(cut)
	if lapsed > time.Duration(float64(timeout)*LeaseFraction)+100*time.Millisecond {
		t.Errorf("the lease ended %v after the cut, want within %v x %v", lapsed, LeaseFraction, timeout)
	}
	if owner(t, obs, obs.path("servers", "rs1")) == -1 {
		t.Fatal("the session expired before the lease ended")
	}
	eventually(t, "the server expiring the session", func() bool { return owner(t, obs, obs.path("servers", "rs1")) == -1 })
	p.Heal()
	if !closedWithin(expired, 15*time.Second) {
		t.Fatal("Expired did not fire after the partition healed")
	}
	time.Sleep(timeout / 2)
	if s.Lease().Holds() {
		t.Fatal("the lease holds in the new session before the server registered again")
	}
	if err := s.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lease in the new session", s.Lease().Holds)
}

// TestKeepLeaseOnClock: a session dialed with a clock that can wait
// (clockwork's) measures its lease on it and paces the renewals on it:
// the renewal loop waits on the clock, a renewal grants LeaseFraction x
// the timeout from the clock's reading when it was sent, and the next one
// is sent once the clock has moved an eighth of the timeout.
func TestKeepLeaseOnClock(t *testing.T) {
	t.Parallel()
	clk := clockwork.NewFakeClockAt(time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	s, err := Dial(ctxFor(t, 20*time.Second), Config{Servers: []string{zkAddr(t)}, Root: root(t), SessionTimeout: 800 * time.Millisecond, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	eventually(t, "the granted session timeout", func() bool { return s.Lease().SessionTimeout() != 0 })
	timeout := s.Lease().SessionTimeout()
	half := time.Duration(float64(timeout) * LeaseFraction)
	ctx := ctxFor(t, 30*time.Second)
	if err := s.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); s.KeepLease(kctx, "rs1") }()
	defer func() { stop(); <-done }()
	eventually(t, "the lease", s.Lease().Holds)
	if err := clk.BlockUntilContext(ctxFor(t, 5*time.Second), 1); err != nil {
		t.Fatalf("the renewal loop does not wait on the session's clock: %v", err)
	}
	if r := s.Lease().Remaining(); r != half {
		t.Fatalf("lease remaining %v with the clock standing since the renewal, want %v", r, half)
	}
	clk.Advance(timeout / 8)
	eventually(t, "a renewal sent at the clock's new reading", func() bool { return s.Lease().Remaining() == half })
}

// TestLeaseGrantedTimeout: ZooKeeper clamps a session timeout above its
// maximum; the lease is derived from the granted one.
func TestLeaseGrantedTimeout(t *testing.T) {
	t.Parallel()
	s := dial(t, zkAddr(t), time.Hour)
	eventually(t, "the granted session timeout", func() bool { return s.Lease().SessionTimeout() != 0 })
	if got := s.Lease().SessionTimeout(); got <= 0 || got >= time.Hour {
		t.Fatalf("lease session timeout %v: want the granted one (ZooKeeper's maximum), below the asked hour", got)
	}
}

// BenchmarkLeaseHolds is the lease check a read pays (twice) on the
// system clock.
func BenchmarkLeaseHolds(b *testing.B) {
	l := NewLease(nil)
	l.SetSessionTimeout(time.Hour)
	l.Confirm(l.Begin())
	for b.Loop() {
		if !l.Holds() {
			b.Fatal("lease")
		}
	}
}
