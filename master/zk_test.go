package master

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/zkserver"
)

// TestRunOnZooKeeper runs two masters on a real ZooKeeper: the first
// leads and keeps the map; when it dies the second takes over and heals a
// region server's failure.
func TestRunOnZooKeeper(t *testing.T) {
	zs := zkserver.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func() *coord.Session {
		t.Helper()
		s, err := coord.Dial(ctx, coord.Config{Servers: []string{zs.Addr()}, Root: "/tebis", SessionTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	admin := dial()
	rs := map[string]*coord.Session{}
	for _, n := range []string{"rs1", "rs2", "rs3"} {
		rs[n] = dial()
		if err := rs[n].Register(ctx, coord.ServerInfo{Server: srv(n), Started: 1}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 3, Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateMap(ctx, m); err != nil {
		t.Fatal(err)
	}
	readMap := func() (*regionmap.Map, int32) {
		t.Helper()
		got, ver, err := admin.ReadMap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return got, ver
	}
	leaderIs := func(name string) func() bool {
		return func() bool { l, err := admin.Leader(ctx); return err == nil && l == name }
	}

	type master struct {
		sess   *coord.Session
		cancel context.CancelFunc
		done   chan struct{} // closed when Run returned err
		err    error
	}
	start := func(name string) *master {
		s := dial()
		mctx, mcancel := context.WithCancel(ctx)
		mm := &master{sess: s, cancel: mcancel, done: make(chan struct{})}
		go func() {
			defer close(mm.done)
			mm.err = Run(mctx, Config{Name: name, Coord: ZK(s), Grace: 2 * time.Second,
				Recheck: 50 * time.Millisecond, Log: zaptest.NewLogger(t).Named(name)})
		}()
		t.Cleanup(func() {
			mcancel()
			select {
			case <-mm.done:
			case <-time.After(10 * time.Second):
				t.Errorf("master %s did not stop", name)
			}
		})
		return mm
	}

	m1 := start("m1")
	wait(t, "m1 leading", leaderIs("m1"))
	m2 := start("m2")
	// m1 keeps the map: a healthy cluster's map stays; a new server is
	// added to it.
	time.Sleep(300 * time.Millisecond)
	if _, ver := readMap(); ver != 0 {
		t.Fatalf("a healthy cluster's map was rewritten (znode version %d)", ver)
	}
	if l, _ := admin.Leader(ctx); l != "m1" {
		t.Fatalf("leader %q, want m1", l)
	}
	rs["rs4"] = dial()
	if err := rs["rs4"].Register(ctx, coord.ServerInfo{Server: srv("rs4"), Started: 1}); err != nil {
		t.Fatal(err)
	}
	wait(t, "rs4 in the map", func() bool { got, _ := readMap(); _, ok := got.Server("rs4"); return ok })
	before, ver := readMap()

	// m1 dies: m2 takes over; m1's Run ends with an error.
	m1.sess.Close()
	select {
	case <-m1.done:
		if !errors.Is(m1.err, coord.ErrNoSession) {
			t.Fatalf("m1's Run after its session closed = %v, want ErrNoSession", m1.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("m1's Run still running 10s after its session closed")
	}
	wait(t, "m2 leading", leaderIs("m2"))

	// rs1 dies: m2 promotes the backups of rs1's regions (at once if it
	// saw rs1 live, else after the Grace: rs1 may have gone before m2's
	// first look at the servers).
	rs["rs1"].Close()
	for _, r := range before.Regions { // its backups report their copies (region/logpos.go)
		if r.Primary != "rs1" {
			continue
		}
		for _, b := range r.Backups {
			if err := rs[b].Report(ctx, coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: b, Pos: 1 << 32, Complete: true}); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait(t, "a map without rs1", func() bool {
		got, _ := readMap()
		for _, r := range got.Regions {
			if r.Primary == "rs1" || slices.Contains(r.Group(), "rs1") {
				return false
			}
		}
		return true
	})
	after, ver2 := readMap()
	if err := after.Validate(); err != nil {
		t.Fatal(err)
	}
	if ver2 <= ver || after.Version <= before.Version {
		t.Fatalf("map version %d (znode %d) after %d (znode %d)", after.Version, ver2, before.Version, ver)
	}
	for _, r := range before.Regions {
		if r.Primary != "rs1" {
			continue
		}
		if nr := after.Region(r.ID); nr.Primary != r.Backups[0] || nr.Epoch <= r.Epoch {
			t.Fatalf("region %+v after its primary rs1 died: %+v", r, nr)
		}
	}
	m2.cancel()
	<-m2.done
	if m2.err != nil {
		t.Fatalf("m2's Run = %v at its context's end", m2.err)
	}
}
