package coord

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/tebis-go/tebis/client/regionmap"
)

func TestRegister(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	obs, s1, s2 := dial(t, addr, 0), dial(t, addr, 0), dial(t, addr, 0)
	p := obs.path("servers", "rs1")

	if err := s1.Register(ctxFor(t, 10*time.Second), server("rs1")); err != nil {
		t.Fatal(err)
	}
	if o := owner(t, obs, p); o != s1.Conn().SessionID() {
		t.Fatalf("rs1's znode is owned by %#x, want s1 %#x", o, s1.Conn().SessionID())
	}
	// Registering again from the same session updates the znode.
	again := server("rs1")
	again.Started = 2
	if err := s1.Register(ctxFor(t, 10*time.Second), again); err != nil {
		t.Fatal(err)
	}
	if live, err := obs.Servers(ctxFor(t, 10*time.Second)); err != nil || live["rs1"].Started != 2 {
		t.Fatalf("Servers = %v, %v; want rs1 started 2", live, err)
	}

	// Another session waits while s1 holds the name: bounded by ctx...
	start := time.Now()
	err := s2.Register(ctxFor(t, 300*time.Millisecond), server("rs1"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Register of a name held by another session = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a Register bounded by 300ms took %v", d)
	}
	// ...and succeeds once s1's session is gone.
	done := make(chan error, 1)
	go func() { done <- s2.Register(ctxFor(t, 15*time.Second), server("rs1")) }()
	select {
	case err := <-done:
		t.Fatalf("Register returned %v while the name was still held", err)
	case <-time.After(300 * time.Millisecond):
	}
	s1.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Register still waiting 10s after the holder's session closed")
	}
	if o := owner(t, obs, p); o != s2.Conn().SessionID() {
		t.Fatalf("rs1's znode is owned by %#x, want s2 %#x", o, s2.Conn().SessionID())
	}
	// The znode is ephemeral: it goes with the session, at once.
	s2.Close()
	if o := owner(t, obs, p); o != -1 {
		t.Fatalf("rs1's znode survived its session (owner %#x)", o)
	}
}

func TestWatchMapInOrder(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	w, writer := dial(t, addr, 0), dial(t, addr, 0)
	ctx := ctxFor(t, 30*time.Second)

	var mu sync.Mutex
	var got []uint64
	wctx, stop := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		w.WatchMap(wctx, func(m *regionmap.Map) {
			mu.Lock()
			got = append(got, m.Version)
			mu.Unlock()
		}, func(err error) { t.Errorf("bad map: %v", err) })
	}()
	defer func() { stop(); <-watchDone }()
	last := func() uint64 {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 {
			return 0
		}
		return got[len(got)-1]
	}

	// The watch starts before the map exists.
	time.Sleep(100 * time.Millisecond)
	if err := writer.CreateMap(ctx, testMap(1)); err != nil {
		t.Fatal(err)
	}
	if err := writer.CreateMap(ctx, testMap(1)); !errors.Is(err, ErrExists) {
		t.Fatalf("second CreateMap = %v, want ErrExists", err)
	}
	eventually(t, "map version 1", func() bool { return last() == 1 })
	lead, err := writer.Campaign(ctx, "writer")
	if err != nil {
		t.Fatal(err)
	}
	const n = 21
	for v := uint64(2); v <= n; v++ {
		if err := lead.WriteMap(ctx, testMap(v), int32(v-2)); err != nil {
			t.Fatalf("write version %d: %v", v, err)
		}
	}
	eventually(t, "the last map version", func() bool { return last() == n })
	// Re-armed: a later change arrives too.
	if err := lead.WriteMap(ctx, testMap(n+1), n-1); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a later map version", func() bool { return last() == n+1 })
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("versions delivered out of order: %v", got)
		}
	}
	t.Logf("delivered %d of %d versions: %v", len(got), n+1, got)
	if m, ver, err := writer.ReadMap(ctx); err != nil || m.Version != n+1 || ver != n {
		t.Fatalf("ReadMap = version %v, znode version %d, %v", m, ver, err)
	}
}

