package master

import (
	"slices"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// moveView is the settled threeWay map over rs1..rs4, all live, with the
// operators' move of region 1 to its second backup requested.
func moveView(t *testing.T) (View, *regionmap.Assignment, string) {
	m := threeWay(t)
	r := *m.Region(m.Regions[0].ID)
	target := r.Backups[1]
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0,
		Timing:   Timing{Grace: time.Second, LogWait: time.Second, MoveTimeout: 10 * time.Second},
		Requests: coord.Requests{Moves: map[uint64]string{r.ID: target}}}
	return v, &r, target
}

// releaseIn has r's primary report its release in v, and publishes the
// map Next marks the release in (the backups report their log positions
// from it on); it fails the test unless Next does so alone.
func releaseIn(t *testing.T, v *View, r *regionmap.Assignment, at time.Time) {
	t.Helper()
	v.Released = map[Join]time.Time{{r.ID, r.Epoch, r.Primary}: at}
	n := Next(*v).Map
	if n == nil || !n.Region(r.ID).Released || n.Region(r.ID).Epoch != r.Epoch || n.Region(r.ID).Primary != r.Primary {
		t.Fatalf("the release not marked alone: %+v", n)
	}
	v.Map = n
}

// TestNextMoveWaitsForRelease: a requested move names its target at the
// same epoch and promotes nobody, even with every log position in, until
// the primary released the region; without a release it is cancelled
// after Timing.MoveTimeout, the primary serving again at a new epoch.
func TestNextMoveWaitsForRelease(t *testing.T) {
	v, r, target := moveView(t)
	d := Next(v)
	n := d.Map
	if n == nil || n.Region(r.ID).MoveTo != target || n.Region(r.ID).Primary != r.Primary || n.Region(r.ID).Epoch != r.Epoch {
		t.Fatalf("the move did not start: %+v", n.Region(r.ID))
	}
	if len(d.Moves) != 0 {
		t.Fatalf("the request settled at its start: %+v", d.Moves)
	}
	v.Map, v.Logs = n, reported(n)
	v.Moving = map[Join]time.Time{{r.ID, r.Epoch, target}: t0}
	v.Now = t0.Add(9 * time.Second)
	if n2 := Next(v).Map; n2 != nil {
		t.Fatalf("a backup promoted before its primary released: %+v", n2.Region(r.ID))
	}
	v.Now = t0.Add(10 * time.Second)
	n2 := Next(v).Map
	if n2 == nil {
		t.Fatal("a move never released was not cancelled")
	}
	if got := n2.Region(r.ID); got.MoveTo != "" || got.Primary != r.Primary || got.Epoch != r.Epoch+1 {
		t.Fatalf("cancelled move: %+v, want primary %s at epoch %d", got, r.Primary, r.Epoch+1)
	}
}

// TestNextMovePromotesTargetAfterRelease: once the primary released, the
// target is promoted at a new epoch (before a backup with a longer log:
// all hold every acknowledged write), the old primary joins the group,
// and the request is done.
func TestNextMovePromotesTargetAfterRelease(t *testing.T) {
	v, r, target := moveView(t)
	v.Map = Next(v).Map
	releaseIn(t, &v, r, t0)
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, r.Backups[0]}: 9, {r.ID, r.Epoch, target}: 5}
	n := Next(v).Map
	if n == nil {
		t.Fatal("nothing promoted after the release")
	}
	got := n.Region(r.ID)
	if got.Primary != target || got.Epoch != r.Epoch+1 || got.MoveTo != "" ||
		!slices.Equal(got.Backups, []string{r.Backups[0]}) || !slices.Equal(got.Joining, []string{r.Primary}) {
		t.Fatalf("after the release: %+v; want %s primary at epoch %d, %s joining", got, target, r.Epoch+1, r.Primary)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	v.Map = n
	d := Next(v)
	if len(d.Moves) != 1 || d.Moves[0].Err != nil || d.Moves[0].Region != r.ID {
		t.Fatalf("the request did not settle as done: %+v", d.Moves)
	}
}

// TestNextMoveWaitsForLogsAfterRelease: a release without every live
// backup's log position waits Timing.LogWait from the release for them.
func TestNextMoveWaitsForLogsAfterRelease(t *testing.T) {
	v, r, target := moveView(t)
	v.Map = Next(v).Map
	v.Now = t0.Add(5 * time.Second)
	releaseIn(t, &v, r, v.Now)
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, target}: 5}
	if n := Next(v).Map; n != nil {
		t.Fatalf("promoted without waiting for %s's log position: %+v", r.Backups[0], n.Region(r.ID))
	}
	v.Now = v.Now.Add(time.Second)
	if n := Next(v).Map; n == nil || n.Region(r.ID).Primary != target {
		t.Fatal("the target not promoted once LogWait passed")
	}
}

