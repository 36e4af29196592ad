package zkserver

import (
	"context"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

func TestEnsemble(t *testing.T) {
	t.Parallel()
	e := EnsembleForTest(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	modes := map[string]int{}
	for _, s := range e.Servers {
		mode, err := s.Mode(ctx)
		if err != nil {
			t.Fatal(err)
		}
		modes[mode]++
	}
	if modes["leader"] != 1 || modes["follower"] != 2 {
		t.Fatalf("modes %v, want 1 leader and 2 followers", modes)
	}

	// Written through one member, read through another.
	a, b := connect(t, e.Servers[0].Addr()), connect(t, e.Servers[1].Addr())
	if _, err := a.Create("/x", []byte("1"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Sync("/x"); err != nil {
		t.Fatal(err)
	}
	if v, _, err := b.Get("/x"); err != nil || string(v) != "1" {
		t.Fatalf("Get through another member = %q, %v", v, err)
	}

	// Kill the leader: the other two elect a new one, and serve.
	old, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 20*time.Second)
	defer lcancel()
	leader, err := e.Leader(lctx)
	if err != nil {
		t.Fatal(err)
	}
	if leader == old {
		t.Fatal("the killed server is still the leader")
	}
	t.Logf("new leader %s elected %v after the kill", leader.Addr(), time.Since(killed).Round(time.Millisecond))
	var rest []string
	for _, s := range e.Servers {
		if s != old {
			rest = append(rest, s.Addr())
		}
	}
	c := connect(t, rest...)
	if _, err := c.Create("/y", []byte("2"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if v, _, err := c.Get("/x"); err != nil || string(v) != "1" {
		t.Fatalf("Get /x after failover = %q, %v", v, err)
	}
}