func TestWatchServers(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	w, rs1, rs2 := dial(t, addr, 0), dial(t, addr, 0), dial(t, addr, 0)
	ctx := ctxFor(t, 30*time.Second)

	var mu sync.Mutex
	var cur []string
	calls := 0
	wctx, stop := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		w.WatchServers(wctx, func(live map[string]ServerInfo) {
			var names []string
			for n, si := range live {
				if si.Name != n {
					t.Errorf("server %s has info %+v", n, si)
				}
				names = append(names, n)
			}
			sort.Strings(names)
			mu.Lock()
			cur, calls = names, calls+1
			mu.Unlock()
		})
	}()
	defer func() { stop(); <-watchDone }()
	is := func(names ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return calls > 0 && slices.Equal(cur, names)
		}
	}
	eventually(t, "an empty server list", is())
	if err := rs1.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rs1 joined", is("rs1"))
	if err := rs2.Register(ctx, server("rs2")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rs2 joined", is("rs1", "rs2"))
	rs1.Close()
	eventually(t, "rs1 left", is("rs2"))
	rs2.Close()
	eventually(t, "rs2 left", is())

	// A malformed registration does not hide the others.
	if _, err := w.Conn().Create(w.path("servers", "junk"), []byte("{"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	rs3 := dial(t, addr, 0)
	if err := rs3.Register(ctx, server("rs3")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rs3 joined next to a malformed znode", is("rs3"))
}

func TestCampaign(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	a, b, admin := dial(t, addr, 0), dial(t, addr, 0), dial(t, addr, 0)
	ctx := ctxFor(t, 30*time.Second)
	if err := admin.CreateMap(ctx, testMap(1)); err != nil {
		t.Fatal(err)
	}

	la, err := a.Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if name, err := admin.Leader(ctx); err != nil || name != "a" {
		t.Fatalf("Leader = %q, %v; want a", name, err)
	}
	type result struct {
		l   *Leadership
		err error
	}
	bres := make(chan result, 1)
	go func() {
		l, err := b.Campaign(ctx, "b")
		bres <- result{l, err}
	}()
	select {
	case r := <-bres:
		t.Fatalf("b leads (%v) while a does", r.err)
	case <-time.After(500 * time.Millisecond):
	}
	// The leader writes; a stale version is a conflict.
	if err := la.WriteMap(ctx, testMap(2), 0); err != nil {
		t.Fatal(err)
	}
	if err := la.WriteMap(ctx, testMap(3), 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("WriteMap at a stale version = %v, want ErrConflict", err)
	}
	if closedWithin(la.Lost(), 0) {
		t.Fatal("a's leadership reports lost while it holds")
	}

	// a dies: b leads.
	a.Close()
	var lb *Leadership
	select {
	case r := <-bres:
		if r.err != nil {
			t.Fatal(r.err)
		}
		lb = r.l
	case <-time.After(10 * time.Second):
		t.Fatal("b does not lead 10s after a's session closed")
	}
	if !closedWithin(la.Lost(), 5*time.Second) {
		t.Fatal("a's leadership is not reported lost after its session closed")
	}
	if err := la.WriteMap(ctx, testMap(3), 1); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("WriteMap through a closed session = %v, want ErrNotLeader", err)
	}
	if name, err := admin.Leader(ctx); err != nil || name != "b" {
		t.Fatalf("Leader = %q, %v; want b", name, err)
	}
	if err := lb.WriteMap(ctx, testMap(3), 1); err != nil {
		t.Fatal(err)
	}

	// b resigns: its writes are fenced off, its Lost closes, and it can
	// campaign (and lead) again from the same session.
	lb.Resign()
	if err := lb.WriteMap(ctx, testMap(4), 2); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("WriteMap after Resign = %v, want ErrNotLeader", err)
	}
	if !closedWithin(lb.Lost(), 5*time.Second) {
		t.Fatal("b's leadership is not reported lost after Resign")
	}
	if m, ver, err := admin.ReadMap(ctx); err != nil || m.Version != 3 || ver != 2 {
		t.Fatalf("ReadMap = %+v, %d, %v; want version 3 at znode version 2", m, ver, err)
	}
	lb2, err := b.Campaign(ctxFor(t, 10*time.Second), "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := lb2.WriteMap(ctx, testMap(4), 2); err != nil {
		t.Fatal(err)
	}

	// A campaign cancelled while waiting leaves no candidate behind.
	c := dial(t, addr, 0)
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Campaign(cctx, "c"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled Campaign = %v", err)
	}
	kids, _, err := admin.Conn().Children(admin.path("election"))
	if err != nil || len(kids) != 1 {
		t.Fatalf("candidates %v, %v; want only b's", kids, err)
	}
}

func TestWriteMapWithoutMap(t *testing.T) {
	t.Parallel()
	s := dial(t, zkAddr(t), 0)
	ctx := ctxFor(t, 10*time.Second)
	l, err := s.Campaign(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteMap(ctx, testMap(2), 0); !errors.Is(err, ErrNoMap) {
		t.Fatalf("WriteMap without a map = %v, want ErrNoMap", err)
	}
	if err := l.WriteMap(ctx, &regionmap.Map{}, 0); !errors.Is(err, regionmap.ErrInvalid) {
		t.Fatalf("WriteMap of an invalid map = %v", err)
	}
}

func TestReports(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	w, s := dial(t, addr, 0), dial(t, addr, 0)
	ctx := ctxFor(t, 30*time.Second)
	var mu sync.Mutex
	var cur []Report
	wctx, stop := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		w.WatchReports(wctx, func(rs []Report) {
			mu.Lock()
			cur = rs
			mu.Unlock()
		})
	}()
	defer func() { stop(); <-watchDone }()
	are := func(want ...Report) func() bool {
		SortReports(want)
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(cur, want)
		}
	}
	old, cur1, other := JoinReport{Region: 1, Epoch: 2, Server: "rs-a"}, JoinReport{Region: 1, Epoch: 3, Server: "rs-b"}, JoinReport{Region: 2, Epoch: 1, Server: "rs-c"}
	drop := DropReport{Region: 2, Epoch: 1, Server: "rs-c"} // a drop report is its own entry
	pos := LogReport{Region: 1, Epoch: 2, Server: "rs-c", Pos: 7<<32 | 4096, Complete: true}
	for _, r := range []Report{old, cur1, other, cur1, drop, pos} {
		if err := s.Report(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "three joins, a drop and a log position", are(old, cur1, other, drop, pos))
	if err := s.ForgetReports(ctx, map[uint64]uint64{1: 3, 2: 1}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the old join and position forgotten", are(cur1, other, drop))
}

// TestExpiry partitions a session from the server for longer than its
// timeout: the server expires it, and the client learns so when it
// reconnects.
func TestExpiry(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	p := newProxy(t, addr)
	s, obs := dial(t, p.Addr(), 800*time.Millisecond), dial(t, addr, 0)
	ctx := ctxFor(t, 60*time.Second)
	if err := obs.CreateMap(ctx, testMap(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	lead, err := s.Campaign(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen uint64
	wctx, stop := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		s.WatchMap(wctx, func(m *regionmap.Map) { mu.Lock(); seen = m.Version; mu.Unlock() }, nil)
	}()
	defer func() { stop(); <-watchDone }()
	eventually(t, "the first map", func() bool { mu.Lock(); defer mu.Unlock(); return seen == 1 })

	expired, gen, id := s.Expired(), s.Generation(), s.Conn().SessionID()
	p.Cut()
	cut := time.Now()
	eventually(t, "the server expiring the session", func() bool { return owner(t, obs, obs.path("servers", "rs1")) == -1 })
	t.Logf("the server expired the session %v after the cut", time.Since(cut).Round(time.Millisecond))
	if closedWithin(expired, 0) {
		t.Fatal("Expired fired while partitioned (the client cannot know yet)")
	}
	p.Heal()
	if !closedWithin(expired, 15*time.Second) {
		t.Fatal("Expired did not fire after the partition healed")
	}
	if g := s.Generation(); g != gen+1 {
		t.Fatalf("Generation = %d after one expiry, want %d", g, gen+1)
	}
	if !closedWithin(lead.Lost(), 5*time.Second) {
		t.Fatal("the leadership of the expired session is not lost")
	}
	eventually(t, "a new session", func() bool { return s.Connected() && s.Conn().SessionID() != id })
	if closedWithin(s.Expired(), 0) {
		t.Fatal("the next Expired channel is already closed")
	}
	// The new session works: a deposed leader is fenced, registering
	// again works, and the map watch is re-armed.
	if err := lead.WriteMap(ctx, testMap(2), 0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("WriteMap of the expired leadership = %v, want ErrNotLeader", err)
	}
	if err := s.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	if o := owner(t, obs, obs.path("servers", "rs1")); o != s.Conn().SessionID() {
		t.Fatalf("rs1 registered by %#x, want the new session %#x", o, s.Conn().SessionID())
	}
	lead2, err := s.Campaign(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if err := lead2.WriteMap(ctx, testMap(2), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the map watch after the expiry", func() bool { mu.Lock(); defer mu.Unlock(); return seen == 2 })
}

// TestClosedSession: operations on a closed session fail at once rather
// than retrying until their context ends.
func TestClosedSession(t *testing.T) {
	t.Parallel()
	s := dial(t, zkAddr(t), 0)
	s.Close()
	ctx := ctxFor(t, 20*time.Second)
	start := time.Now()
	if _, _, err := s.ReadMap(ctx); !errors.Is(err, ErrNoSession) {
		t.Errorf("ReadMap on a closed session = %v, want ErrNoSession", err)
	}
	if err := s.Register(ctx, server("rs1")); !errors.Is(err, ErrNoSession) {
		t.Errorf("Register on a closed session = %v, want ErrNoSession", err)
	}
	if _, err := s.Campaign(ctx, "x"); !errors.Is(err, ErrNoSession) {
		t.Errorf("Campaign on a closed session = %v, want ErrNoSession", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("operations on a closed session took %v", d)
	}
}

// TestEnsembleLeaderKill: a session survives the loss of the ensemble's
// leader: it reconnects to another member and keeps its ephemeral znode.
func TestEnsembleLeaderKill(t *testing.T) {
	t.Parallel()
	e := zkserverEnsemble(t)
	ctx := ctxFor(t, 90*time.Second)
	s := dial(t, e.ConnectString(), 10*time.Second)
	if err := s.Register(ctx, server("rs1")); err != nil {
		t.Fatal(err)
	}
	id, expired := s.Conn().SessionID(), s.Expired()
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for _, m := range e.Servers {
		if m != leader {
			rest = append(rest, m.Addr())
		}
	}
	obs := dial(t, rest[0]+","+rest[1], 10*time.Second)
	// A write through s proves it is served again.
	if err := s.Report(ctx, JoinReport{Region: 1, Epoch: 1, Server: "rs1"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("served again %v after the leader was killed", time.Since(killed).Round(time.Millisecond))
	if got := s.Conn().SessionID(); got != id {
		t.Fatalf("session %#x replaced by %#x", id, got)
	}
	if closedWithin(expired, 0) || s.Generation() != 0 {
		t.Fatal("the session expired")
	}
	if o := owner(t, obs, obs.path("servers", "rs1")); o != id {
		t.Fatalf("rs1's znode owned by %#x, want %#x", o, id)
	}
	data, _, err := obs.Conn().Get(obs.path("servers", "rs1"))
	var si ServerInfo
	if err != nil || json.Unmarshal(data, &si) != nil || si.Name != "rs1" {
		t.Fatalf("rs1's znode: %q, %v", data, err)
	}
}

// watchHealthOf watches the health reports through obs until the test
// ends; the function it returns gives name's last report seen as
// "state/started" ("/0": none).
func watchHealthOf(t *testing.T, obs *Session, name string) func() string {
	t.Helper()
	var mu sync.Mutex
	var seen map[string]Health
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go obs.WatchHealth(ctx, func(h map[string]Health) {
		mu.Lock()
		seen = h
		mu.Unlock()
	})
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return seen[name].State + "/" + strconv.FormatInt(seen[name].Started, 10)
	}
}

// TestHealth: a server's health znode is ephemeral and its own session's;
// setting it again replaces it, nil deletes it, one an earlier session
// left is replaced; watchers see each change. Deregister deletes only a
// registration of this session.
func TestHealth(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	obs, s1, s2 := dial(t, addr, 0), dial(t, addr, 0), dial(t, addr, 0)
	state := watchHealthOf(t, obs, "rs1")
	if err := s1.SetHealth(ctxFor(t, 10*time.Second), "rs1", &Health{Name: "rs1", Started: 1, State: HealthNoSpace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no-space seen", func() bool { return state() == "no-space/1" })
	if o := owner(t, obs, obs.path("health", "rs1")); o != s1.Conn().SessionID() {
		t.Fatalf("owner %#x, want s1", o)
	}
	if err := s1.SetHealth(ctxFor(t, 10*time.Second), "rs1", &Health{Name: "rs1", Started: 1, State: HealthFailed}); err != nil {
		t.Fatal(err)
	}
	if h, err := obs.HealthReports(ctxFor(t, 10*time.Second)); err != nil || h["rs1"].State != HealthFailed {
		t.Fatalf("reports %v, %v", h, err)
	}
	// A new session (a restart) replaces the earlier one's report.
	if err := s2.SetHealth(ctxFor(t, 10*time.Second), "rs1", &Health{Name: "rs1", Started: 2, State: HealthNoSpace}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the new session's report seen", func() bool { return state() == "no-space/2" })
	if o := owner(t, obs, obs.path("health", "rs1")); o != s2.Conn().SessionID() {
		t.Fatalf("owner %#x, want s2", o)
	}
	if err := s2.SetHealth(ctxFor(t, 10*time.Second), "rs1", nil); err != nil {
		t.Fatal(err)
	}
	eventually(t, "deletion seen", func() bool { return state() == "/0" })
	// Ephemeral: it goes with its session.
	if err := s1.SetHealth(ctxFor(t, 10*time.Second), "rs1", &Health{Name: "rs1", Started: 3, State: HealthFailed}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "failed seen", func() bool { return state() == "failed/3" })
	s1.Close()
	eventually(t, "gone with its session", func() bool { return state() == "/0" })

	// Deregister: only this session's registration.
	if err := s2.Register(ctxFor(t, 10*time.Second), server("rs2")); err != nil {
		t.Fatal(err)
	}
	if err := obs.Deregister(ctxFor(t, 10*time.Second), "rs2"); err != nil {
		t.Fatal(err)
	}
	if o := owner(t, obs, obs.path("servers", "rs2")); o != s2.Conn().SessionID() {
		t.Fatalf("another session's Deregister removed rs2 (owner %#x)", o)
	}
	if err := s2.Deregister(ctxFor(t, 10*time.Second), "rs2"); err != nil {
		t.Fatal(err)
	}
	if o := owner(t, obs, obs.path("servers", "rs2")); o != -1 {
		t.Fatalf("rs2 still registered (owner %#x)", o)
	}
}

// TestHealthWatchSeesContentChange: SetHealth replaces its own session's
// report in place (a Set: the set of reports does not change). A server
// whose report's deletion failed when it recovered, then found its disk
// full again, publishes the next episode's report, naming its new run,
// over the old one: the watch must deliver it (the master compares the
// run it names with the registered one), and a state change too.
func TestHealthWatchSeesContentChange(t *testing.T) {
	t.Parallel()
	addr := zkAddr(t)
	obs, s1 := dial(t, addr, 0), dial(t, addr, 0)
	state := watchHealthOf(t, obs, "rs1")
	within := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for state() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the watch delivers %q, want %q", what, state(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	set := func(h Health) {
		t.Helper()
		if err := s1.SetHealth(ctxFor(t, 10*time.Second), "rs1", &h); err != nil {
			t.Fatal(err)
		}
	}
	set(Health{Name: "rs1", Started: 1, State: HealthNoSpace})
	within("first report", "no-space/1")
	czxid := func() int64 {
		t.Helper()
		_, st, err := obs.Conn().Exists(obs.path("health", "rs1"))
		if err != nil {
			t.Fatal(err)
		}
		return st.Czxid
	}
	created := czxid()
	set(Health{Name: "rs1", Started: 2, State: HealthNoSpace})
	if czxid() != created {
		t.Fatal("the report was re-created: this test wants it replaced in place")
	}
	within("a new run's report over the old one", "no-space/2")
	set(Health{Name: "rs1", Started: 2, State: HealthFailed})
	within("a state change", "failed/2")
	if err := s1.SetHealth(ctxFor(t, 10*time.Second), "rs1", nil); err != nil {
		t.Fatal(err)
	}
	within("deletion", "/0")
}