// TestNextMoveChoosesCompleteCopy: a target whose copy is incomplete is
// not promoted; another backup with a complete one is. With none, the
// move is cancelled and the primary, which released but holds every
// write, serves again at a new epoch.
func TestNextMoveChoosesCompleteCopy(t *testing.T) {
	v, r, target := moveView(t)
	v.Map = Next(v).Map
	releaseIn(t, &v, r, t0)
	v.Logs = reported(v.Map)
	v.Incomplete = map[Join]bool{{r.ID, r.Epoch, target}: true}
	n := Next(v).Map
	if got := n.Region(r.ID); got.Primary != r.Backups[0] || got.Epoch != r.Epoch+1 {
		t.Fatalf("with the target incomplete: %+v, want %s promoted", got, r.Backups[0])
	}
	v.Incomplete[Join{r.ID, r.Epoch, r.Backups[0]}] = true
	n = Next(v).Map
	if got := n.Region(r.ID); got.Primary != r.Primary || got.Epoch != r.Epoch+1 || got.MoveTo != "" ||
		!slices.Equal(got.Backups, r.Backups) {
		t.Fatalf("with no complete copy: %+v, want %s serving again at epoch %d", got, r.Primary, r.Epoch+1)
	}
}

// TestNextMovePrimaryDies: a primary that dies during its move (released
// or not) is failed over as any dead one: no joining role for it, the
// move gone with the epoch.
func TestNextMovePrimaryDies(t *testing.T) {
	for _, released := range []bool{false, true} {
		v, r, target := moveView(t)
		v.Map = Next(v).Map
		if released {
			v.Released = map[Join]time.Time{{r.ID, r.Epoch, r.Primary}: t0}
		}
		delete(v.Live, r.Primary)
		v.Servers = goneAt(v.Servers, r.Primary, t0)
		v.Logs = reported(v.Map)
		n := Next(v).Map
		got := n.Region(r.ID)
		if got.Primary != target || got.MoveTo != "" || slices.Contains(got.Group(), r.Primary) {
			t.Fatalf("released %v: %+v; want %s primary, %s out", released, got, target, r.Primary)
		}
	}
}

// TestNextMoveGroupChangeCancels: a backup's death during a move changes
// the epoch and ends the move (a release at the old epoch no longer
// counts); the request, still valid, starts it again once the group is
// settled (its replacement joined).
func TestNextMoveGroupChangeCancels(t *testing.T) {
	v, r, target := moveView(t)
	v.Map = Next(v).Map
	delete(v.Live, r.Backups[0])
	v.Servers = goneAt(v.Servers, r.Backups[0], t0)
	n := Next(v).Map
	got := n.Region(r.ID)
	if got.MoveTo != "" || got.Epoch <= r.Epoch || got.Primary != r.Primary {
		t.Fatalf("after a backup's death: %+v", got)
	}
	v.Map = n
	v.Released = map[Join]time.Time{{r.ID, r.Epoch, r.Primary}: t0} // of the old epoch
	for range 5 {                                                   // the replacement joins; then the move starts again
		v.Joins = map[Join]bool{}
		for _, j := range v.Map.Region(r.ID).Joining {
			v.Joins[Join{r.ID, v.Map.Region(r.ID).Epoch, j}] = true
		}
		if n := Next(v).Map; n != nil {
			v.Map = n
		}
	}
	got = v.Map.Region(r.ID)
	if got.Primary != r.Primary || got.MoveTo != target {
		t.Fatalf("the request was not started again at the new epoch, or an old release counted: %+v", got)
	}
}

// TestNextMoveRequestRefused: a request whose target cannot take the
// role is given up with the reason, and nothing moves.
func TestNextMoveRequestRefused(t *testing.T) {
	_, r, _ := moveView(t)
	var outsider string
	for _, s := range []string{"rs1", "rs2", "rs3", "rs4"} {
		if s != r.Primary && !slices.Contains(r.Group(), s) {
			outsider = s
		}
	}
	for _, c := range []struct {
		name   string
		target string
		region uint64
		prep   func(*View)
	}{
		{"not a backup", outsider, r.ID, nil},
		{"no region", r.Backups[0], 99, nil},
		{"dead", r.Backups[0], r.ID, func(v *View) { delete(v.Live, r.Backups[0]); v.Logs = reported(v.Map) }},
		{"drained", r.Backups[0], r.ID, func(v *View) { v.Requests.Drained = map[string]bool{r.Backups[0]: true} }},
	} {
		v, _, _ := moveView(t)
		v.Requests.Moves = map[uint64]string{c.region: c.target}
		if c.prep != nil {
			c.prep(&v)
		}
		d := Next(v)
		if len(d.Moves) != 1 || d.Moves[0].Err == nil {
			t.Errorf("%s: outcomes %+v, want one refused", c.name, d.Moves)
		}
		if d.Map != nil && d.Map.Region(r.ID).MoveTo != "" {
			t.Errorf("%s: a move started: %+v", c.name, d.Map.Region(r.ID))
		}
	}
}

