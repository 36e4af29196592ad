package master

import (
	"slices"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// seedsRunning plays the servers' part after n is published, their
// seeds still running: moving primaries release, every backup reports a
// complete copy, no join is reported.
func seedsRunning(v *View, n *regionmap.Map) {
	v.Map = n
	v.Released, v.Logs = map[Join]time.Time{}, reported(n)
	for _, r := range n.Regions {
		if r.MoveTo != "" {
			v.Released[Join{r.ID, r.Epoch, r.Primary}] = v.Now
		}
	}
}

// TestNextBalancerWaitsForJoins: rs1 restarts (its regions fail over, it
// rejoins every group as a joining backup). While its seeds run, the
// balancer moves nothing: a move then would leave a region whose only
// complete backup is the target with none (the old primary joins).
func TestNextBalancerWaitsForJoins(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 6, Replicas: 3, MinCopies: 2})
	if err != nil {
		t.Fatal(err)
	}
	v := View{Map: m, Live: live("rs1", "rs2", "rs3"), Servers: seen("rs1", "rs2", "rs3"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Second, LogWait: time.Second, MoveTimeout: 10 * time.Second}, Balance: true}
	// rs1 restarts with a new run.
	again := v.Live["rs1"]
	again.Started = 2
	v.Live["rs1"] = again
	v.Logs = reported(m)
	for step := 0; step < 30; step++ {
		v.Now = v.Now.Add(100 * time.Millisecond)
		d := Next(v)
		if d.Map == nil {
			break
		}
		if err := d.Map.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, r := range d.Map.Regions {
			if len(r.Backups) == 0 && !slices.Contains(r.Joining, "x") {
				t.Fatalf("step %d: region %d has no complete backup (min_copies %d): primary %s joining %v (MoveTo %q) -- map %+v",
					step, r.ID, d.Map.MinCopies, r.Primary, r.Joining, r.MoveTo, d.Map.Regions)
			}
		}
		seedsRunning(&v, d.Map)
	}
}

// TestNextMoveNeverPromotesUnhealthy: a planned move of a healthy primary
// whose target turns out incomplete is cancelled (the primary serves
// again) rather than promote the other backup, whose disk cannot store
// writes.
func TestNextMoveNeverPromotesUnhealthy(t *testing.T) {
	v, r, target := moveView(t)
	other := r.Backups[0]
	v.Unhealthy = map[string]bool{other: true}
	v.Map = Next(v).Map
	if v.Map.Region(r.ID).MoveTo != target {
		t.Fatalf("move not started: %+v", v.Map.Region(r.ID))
	}
	releaseIn(t, &v, r, t0)
	v.Logs = reported(v.Map)
	v.Incomplete = map[Join]bool{{r.ID, r.Epoch, target}: true}
	n := Next(v).Map
	got := n.Region(r.ID)
	if got.Primary != r.Primary || got.MoveTo != "" || got.Epoch != r.Epoch+1 {
		t.Fatalf("a planned move of healthy %s, its target incomplete: %+v; want it cancelled (unhealthy %s not promoted)", r.Primary, got, other)
	}
}

// TestNextDrainKeepsMinCopies: draining the primary of 2-replica regions
// (min_copies 2) first gives each an extra joining backup, and moves the
// primary only once it joined: no region ever has fewer than min_copies
// complete copies, and the drain completes.
func TestNextDrainKeepsMinCopies(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 3, Replicas: 2, MinCopies: 2})
	if err != nil {
		t.Fatal(err)
	}
	v := View{Map: m, Live: live("rs1", "rs2", "rs3"), Servers: seen("rs1", "rs2", "rs3"), TermStart: t0, Now: t0,
		Timing:   Timing{Grace: time.Second, LogWait: time.Second, MoveTimeout: 10 * time.Second},
		Requests: coord.Requests{Drained: map[string]bool{"rs1": true}}}
	for step := 0; step < 30; step++ {
		d := Next(v)
		if d.Map == nil {
			break
		}
		for _, r := range d.Map.Regions {
			if len(r.Backups) == 0 {
				t.Fatalf("step %d: region %d: primary %s, no complete backup (joining %v): the drain left 1 copy (min_copies %d)",
					step, r.ID, r.Primary, r.Joining, d.Map.MinCopies)
			}
		}
		v.Map = d.Map
		serversPart(&v) // seeds finish at once
	}
	if !without("rs1")(v.Map) {
		t.Fatalf("the drain did not complete: %+v", v.Map.Regions)
	}
}

// without reports whether m gives name no role.
func without(name string) func(*regionmap.Map) bool {
	return func(m *regionmap.Map) bool {
		return !slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool { return r.Primary == name || slices.Contains(r.Group(), name) })
	}
}

// TestNextMoveWaitsForJoiningBackup: an operator's move of a region whose
// group is one backup and a joining one waits for the join: moving then
// would leave it with no complete backup.
func TestNextMoveWaitsForJoiningBackup(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 3, Replicas: 3, MinCopies: 2})
	if err != nil {
		t.Fatal(err)
	}
	r := &m.Regions[0]
	r.Primary, r.Backups, r.Joining = "rs2", []string{"rs3"}, []string{"rs1"} // rs1 rejoining after a restart
	v := View{Map: m, Live: live("rs1", "rs2", "rs3"), Servers: seen("rs1", "rs2", "rs3"), TermStart: t0, Now: t0,
		Timing:   Timing{Grace: time.Second, LogWait: time.Second, MoveTimeout: 10 * time.Second},
		Requests: coord.Requests{Moves: map[uint64]string{r.ID: "rs3"}}}
	for step := 0; step < 5; step++ {
		d := Next(v)
		if d.Map == nil {
			break
		}
		if got := d.Map.Region(r.ID); len(got.Backups) == 0 {
			t.Fatalf("step %d: %+v: no complete backup left (min_copies 2: writes refused until a seed ends)", step, got)
		}
		seedsRunning(&v, d.Map)
	}
}

// TestNextMoveExpiryLeavesFailoverBe: a move whose primary died, its
// failover waiting for a complete copy, is not cancelled by the move's
// timeout: the epoch stays (a new one would void the failover's log
// reports).
func TestNextMoveExpiryLeavesFailoverBe(t *testing.T) {
	v, r, target := moveView(t)
	v.Map = Next(v).Map
	v.Moving = map[Join]time.Time{{r.ID, r.Epoch, target}: t0}
	delete(v.Live, r.Primary)
	v.Servers = goneAt(v.Servers, r.Primary, t0)
	v.Logs = reported(v.Map)
	v.Incomplete = map[Join]bool{{r.ID, r.Epoch, r.Backups[0]}: true, {r.ID, r.Epoch, target}: true}
	v.Now = t0.Add(2 * time.Second)
	if n := Next(v).Map; n != nil && n.Region(r.ID).Epoch != r.Epoch {
		t.Fatalf("before the timeout: %+v", n.Region(r.ID))
	}
	v.Now = t0.Add(10 * time.Second)
	if n := Next(v).Map; n != nil && n.Region(r.ID).Epoch != r.Epoch {
		t.Errorf("dead primary %s, failover waiting: expireMoves bumped the epoch: %+v", r.Primary, n.Region(r.ID))
	}
}
