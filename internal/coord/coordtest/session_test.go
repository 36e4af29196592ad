package coordtest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

func info(name string, run int64) coord.ServerInfo {
	return coord.ServerInfo{Server: regionmap.Server{Name: name, TCP: name}, Started: run}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// within polls cond every millisecond, failing the test after d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSessionEphemerals: a session's registration and health report go
// when it expires (it may register again) and when it closes (later calls
// fail with ErrNoSession); another session's registration of the name is
// waited out.
func TestSessionEphemerals(t *testing.T) {
	c := New(nil, nil)
	a, b := c.NewSession(), c.NewSession()
	ctx := ctxFor(t, 10*time.Second)
	if err := a.Register(ctx, info("rs1", 1)); err != nil {
		t.Fatal(err)
	}
	if err := a.SetHealth(ctx, "rs1", &coord.Health{Name: "rs1", Started: 1, State: coord.HealthFailed}); err != nil {
		t.Fatal(err)
	}
	if err := a.Register(ctx, info("rs1", 2)); err != nil || c.Servers()["rs1"].Started != 2 {
		t.Fatalf("registering again from the same session: %v, %+v", err, c.Servers())
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := b.Register(short, info("rs1", 3)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Register of a name another session holds = %v, want a deadline error", err)
	}

	expired, gen := a.Expired(), a.Generation()
	a.Expire()
	select {
	case <-expired:
	default:
		t.Fatal("Expired's channel is open after Expire")
	}
	if a.Generation() != gen+1 || len(c.Servers()) != 0 || len(c.HealthReports()) != 0 {
		t.Fatalf("after Expire: generation %d, servers %v, health %v", a.Generation(), c.Servers(), c.HealthReports())
	}
	if err := a.Register(ctx, info("rs1", 4)); err != nil {
		t.Fatalf("Register after an expiry = %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- b.Register(ctx, info("rs1", 5)) }()
	a.Close()
	if err := <-done; err != nil || c.Servers()["rs1"].Started != 5 {
		t.Fatalf("Register waiting for a closed session's name: %v, %+v", err, c.Servers())
	}
	if err := a.Report(ctx, coord.JoinReport{Region: 1, Epoch: 1, Server: "rs1"}); !errors.Is(err, coord.ErrNoSession) {
		t.Fatalf("Report on a closed session = %v, want ErrNoSession", err)
	}
	if _, _, err := a.ReadMap(ctx); !errors.Is(err, coord.ErrNoSession) {
		t.Fatalf("ReadMap on a closed session = %v, want ErrNoSession", err)
	}
}

// TestSessionLease: KeepLease makes the lease hold while the session's
// registration stands; an expiry revokes it.
func TestSessionLease(t *testing.T) {
	c := New(nil, nil, WithSessionTimeout(80*time.Millisecond))
	s := c.NewSession()
	t.Cleanup(s.Close)
	ctx := ctxFor(t, 10*time.Second)
	go s.KeepLease(ctx, "rs1")
	if s.Lease().Holds() {
		t.Fatal("the lease holds before the server registered")
	}
	if err := s.Register(ctx, info("rs1", 1)); err != nil {
		t.Fatal(err)
	}
	within(t, 5*time.Second, "the lease", s.Lease().Holds)
	s.Expire()
	if s.Lease().Holds() {
		t.Fatal("the lease holds after an expiry")
	}
}

// TestSessionWatchAsync: a session's watch callback may call the
// Coordinator (delivery is not under its locks) and sees the last state.
func TestSessionWatchAsync(t *testing.T) {
	m := &regionmap.Map{Version: 1, Servers: []regionmap.Server{{Name: "rs1", TCP: "rs1"}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "rs1", Epoch: 1}}}
	c := New(m, nil)
	s := c.NewSession()
	ctx, cancel := context.WithCancel(ctxFor(t, 10*time.Second))
	var mu sync.Mutex
	var last uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.WatchMap(ctx, func(m *regionmap.Map) {
			if err := s.Report(ctx, coord.JoinReport{Region: 1, Epoch: m.Version, Server: "rs1"}); err != nil {
				t.Error(err)
			}
			mu.Lock()
			last = m.Version
			mu.Unlock()
		}, nil)
	}()
	for v := uint64(2); v <= 5; v++ {
		next := m.Clone()
		next.Version = v
		c.PutMap(next)
	}
	within(t, 5*time.Second, "version 5", func() bool { mu.Lock(); defer mu.Unlock(); return last == 5 })
	cancel()
	<-done
	if rs := c.Reports(); len(rs) == 0 || rs[len(rs)-1].Key().Epoch != 5 {
		t.Fatalf("reports %v", rs)
	}
}