// TestNextMoveToPrimaryDone: a request naming the primary is done at
// once, without a move.
func TestNextMoveToPrimaryDone(t *testing.T) {
	v, r, _ := moveView(t)
	v.Requests.Moves = map[uint64]string{r.ID: r.Primary}
	d := Next(v)
	if d.Map != nil || len(d.Moves) != 1 || d.Moves[0].Err != nil {
		t.Fatalf("map changed %v, outcomes %+v", d.Map != nil, d.Moves)
	}
}

// TestNextDrain: a drained server's primaries move to backups, it gets
// no new role, and its backup roles go once a replacement joined; with
// no server to replace it, its backup roles stay (the group keeps its
// copies).
func TestNextDrain(t *testing.T) {
	m := threeWay(t)
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0,
		Timing:   Timing{Grace: time.Second, LogWait: time.Second, MoveTimeout: 10 * time.Second},
		Requests: coord.Requests{Drained: map[string]bool{"rs1": true}}}
	for step := 0; step < 20; step++ {
		d := Next(v)
		if d.Map == nil {
			break
		}
		if err := d.Map.Validate(); err != nil {
			t.Fatal(err)
		}
		v.Map = d.Map
		// The servers' part: released primaries, complete copies, joins.
		serversPart(&v)
	}
	for _, r := range v.Map.Regions {
		if r.Primary == "rs1" || slices.Contains(r.Group(), "rs1") || r.MoveTo != "" || len(r.Backups) != 2 {
			t.Errorf("region %d after the drain: %+v", r.ID, r)
		}
	}
	// Three servers, one drained: its backup roles have no replacement.
	m3, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	v.Map, v.Live, v.Released, v.Joins, v.Logs = m3, live("rs1", "rs2", "rs3"), nil, nil, nil
	v.Map = nextUntilStable(v, 1) // starts the moves of rs1's primaries
	for _, r := range v.Map.Regions {
		if !slices.Contains(append(r.Group(), r.Primary), "rs1") {
			t.Errorf("region %d lost its copy on rs1 with no replacement: %+v", r.ID, r)
		}
		if r.Primary == "rs1" && r.MoveTo == "" {
			t.Errorf("region %d: rs1's primary role not moving: %+v", r.ID, r)
		}
	}
}

// serversPart plays the servers' part after v.Map is published: moving
// primaries release, every backup reports a complete copy, joining
// backups are reported in sync.
func serversPart(v *View) {
	v.Released, v.Logs, v.Joins = map[Join]time.Time{}, reported(v.Map), map[Join]bool{}
	for _, r := range v.Map.Regions {
		if r.MoveTo != "" {
			v.Released[Join{r.ID, r.Epoch, r.Primary}] = t0
		}
		for _, j := range r.Joining {
			v.Joins[Join{r.ID, r.Epoch, j}] = true
		}
	}
}

// balanceView is 6 regions over rs1..rs3 (3 replicas: every server holds
// every region), rs3 primary of none (it came back and was seeded).
func balanceView(t *testing.T) View {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 6, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.Regions {
		r := &m.Regions[i]
		p := []string{"rs1", "rs2"}[i%2]
		r.Primary = p
		r.Backups = slices.DeleteFunc([]string{"rs1", "rs2", "rs3"}, func(s string) bool { return s == p })
	}
	return View{Map: m, Live: live("rs1", "rs2", "rs3"), Servers: seen("rs1", "rs2", "rs3"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Second, LogWait: time.Second, MoveTimeout: 10 * time.Second}, Balance: true}
}

// TestNextBalancer: with Balance, primaries spread evenly one move at a
// time, each across a gap of two (3/3/0 ends 2/2/2), and never while
// another move is in flight; within a gap of one nothing moves.
func TestNextBalancer(t *testing.T) {
	v := balanceView(t)
	moves := 0
	for step := 0; step < 40; step++ {
		d := Next(v)
		if d.Map == nil {
			break
		}
		inFlight := 0
		for _, r := range d.Map.Regions {
			if r.MoveTo != "" {
				inFlight++
			}
		}
		if inFlight > 1 {
			t.Fatalf("%d moves in flight", inFlight)
		}
		if inFlight == 1 && !slices.ContainsFunc(d.Map.Regions, func(r regionmap.Assignment) bool { return r.Released }) {
			moves++ // a move starting (not its release being marked)
		}
		v.Map = d.Map
		serversPart(&v)
	}
	load := primaries(v.Map)
	if load["rs1"] != 2 || load["rs2"] != 2 || load["rs3"] != 2 || moves != 2 {
		t.Fatalf("after balancing: primaries %v in %d moves; want 2 each in 2", load, moves)
	}
	if d := Next(v); d.Map != nil {
		t.Fatalf("a balanced map still changes: %+v", d.Map.Regions)
	}
	v.Balance = false
	v.Map = balanceView(t).Map
	if d := Next(v); d.Map != nil {
		t.Fatal("moved primaries with balancing off")
	}
	v.Requests.Rebalance = true
	if d := Next(v); d.Map == nil || d.Rebalanced {
		t.Fatalf("a rebalance request did not start a move, or settled at once: %+v", d)
	}
}

// TestNextBalancerHysteresis: a spread within one primary (2/2/1), or a
// gap the groups cannot close (the least loaded server backs up none of
// the most loaded's regions), moves nothing, and settles a rebalance.
func TestNextBalancerHysteresis(t *testing.T) {
	v := balanceView(t)
	v.Map.Regions[0].Primary, v.Map.Regions[0].Backups = "rs3", []string{"rs1", "rs2"} // 2/3/1 → one move, then 2/2/2
	v.Map.Regions[1].Primary, v.Map.Regions[1].Backups = "rs3", []string{"rs1", "rs2"}
	if d := Next(v); d.Map != nil { // 2/2/2
		t.Fatalf("moved within a spread of one: %+v", d.Map.Regions)
	}
	v = balanceView(t)
	v.Unhealthy = map[string]bool{"rs3": true}
	v.Requests.Rebalance = true
	d := Next(v)
	if d.Map != nil || !d.Rebalanced {
		t.Fatalf("a gap only an unhealthy server could close: map %v, rebalanced %v", d.Map != nil, d.Rebalanced)
	}
}

// TestNextBalancerGivesNewServerRoles: a server in no group (new, or back
// to groups already full) is handed backup roles one at a time (it joins,
// then the most loaded backup leaves the group: no group ever holds fewer
// copies), and then its share of primaries.
func TestNextBalancerGivesNewServerRoles(t *testing.T) {
	v := balanceView(t)
	v.Map.Replicas = 2
	for i := range v.Map.Regions {
		r := &v.Map.Regions[i]
		r.Backups = slices.DeleteFunc(r.Backups, func(s string) bool { return s == "rs3" })
	}
	for step := 0; step < 80; step++ {
		d := Next(v)
		if d.Map == nil {
			break
		}
		for _, r := range d.Map.Regions {
			if len(r.Group()) < d.Map.Replicas-1 {
				t.Fatalf("step %d: region %d's group is short: %+v", step, r.ID, r)
			}
		}
		v.Map = d.Map
		serversPart(&v)
	}
	load, roles := primaries(v.Map), roleLoad(v.Map)
	if load["rs1"] != 2 || load["rs2"] != 2 || load["rs3"] != 2 || roles["rs1"] != 4 || roles["rs2"] != 4 || roles["rs3"] != 4 {
		t.Fatalf("primaries %v, roles %v; want 2 and 4 each", load, roles)
	}
	v.Requests.Rebalance = true
	if d := Next(v); d.Map != nil || !d.Rebalanced {
		t.Fatalf("balanced: map %v, rebalanced %v", d.Map != nil, d.Rebalanced)
	}
}

// TestNextBalancerNewServerInFullGroups: a fourth server registering with
// a cluster of 3 regions whose 3-way groups are full gets backup roles
// (9 roles spread 3/2/2/2) and no primary moves beyond a gap of one.
func TestNextBalancerNewServerInFullGroups(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Second, LogWait: time.Second, MoveTimeout: 10 * time.Second}, Balance: true}
	for range 40 {
		d := Next(v)
		if d.Map == nil {
			break
		}
		v.Map = d.Map
		serversPart(&v)
	}
	roles, prim := roleLoad(v.Map), primaries(v.Map)
	if roles["rs4"] != 2 || roles["rs1"]+roles["rs2"]+roles["rs3"] != 7 || prim["rs1"]+prim["rs2"]+prim["rs3"] != 3 {
		t.Fatalf("roles %v, primaries %v; want rs4 with 2 roles and no primary (a gap of one)", roles, prim)
	}
	for _, r := range v.Map.Regions {
		if len(r.Backups) != 2 || len(r.Joining) != 0 {
			t.Fatalf("region %d: %+v", r.ID, r)
		}
	}
}
