package master

import (
	"slices"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func srv(n string) regionmap.Server { return regionmap.Server{Name: n, Shm: "/tmp/" + n, Started: 1} }

func live(names ...string) map[string]regionmap.Server {
	out := map[string]regionmap.Server{}
	for _, n := range names {
		out[n] = srv(n)
	}
	return out
}

// seen is names last seen live at t0.
func seen(names ...string) map[string]Observed {
	out := map[string]Observed{}
	for _, n := range names {
		out[n] = Observed{LastLive: t0}
	}
	return out
}

// observe changes name's observed times in obs (made if nil) with set
// and returns obs.
func observe(obs map[string]Observed, name string, set func(*Observed)) map[string]Observed {
	if obs == nil {
		obs = map[string]Observed{}
	}
	o := obs[name]
	set(&o)
	obs[name] = o
	return obs
}

// goneAt sets name's Gone time in obs (made if nil) and returns obs.
func goneAt(obs map[string]Observed, name string, at time.Time) map[string]Observed {
	return observe(obs, name, func(o *Observed) { o.Gone = at })
}

// droppedAt sets name's Dropped time in obs (made if nil) and returns obs.
func droppedAt(obs map[string]Observed, name string, at time.Time) map[string]Observed {
	return observe(obs, name, func(o *Observed) { o.Dropped = at })
}

// reported is every backup of m's regions reporting a complete copy at
// its region's epoch (the first at the lowest position): what a failover
// waits for before it promotes anyone.
func reported(m *regionmap.Map) map[Join]uint64 {
	out := map[Join]uint64{}
	for _, r := range m.Regions {
		for i, b := range r.Backups {
			out[Join{r.ID, r.Epoch, b}] = uint64(i)
		}
	}
	return out
}

// threeWay is 3 regions over rs1..rs4 with 3 replicas.
func threeWay(t *testing.T) *regionmap.Map {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3"), srv("rs4")}, Layout{Regions: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestNextNothingToDo(t *testing.T) {
	m := threeWay(t)
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0, Timing: Timing{Grace: time.Second}}
	if n := Next(v).Map; n != nil {
		t.Fatalf("a healthy cluster changed: %+v", n)
	}
}

func TestNextPromotesBackup(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Hour}}
	delete(v.Live, r.Primary)
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, r.Backups[0]}: 1 << 32, {r.ID, r.Epoch, r.Backups[1]}: 1 << 32}
	n := Next(v).Map
	if n == nil {
		t.Fatal("no change after the primary died")
	}
	nr := n.Region(r.ID)
	if nr.Primary != r.Backups[0] || nr.Epoch <= r.Epoch || n.Version != m.Version+1 {
		t.Fatalf("region %+v after %+v", nr, r)
	}
	if slices.Contains(nr.Group(), r.Primary) || len(nr.Backups)+len(nr.Joining) != 2 {
		t.Fatalf("group %+v", nr)
	}
	// The replacement backup is joining, on the server outside the group.
	if len(nr.Joining) != 1 || nr.Joining[0] == nr.Primary {
		t.Fatalf("joining %v", nr.Joining)
	}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	// Same inputs, same decision.
	if n2 := Next(v).Map; n2.Region(r.ID).Primary != nr.Primary || !slices.Equal(n2.Region(r.ID).Joining, nr.Joining) {
		t.Fatal("Next is not deterministic")
	}
	// The most complete log wins; positions of another epoch do not count.
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, r.Backups[0]}: 3<<32 | 100, {r.ID, r.Epoch, r.Backups[1]}: 3<<32 | 200}
	if p := Next(v).Map.Region(r.ID).Primary; p != r.Backups[1] {
		t.Fatalf("promoted %s, the most complete log is on %s", p, r.Backups[1])
	}
	v.Logs = map[Join]uint64{{r.ID, r.Epoch - 1, r.Backups[1]}: 9 << 32, {r.ID, r.Epoch, r.Backups[0]}: 1 << 32}
	if p := Next(v).Map.Region(r.ID).Primary; p != r.Backups[0] {
		t.Fatalf("promoted %s on an old epoch's position", p)
	}
	// A report of another epoch is no report: nobody to promote.
	v.Logs = map[Join]uint64{{r.ID, r.Epoch - 1, r.Backups[1]}: 9 << 32}
	if n := Next(v).Map; n != nil && n.Region(r.ID).Primary != r.Primary {
		t.Fatalf("promoted %s on an old epoch's report alone", n.Region(r.ID).Primary)
	}
}

// TestNextWaitsForLogPositions: a failed primary's region waits, within
// LogWait from its primary's going, for every live backup's log position;
// then the most complete is promoted; a dead backup is not waited for.
func TestNextWaitsForLogPositions(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	b0, b1 := r.Backups[0], r.Backups[1]
	gone := t0.Add(time.Minute)
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: goneAt(seen("rs1", "rs2", "rs3", "rs4"), r.Primary, gone),
		TermStart: t0, Now: gone.Add(100 * time.Millisecond),
		Timing: Timing{Grace: time.Hour, LogWait: time.Second}}
	delete(v.Live, r.Primary)
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, b1}: 5 << 32}
	if n := Next(v).Map; n != nil && n.Region(r.ID).Epoch != r.Epoch {
		t.Fatalf("promoted before %s reported: %+v", b0, n.Region(r.ID))
	}
	// Every live backup reported: the most complete now.
	v.Logs[Join{r.ID, r.Epoch, b0}] = 4<<32 | 1<<20
	if p := Next(v).Map.Region(r.ID).Primary; p != b1 {
		t.Fatalf("promoted %s, want %s (segment 5 beats segment 4)", p, b1)
	}
	// A missing report is waited for only LogWait.
	delete(v.Logs, Join{r.ID, r.Epoch, b0})
	v.Now = gone.Add(time.Second)
	if p := Next(v).Map.Region(r.ID).Primary; p != b1 {
		t.Fatalf("after LogWait promoted %s, want %s (the only position)", p, b1)
	}
	// A dead backup is not waited for.
	v.Now = gone.Add(100 * time.Millisecond)
	delete(v.Live, b0)
	if n := Next(v).Map; n == nil || n.Region(r.ID).Primary != b1 {
		t.Fatal("a dead backup's position was waited for")
	}
	// A new leader that never saw the primary go waits from Since.
	v.Live = live("rs1", "rs2", "rs3", "rs4")
	delete(v.Live, r.Primary)
	v.Logs, v.Servers, v.TermStart, v.Now = map[Join]uint64{}, seen("rs1", "rs2", "rs3", "rs4"), gone, gone.Add(500*time.Millisecond)
	if n := Next(v).Map; n != nil && n.Region(r.ID).Epoch != r.Epoch {
		t.Fatal("a new leader promoted without positions within LogWait")
	}
	// After LogWait, a backup that never reported is still not promoted:
	// its copy may lack acknowledged writes (a seed unfinished, its
	// report lost). The region waits for a report.
	v.Now = gone.Add(time.Second)
	if n := Next(v).Map; n != nil && n.Region(r.ID).Primary != r.Primary {
		t.Fatalf("promoted %s, which never reported its log position", n.Region(r.ID).Primary)
	}
	v.Now = gone.Add(time.Hour)
	if n := Next(v).Map; n != nil && n.Region(r.ID).Primary != r.Primary {
		t.Fatalf("promoted %s an hour on, without its report", n.Region(r.ID).Primary)
	}
	v.Logs[Join{r.ID, r.Epoch, b1}] = 1 << 32
	if n := Next(v).Map; n == nil || n.Region(r.ID).Primary != b1 {
		t.Fatal("a new leader did not promote the only backup that reported")
	}
}

func TestNextGraceForUnseenServers(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	all := []string{"rs1", "rs2", "rs3", "rs4"}
	v := View{Map: m, Live: live(all...), TermStart: t0, Now: t0.Add(time.Second), Timing: Timing{Grace: 10 * time.Second}, Logs: reported(m)}
	delete(v.Live, r.Primary)
	if n := Next(v).Map; n != nil {
		t.Fatalf("a server never seen was failed within the grace: %+v", n.Region(r.ID))
	}
	v.Now = t0.Add(10 * time.Second)
	if n := Next(v).Map; n == nil || n.Region(r.ID).Primary == r.Primary {
		t.Fatal("a server absent past the grace was not failed")
	}
}

func TestNextNoLiveBackupWaits(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Hour}}
	delete(v.Live, r.Primary)
	for _, b := range r.Group() {
		delete(v.Live, b)
	}
	n := Next(v).Map
	if n == nil {
		t.Fatal("dead backups were not removed")
	}
	nr := n.Region(r.ID)
	if nr.Primary != r.Primary || len(nr.Backups) != 0 {
		t.Fatalf("region %+v: with no live backup it must wait for its primary", nr)
	}
	if len(nr.Joining) != 0 {
		t.Fatalf("a region without a live primary got joining backups %v", nr.Joining)
	}
}

func TestNextJoinCompletes(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[1]
	v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Hour}}
	dead := r.Backups[0]
	delete(v.Live, dead)
	n := Next(v).Map
	nr := *n.Region(r.ID)
	if len(nr.Joining) != 1 || nr.Primary != r.Primary || nr.Epoch == r.Epoch {
		t.Fatalf("region %+v after backup %s died", nr, dead)
	}
	v.Map = n
	if again := Next(v).Map; again != nil {
		t.Fatalf("a pending join changed again: %+v", again.Region(r.ID))
	}
	// A report at an older epoch does not count.
	v.Joins = map[Join]bool{{Region: r.ID, Epoch: nr.Epoch - 1, Server: nr.Joining[0]}: true}
	if again := Next(v).Map; again != nil {
		t.Fatal("a stale join report was taken")
	}
	v.Joins = map[Join]bool{{Region: r.ID, Epoch: nr.Epoch, Server: nr.Joining[0]}: true}
	done := Next(v).Map
	dr := done.Region(r.ID)
	if len(dr.Joining) != 0 || !slices.Contains(dr.Backups, nr.Joining[0]) || dr.Epoch != nr.Epoch {
		t.Fatalf("after the join %+v", dr)
	}
}

func TestNextAddressesFollowRegistrations(t *testing.T) {
	m := threeWay(t)
	l := live("rs1", "rs2", "rs3", "rs4")
	l["rs2"] = regionmap.Server{Name: "rs2", TCP: "127.0.0.1:9"}
	n := Next(View{Map: m, Live: l, TermStart: t0, Now: t0, Timing: Timing{Grace: time.Hour}}).Map
	if s, _ := n.Server("rs2"); s.TCP != "127.0.0.1:9" || s.Shm != "" {
		t.Fatalf("rs2 is %+v", s)
	}
	// New servers join the map (and take joining roles when needed).
	l["rs5"] = srv("rs5")
	n = Next(View{Map: m, Live: l, TermStart: t0, Now: t0, Timing: Timing{Grace: time.Hour}}).Map
	if _, ok := n.Server("rs5"); !ok {
		t.Fatal("a new server was not added")
	}
}

func TestNextStaticMapUntouched(t *testing.T) {
	m := threeWay(t)
	m.Replicas = 0
	v := View{Map: m, Live: live("rs2"), Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0, Timing: Timing{Grace: time.Hour}}
	if n := Next(v).Map; n != nil && n.Region(1).Primary != m.Region(1).Primary {
		t.Fatal("a static map (replicas 0) was healed")
	}
	// A restarted server of a static map takes its new run at once:
	// nothing would ever fail it over.
	v.Timing.LogWait, v.Servers = time.Second, goneAt(v.Servers, "rs1", t0)
	v.Live = live("rs1", "rs2", "rs3")
	again := v.Live[m.Region(1).Primary]
	again.Started = 2
	v.Live[m.Region(1).Primary] = again
	n := Next(v).Map
	if s, _ := n.Server(m.Region(1).Primary); s.Started != 2 || n.Region(1).Primary != m.Region(1).Primary {
		t.Fatalf("static map after a restart: %+v", n)
	}
}

func TestNextDroppedBackupLeaves(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	all := []string{"rs1", "rs2", "rs3", "rs4"}
	v := View{Map: m, Live: live(all...), Servers: seen(all...), TermStart: t0, Now: t0, Timing: Timing{Grace: time.Hour}}
	b := r.Backups[0]
	v.Dropped = map[Join]bool{{Region: r.ID, Epoch: r.Epoch - 1, Server: b}: true}
	if n := Next(v).Map; n != nil {
		t.Fatal("a drop reported at an older epoch changed the map")
	}
	v.Dropped = map[Join]bool{{Region: r.ID, Epoch: r.Epoch, Server: b}: true}
	n := Next(v).Map
	nr := n.Region(r.ID)
	if slices.Contains(nr.Backups, b) || nr.Epoch <= r.Epoch || nr.Primary != r.Primary {
		t.Fatalf("after %s was reported dropped: %+v", b, nr)
	}
	// A live server outside the group joins to restore the count (it may
	// be the dropped one again: it is seeded anew).
	if len(nr.Backups)+len(nr.Joining) != 2 {
		t.Fatalf("group %+v not refilled", nr)
	}
}

// TestNextRestartedServerFailsOver: a server whose registered run differs
// from the map's restarted (maybe within its session timeout, so the
// membership never showed it gone): its primary roles fail over and its
// backup roles are dropped as if it had died, and its entry takes the new
// run; it is a candidate again in later decisions.
func TestNextRestartedServerFailsOver(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	all := []string{"rs1", "rs2", "rs3", "rs4"}
	v := View{Map: m, Live: live(all...), Servers: seen(all...), TermStart: t0, Now: t0, Timing: Timing{Grace: time.Hour}, Logs: reported(m)}
	again := v.Live[r.Primary]
	again.Started = 2
	v.Live[r.Primary] = again
	n := Next(v).Map
	if n == nil {
		t.Fatal("a restart changed nothing")
	}
	nr := n.Region(r.ID)
	if nr.Primary == r.Primary || nr.Epoch <= r.Epoch || slices.Contains(nr.Group(), r.Primary) {
		t.Fatalf("after %s restarted: %+v", r.Primary, nr)
	}
	if s, _ := n.Server(r.Primary); s.Started != 2 {
		t.Fatalf("the map keeps run %d of %s", s.Started, r.Primary)
	}
	for _, o := range n.Regions {
		if slices.Contains(o.Group(), r.Primary) || o.Primary == r.Primary {
			t.Fatalf("region %d still gives %s a role: %+v", o.ID, r.Primary, o)
		}
	}
	// Next decision: the map knows the run; it may join again.
	v.Map = n
	if n2 := Next(v).Map; n2 != nil {
		for _, o := range n2.Regions {
			if o.Primary == r.Primary || slices.Contains(o.Backups, r.Primary) {
				t.Fatalf("region %d: %s took a full role straight away: %+v", o.ID, r.Primary, o)
			}
		}
	}
}

// TestNextRestartedPrimaryWaitsForLogs: a primary restarted within its
// session is failed over once its backups reported their log positions;
// until then the map keeps its old run (a regression: the new run was
// published while the failover waited, the next decision no longer saw a
// restart, and the restarted primary took its region back with a log that
// may lack acknowledged writes). A restarted primary with no live backup
// resumes with its new run.
func TestNextRestartedPrimaryWaitsForLogs(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	all := []string{"rs1", "rs2", "rs3", "rs4"}
	gone := t0.Add(time.Minute)
	v := View{Map: m, Live: live(all...), Servers: goneAt(seen(all...), r.Primary, gone), TermStart: t0, Now: gone.Add(100 * time.Millisecond),
		Timing: Timing{Grace: time.Hour, LogWait: time.Second}, Logs: map[Join]uint64{}}
	again := v.Live[r.Primary]
	again.Started = 2
	v.Live[r.Primary] = again
	for _, step := range []string{"no position", "one position"} {
		d := Next(v)
		if !slices.Equal(d.Restarted, []string{r.Primary}) {
			t.Fatalf("%s: restarted %v, want [%s]", step, d.Restarted, r.Primary)
		}
		if n := d.Map; n != nil {
			if s, _ := n.Server(r.Primary); s.Started != 1 || n.Region(r.ID).Primary != r.Primary {
				t.Fatalf("%s: %s run %d published as primary of %+v before the failover", step, r.Primary, s.Started, n.Region(r.ID))
			}
			v.Map = n
		}
		v.Logs[Join{r.ID, r.Epoch, r.Backups[0]}] = 5 << 32
	}
	v.Logs[Join{r.ID, r.Epoch, r.Backups[1]}] = 6 << 32
	n := Next(v).Map
	if n == nil || n.Region(r.ID).Primary != r.Backups[1] {
		t.Fatalf("not failed over to the most complete log: %+v", n)
	}
	if s, _ := n.Server(r.Primary); s.Started != 2 {
		t.Fatalf("after the failover the map keeps run %d", s.Started)
	}
	// The only copy: it resumes with its new run.
	m, err := InitialMap([]regionmap.Server{srv("rs1")}, Layout{Regions: 1, Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Replicas = 3
	v = View{Map: m, Live: live("rs1"), Servers: seen("rs1"), TermStart: t0, Now: gone, Timing: Timing{Grace: time.Hour, LogWait: time.Second}}
	again = v.Live["rs1"]
	again.Started = 2
	v.Live["rs1"] = again
	n = Next(v).Map
	if s, _ := n.Server("rs1"); s.Started != 2 || n.Regions[0].Primary != "rs1" {
		t.Fatalf("a lone restarted primary: %+v", n)
	}
}

// TestNextHoldsBackDroppedServers: a backup its primary dropped leaves
// the group and, while held (a dead server stays registered until its
// session expires), is not added back as joining; after Hold, or once it
// registered again, it is.
func TestNextHoldsBackDroppedServers(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := m.Regions[0]
	x := r.Backups[0]
	now := t0.Add(time.Minute)
	v := View{Map: m, Live: live("rs1", "rs2", "rs3"), Servers: seen("rs1", "rs2", "rs3"), TermStart: t0, Now: now,
		Timing: Timing{Grace: time.Hour}, Dropped: map[Join]bool{{r.ID, r.Epoch, x}: true}}
	if nr := Next(v).Map.Region(r.ID); !slices.Contains(nr.Joining, x) {
		t.Fatalf("without a hold the dropped %s should join again at once: %+v", x, nr)
	}
	v.Servers, v.Timing.DropHold = droppedAt(v.Servers, x, now), 5*time.Second
	nr := Next(v).Map.Region(r.ID)
	if slices.Contains(nr.Group(), x) || nr.Epoch <= r.Epoch {
		t.Fatalf("held %s is in the group: %+v", x, nr)
	}
	// The next decision, from the map without x, still holds it back.
	v.Map, v.Dropped = Next(v).Map, nil
	if n := Next(v).Map; n != nil {
		t.Fatalf("held %s was added back: %+v", x, n.Region(r.ID))
	}
	v.Now = now.Add(5 * time.Second)
	if n := Next(v).Map; n == nil || !slices.Contains(n.Region(r.ID).Joining, x) {
		t.Fatalf("%s not added back after its hold", x)
	}
	v.Now, v.Servers = now.Add(time.Second), goneAt(v.Servers, x, now.Add(500*time.Millisecond))
	if n := Next(v).Map; n == nil || !slices.Contains(n.Region(r.ID).Joining, x) {
		t.Fatalf("%s registered again after its drop and was not added back", x)
	}
}

// TestNextNeverPromotesIncompleteCopy: a backup that reported its copy
// incomplete (being seeded or caught up) is not promoted while another
// live backup may be, even with a higher log position; when every live
// backup's copy is incomplete the region waits for its primary (no
// change), and a restarted primary then takes its new run back.
func TestNextNeverPromotesIncompleteCopy(t *testing.T) {
	all := []string{"rs1", "rs2", "rs3", "rs4"}
	gone := t0.Add(time.Minute)
	cases := []struct {
		name       string
		logs       map[int]uint64 // by backup index
		incomplete []int
		restarted  bool   // the primary restarted instead of dying
		want       string // "b0", "b1", "wait"
	}{
		{name: "both complete, the longer log", logs: map[int]uint64{0: 4 << 32, 1: 5 << 32}, want: "b1"},
		{name: "the longer log is incomplete", logs: map[int]uint64{0: 4 << 32, 1: 5 << 32}, incomplete: []int{1}, want: "b0"},
		{name: "incomplete at position 0", logs: map[int]uint64{0: 0, 1: 5 << 32}, incomplete: []int{0}, want: "b1"},
		{name: "every live backup incomplete", logs: map[int]uint64{0: 4 << 32, 1: 5 << 32}, incomplete: []int{0, 1}, want: "wait"},
		{name: "every live backup incomplete, primary restarted", logs: map[int]uint64{0: 4 << 32, 1: 5 << 32}, incomplete: []int{0, 1}, restarted: true, want: "wait"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := threeWay(t)
			r := m.Regions[0]
			v := View{Map: m, Live: live(all...), Servers: goneAt(seen(all...), r.Primary, gone), TermStart: t0, Now: gone.Add(100 * time.Millisecond),
				Timing: Timing{Grace: time.Hour, LogWait: time.Second}, Logs: map[Join]uint64{}, Incomplete: map[Join]bool{}}
			if c.restarted {
				again := v.Live[r.Primary]
				again.Started = 2
				v.Live[r.Primary] = again
			} else {
				delete(v.Live, r.Primary)
			}
			for i, pos := range c.logs {
				v.Logs[Join{r.ID, r.Epoch, r.Backups[i]}] = pos
			}
			for _, i := range c.incomplete {
				v.Incomplete[Join{r.ID, r.Epoch, r.Backups[i]}] = true
			}
			n := Next(v).Map
			if c.want == "wait" {
				epoch := r.Epoch
				if c.restarted {
					// The new run takes its region back at a new epoch: the
					// backups' reports of this failure are not taken for
					// reports of the next.
					epoch++
				}
				if n != nil && (n.Region(r.ID).Primary != r.Primary || n.Region(r.ID).Epoch != epoch) {
					t.Fatalf("every live backup incomplete, the region changed: %+v", n.Region(r.ID))
				}
				if c.restarted {
					if n == nil {
						t.Fatal("the restarted primary's new run was not published")
					}
					if s, _ := n.Server(r.Primary); s.Started != 2 {
						t.Fatalf("the restarted primary keeps run %d: it could never resume", s.Started)
					}
					// The next decision, on the published map, leaves it
					// its region: it serves again from its own disk.
					v.Map = n
					if n2 := Next(v).Map; n2 != nil && (n2.Region(r.ID).Primary != r.Primary || n2.Region(r.ID).Epoch != epoch) {
						t.Fatalf("the restarted primary's new run published, then the region changed: %+v", n2.Region(r.ID))
					}
				}
				return
			}
			want := r.Backups[0]
			if c.want == "b1" {
				want = r.Backups[1]
			}
			if n == nil || n.Region(r.ID).Primary != want {
				t.Fatalf("promoted %+v, want %s", n, want)
			}
		})
	}
}

// TestNextRestartedPrimaryFailsAgain: a restarted primary took its region
// back (every live backup had reported an incomplete copy); its attach
// then made a backup complete, and the new run died too. The backups'
// reports of the first failure must not decide the second: the region is
// at a new epoch, and the backup that reports a complete copy there is
// promoted.
func TestNextRestartedPrimaryFailsAgain(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	all := []string{"rs1", "rs2", "rs3", "rs4"}
	v := View{Map: m, Live: live(all...), Servers: goneAt(seen(all...), r.Primary, t0), TermStart: t0, Now: t0.Add(time.Hour),
		Timing: Timing{Grace: time.Hour, LogWait: time.Second}, Logs: map[Join]uint64{}, Incomplete: map[Join]bool{}}
	for _, b := range r.Backups {
		v.Logs[Join{r.ID, r.Epoch, b}] = 0
		v.Incomplete[Join{r.ID, r.Epoch, b}] = true
	}
	again := v.Live[r.Primary]
	again.Started = 2
	v.Live[r.Primary] = again
	n := Next(v).Map
	if n == nil || n.Region(r.ID).Primary != r.Primary || n.Region(r.ID).Epoch == r.Epoch {
		t.Fatalf("the restarted primary's new run did not take its region back at a new epoch: %+v", n)
	}
	v.Map = n
	e := n.Region(r.ID).Epoch
	// The new run dies; backup 0 reports a complete copy at the new epoch.
	delete(v.Live, r.Primary)
	v.Servers = goneAt(v.Servers, r.Primary, v.Now)
	v.Now = v.Now.Add(time.Hour)
	v.Logs[Join{r.ID, e, r.Backups[0]}] = 3 << 32
	v.Logs[Join{r.ID, e, r.Backups[1]}] = 0
	v.Incomplete[Join{r.ID, e, r.Backups[1]}] = true
	if n := Next(v).Map; n == nil || n.Region(r.ID).Primary != r.Backups[0] {
		t.Fatalf("the backup complete at the new epoch was not promoted: %+v", n)
	}
}

// TestNextDropsOfFailedPrimaryIgnored: a primary dropped a backup from its
// stream and died (or was paused past its session and resumed: the backup,
// having promised its copy to the failover, refused it) before the map
// left the backup out. The drop does not keep the backup from a promotion
// (its copy holds every acknowledged write: a managed stream acknowledges
// none after a drop), nor does it let the failed primary's new run take
// the region back from it.
func TestNextDropsOfFailedPrimaryIgnored(t *testing.T) {
	t.Run("3-way", func(t *testing.T) {
		m := threeWay(t)
		r := m.Regions[0]
		b0, b1 := r.Backups[0], r.Backups[1]
		v := View{Map: m, Live: live("rs1", "rs2", "rs3", "rs4"), Servers: goneAt(seen("rs1", "rs2", "rs3", "rs4"), r.Primary, t0),
			TermStart: t0, Now: t0.Add(time.Hour), Timing: Timing{Grace: time.Hour, LogWait: time.Second},
			Logs:       map[Join]uint64{{r.ID, r.Epoch, b0}: 1 << 32, {r.ID, r.Epoch, b1}: 0},
			Incomplete: map[Join]bool{{r.ID, r.Epoch, b1}: true}, Dropped: map[Join]bool{{r.ID, r.Epoch, b0}: true}}
		delete(v.Live, r.Primary)
		if n := Next(v).Map; n == nil || n.Region(r.ID).Primary != b0 {
			t.Fatalf("the only backup with a complete copy (%s), dropped by the dead primary, was not promoted: %+v", b0, n)
		}
	})
	t.Run("2-way, the primary restarted", func(t *testing.T) {
		m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2")}, Layout{Regions: 1, Replicas: 2})
		if err != nil {
			t.Fatal(err)
		}
		r := m.Regions[0]
		b0 := r.Backups[0]
		v := View{Map: m, Live: live("rs1", "rs2"), Servers: goneAt(seen("rs1", "rs2"), r.Primary, t0), TermStart: t0, Now: t0.Add(time.Hour),
			Timing: Timing{Grace: time.Hour, LogWait: time.Second},
			Logs:   map[Join]uint64{{r.ID, r.Epoch, b0}: 1 << 32}, Dropped: map[Join]bool{{r.ID, r.Epoch, b0}: true}}
		again := srv(r.Primary)
		again.Started = 2
		v.Live[r.Primary] = again
		v.Map = nextUntilStable(v, 3)
		if nr := v.Map.Region(r.ID); nr.Primary != b0 {
			t.Fatalf("the complete backup %s was not promoted; the restarted primary kept the region: %+v", b0, *nr)
		}
	})
}

// nextUntilStable applies Next to v's map until it proposes nothing, at
// most steps times, and returns the last map.
func nextUntilStable(v View, steps int) *regionmap.Map {
	for range steps {
		n := Next(v).Map
		if n == nil {
			break
		}
		v.Map = n
	}
	return v.Map
}

// healthView is v with Unhealthy derived from health reports as the
// master's loop derives it (observed.unhealthy): a report counts only
// while the run it names is registered.
func healthView(v View, reports ...coord.Health) View {
	o := &observed{live: v.Live, health: map[string]coord.Health{}}
	for _, h := range reports {
		o.health[h.Name] = h
	}
	v.Unhealthy = o.unhealthy()
	return v
}

// possible fails the test unless v's health state can occur: a server
// reports itself unhealthy for the run the map has only while primary of
// nothing in it (a primary steps down first: its report names the new
// run it registers, which Next sees restarted).
func possible(t *testing.T, v View) {
	t.Helper()
	for name := range v.Unhealthy {
		old, ok := v.Map.Server(name)
		if !ok || old.Started != v.Live[name].Started {
			continue
		}
		for _, r := range v.Map.Regions {
			if r.Primary == name {
				t.Fatalf("impossible state: %s reports itself unhealthy for the run the map has while primary of region %d", name, r.ID)
			}
		}
	}
}

// TestNextUnhealthyServer: a primary whose disk cannot store writes (a
// full or failing disk) steps down: it publishes its health report for a
// new run and registers as that run. Its regions then move to a backup
// that reported a complete copy; a region none of whose backups is
// complete goes back to the new run (it serves the reads, refuses
// writes). Until the new run is registered (the report names a run not
// registered) nothing moves: the server may still serve. The stepped-down
// server leaves every group (the restart rule) and gets no new role.
func TestNextUnhealthyServer(t *testing.T) {
	// threeWay: region 1 is rs1's with backups rs2, rs3; region 3 is rs3's
	// with backups rs4, rs1.
	cases := []struct {
		name        string
		registered  bool              // rs1's new run is registered
		logs        map[string]uint64 // region 1's backups' reports
		incomplete  []string
		wantPrimary string // region 1's, at the fixed point
		wantNewRun  bool   // the map has rs1's new run
	}{
		{name: "stepped down: the most complete backup", registered: true,
			logs: map[string]uint64{"rs2": 1 << 32, "rs3": 2 << 32}, wantPrimary: "rs3", wantNewRun: true},
		{name: "stepped down: no complete copy, back to the new run", registered: true,
			logs: map[string]uint64{"rs2": 0, "rs3": 0}, incomplete: []string{"rs2", "rs3"}, wantPrimary: "rs1", wantNewRun: true},
		{name: "stepped down: waits for the backups' reports", registered: true,
			logs: map[string]uint64{}, wantPrimary: "rs1", wantNewRun: false},
		{name: "report published, new run not registered yet: nothing moves", registered: false,
			logs: map[string]uint64{"rs2": 1 << 32, "rs3": 2 << 32}, wantPrimary: "rs1", wantNewRun: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := threeWay(t)
			r := *m.Region(1)
			all := []string{"rs1", "rs2", "rs3", "rs4"}
			v := View{Map: m, Live: live(all...), Servers: seen(all...), TermStart: t0, Now: t0.Add(500 * time.Millisecond),
				Timing: Timing{Grace: time.Hour, LogWait: time.Second}, Logs: map[Join]uint64{}, Incomplete: map[Join]bool{}}
			for b, pos := range c.logs {
				v.Logs[Join{r.ID, r.Epoch, b}] = pos
			}
			for _, b := range c.incomplete {
				v.Incomplete[Join{r.ID, r.Epoch, b}] = true
			}
			if c.registered {
				again := v.Live["rs1"]
				again.Started = 2
				v.Live["rs1"] = again
				v.Servers = goneAt(v.Servers, "rs1", t0)
			}
			v = healthView(v, coord.Health{Name: "rs1", Started: 2, State: coord.HealthFailed})
			possible(t, v)
			if v.Unhealthy["rs1"] != c.registered {
				t.Fatalf("rs1 unhealthy: %v", v.Unhealthy["rs1"])
			}
			v.Map = nextUntilStable(v, 6)
			got := v.Map.Region(1)
			if got.Primary != c.wantPrimary {
				t.Fatalf("region 1's primary %s, want %s: %+v", got.Primary, c.wantPrimary, *got)
			}
			if s, _ := v.Map.Server("rs1"); (s.Started == 2) != c.wantNewRun {
				t.Fatalf("rs1's run in the map: %d", s.Started)
			}
			for _, o := range v.Map.Regions {
				if slices.Contains(o.Group(), "rs1") && (c.registered || !slices.Contains(m.Region(o.ID).Group(), "rs1")) {
					t.Fatalf("region %d gives the unhealthy rs1 a backup role: %+v", o.ID, o)
				}
				if o.Primary == "rs1" && o.ID != 1 {
					t.Fatalf("region %d's primary is the unhealthy rs1", o.ID)
				}
			}
			if c.wantPrimary == "rs1" && c.wantNewRun && got.Epoch <= r.Epoch {
				t.Fatalf("the new run took region 1 back at epoch %d (was %d)", got.Epoch, r.Epoch)
			}
			if c.wantPrimary != "rs1" && len(got.Group()) != 2 {
				t.Fatalf("region 1's group was not made whole without rs1: %+v", *got)
			}
		})
	}
}

// TestNextHealthyBackupFirst: rs4, primary of nothing in threeWay (a
// backup of regions 2 and 3), finds its disk full and reports itself
// unhealthy for its registered run, keeping its backup roles. Region 2's
// primary rs2 then fails (dies, or its own disk fails and it steps down).
// Among the backups that reported a complete copy the healthy one is
// promoted, even with the shorter log (in strict mode every live backup
// holds every acknowledged write); the unhealthy rs4 only when no healthy
// one is complete; with none complete the region waits (or goes back to
// rs2's new run). rs4 keeps its role in region 3 and joins nothing.
func TestNextHealthyBackupFirst(t *testing.T) {
	cases := []struct {
		name        string
		rs4Sick     bool
		logs        map[string]uint64 // region 2's backups' reports
		incomplete  []string
		wantPrimary string
	}{
		{name: "all healthy: the most complete", logs: map[string]uint64{"rs3": 1 << 32, "rs4": 2 << 32}, wantPrimary: "rs4"},
		{name: "a healthy backup before a more complete unhealthy one", rs4Sick: true,
			logs: map[string]uint64{"rs3": 1 << 32, "rs4": 2 << 32}, wantPrimary: "rs3"},
		{name: "the only complete copy is on the unhealthy backup", rs4Sick: true,
			logs: map[string]uint64{"rs3": 3 << 32, "rs4": 2 << 32}, incomplete: []string{"rs3"}, wantPrimary: "rs4"},
		{name: "no complete copy", rs4Sick: true,
			logs: map[string]uint64{"rs3": 0, "rs4": 0}, incomplete: []string{"rs3", "rs4"}, wantPrimary: "rs2"},
	}
	for _, c := range cases {
		for _, how := range []string{"dies", "steps down"} {
			t.Run(c.name+"/rs2 "+how, func(t *testing.T) {
				m := threeWay(t)
				r := *m.Region(2)
				if r.Primary != "rs2" || !slices.Equal(r.Backups, []string{"rs3", "rs4"}) || slices.ContainsFunc(m.Regions, func(o regionmap.Assignment) bool { return o.Primary == "rs4" }) {
					t.Fatalf("threeWay changed: %+v", m.Regions)
				}
				all := []string{"rs1", "rs2", "rs3", "rs4"}
				v := View{Map: m, Live: live(all...), Servers: goneAt(seen(all...), "rs2", t0), TermStart: t0, Now: t0.Add(500 * time.Millisecond),
					Timing: Timing{Grace: time.Hour, LogWait: time.Second}, Logs: map[Join]uint64{}, Incomplete: map[Join]bool{}}
				var reports []coord.Health
				if c.rs4Sick {
					reports = append(reports, coord.Health{Name: "rs4", Started: v.Live["rs4"].Started, State: coord.HealthNoSpace})
				}
				switch how {
				case "dies":
					delete(v.Live, "rs2")
				case "steps down":
					again := v.Live["rs2"]
					again.Started = 2
					v.Live["rs2"] = again
					reports = append(reports, coord.Health{Name: "rs2", Started: 2, State: coord.HealthFailed})
				}
				for b, pos := range c.logs {
					v.Logs[Join{r.ID, r.Epoch, b}] = pos
				}
				for _, b := range c.incomplete {
					v.Incomplete[Join{r.ID, r.Epoch, b}] = true
				}
				v = healthView(v, reports...)
				possible(t, v)
				if v.Unhealthy["rs4"] != c.rs4Sick {
					t.Fatalf("rs4 unhealthy: %v", v.Unhealthy["rs4"])
				}
				v.Map = nextUntilStable(v, 6)
				got := v.Map.Region(2)
				if got.Primary != c.wantPrimary {
					t.Fatalf("region 2's primary %s, want %s: %+v", got.Primary, c.wantPrimary, *got)
				}
				if r3 := v.Map.Region(3); !slices.Contains(r3.Backups, "rs4") {
					t.Fatalf("rs4 lost its backup role in region 3: %+v", *r3)
				}
				if got.Primary != "rs4" && got.Primary != "rs2" && !slices.Contains(got.Backups, "rs4") {
					t.Fatalf("rs4 lost its backup role in region 2: %+v", *got)
				}
				for _, o := range v.Map.Regions {
					if c.rs4Sick && slices.Contains(o.Joining, "rs4") {
						t.Fatalf("region %d: the unhealthy rs4 joins: %+v", o.ID, o)
					}
				}
			})
		}
	}
}

// TestNextUnhealthyGetsNoRole: a group short of a backup takes a healthy
// server, never one whose disk cannot store writes; once that server is
// healthy again it is a candidate like any other.
func TestNextUnhealthyGetsNoRole(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 1, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	m.Regions[0].Backups = m.Regions[0].Backups[:1] // rs1 primary, rs2 backup: short of one
	v := View{Map: m, Live: live("rs1", "rs2", "rs3"), Servers: seen("rs1", "rs2", "rs3"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Hour}, Unhealthy: map[string]bool{"rs3": true}}
	if n := Next(v).Map; n != nil {
		t.Fatalf("the unhealthy rs3 was given a role: %+v", n.Regions[0])
	}
	v.Unhealthy = nil
	if n := Next(v).Map; n == nil || !slices.Contains(n.Regions[0].Joining, "rs3") {
		t.Fatalf("rs3, healthy again, was not added: %+v", n)
	}
}

// TestNextPrimaryLostToBackups: a primary still registered fails over at
// once when every live backup reported its log position at the region's
// epoch (each lost the primary's connections and fenced it off), and at
// least one copy is complete: the most complete is promoted, the
// primary's drop reports do not count, and the lost primary gets no new
// role in the same decision (Decision.Lost: the master holds it back).
func TestNextPrimaryLostToBackups(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0]
	p, b0, b1 := r.Primary, r.Backups[0], r.Backups[1]
	all := live("rs1", "rs2", "rs3", "rs4")
	v := View{Map: m, Live: all, Servers: seen("rs1", "rs2", "rs3", "rs4"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Hour, LogWait: time.Second, DropHold: time.Minute}}
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, b0}: 2 << 32}
	v.Lost = map[Join]bool{{r.ID, r.Epoch, b0}: true}
	if n := Next(v).Map; n != nil {
		t.Fatalf("failed over on one backup's loss: %+v", n.Region(r.ID))
	}
	// Positions without loss reports (backups that saw the primary's
	// registration go, the master not yet) are no loss.
	v.Logs[Join{r.ID, r.Epoch, b1}] = 3 << 32
	if n := Next(v).Map; n != nil {
		t.Fatalf("failed over on log positions alone: %+v", n.Region(r.ID))
	}
	v.Lost[Join{r.ID, r.Epoch, b1}] = true
	v.Dropped = map[Join]bool{{r.ID, r.Epoch, b0}: true, {r.ID, r.Epoch, b1}: true}
	d := Next(v)
	if d.Map == nil {
		t.Fatal("no failover with every backup reporting the primary lost")
	}
	nr := d.Map.Region(r.ID)
	if nr.Primary != b1 || nr.Epoch <= r.Epoch || !slices.Contains(nr.Backups, b0) {
		t.Fatalf("region %+v after %+v, want %s promoted (most complete), %s kept", nr, r, b1, b0)
	}
	if slices.Contains(nr.Group(), p) {
		t.Fatalf("the lost primary %s is in the new group %+v", p, nr)
	}
	if want := []Join{{r.ID, r.Epoch, p}}; !slices.Equal(d.Lost, want) {
		t.Fatalf("Lost %v, want %v", d.Lost, want)
	}
	if err := d.Map.Validate(); err != nil {
		t.Fatal(err)
	}
	// A dead backup is not waited for.
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, b0}: 2 << 32}
	v.Live = live("rs1", "rs2", "rs3", "rs4")
	delete(v.Live, b1)
	if n := Next(v).Map; n == nil || n.Region(r.ID).Primary != b0 {
		t.Fatal("a dead backup's report was waited for")
	}
	// No complete copy: the primary keeps the region, its drops count.
	v.Live = all
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, b0}: 2 << 32, {r.ID, r.Epoch, b1}: 3 << 32}
	v.Incomplete = map[Join]bool{{r.ID, r.Epoch, b0}: true, {r.ID, r.Epoch, b1}: true}
	d = Next(v)
	if nr := d.Map.Region(r.ID); nr.Primary != p || slices.Contains(nr.Backups, b0) || slices.Contains(nr.Backups, b1) || len(d.Lost) != 0 {
		t.Fatalf("region %+v, Lost %v: want %s keeping it without the dropped backups", nr, d.Lost, p)
	}
	// Reports of another epoch are no loss.
	v.Incomplete, v.Dropped = nil, nil
	v.Logs = map[Join]uint64{{r.ID, r.Epoch - 1, b0}: 2 << 32, {r.ID, r.Epoch - 1, b1}: 3 << 32}
	v.Lost = map[Join]bool{{r.ID, r.Epoch - 1, b0}: true, {r.ID, r.Epoch - 1, b1}: true}
	if n := Next(v).Map; n != nil {
		t.Fatalf("failed over on an older epoch's reports: %+v", n.Region(r.ID))
	}
	// A released region (a move) takes the release path: the old primary
	// stays in the group, as joining.
	mv := m.Clone()
	mr := mv.Region(r.ID)
	mr.MoveTo, mr.Released = b0, true
	v.Map = mv
	v.Logs = map[Join]uint64{{r.ID, r.Epoch, b0}: 2 << 32, {r.ID, r.Epoch, b1}: 2 << 32}
	v.Lost = map[Join]bool{{r.ID, r.Epoch, b0}: true, {r.ID, r.Epoch, b1}: true}
	v.Released = map[Join]time.Time{{r.ID, r.Epoch, p}: t0}
	d = Next(v)
	if nr := d.Map.Region(r.ID); nr.Primary != b0 || !slices.Contains(nr.Joining, p) || len(d.Lost) != 0 {
		t.Fatalf("moved region %+v, Lost %v: want %s primary, %s joining", nr, d.Lost, b0, p)
	}
}

// TestNextLostPrimaryNotReadded: with no other server to join, the lost
// primary (still registered) is not made a joining backup of the region
// it lost, in the decision that failed it over or while held after it.
func TestNextLostPrimaryNotReadded(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 1, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	r := m.Regions[0]
	v := View{Map: m, Live: live("rs1", "rs2", "rs3"), Servers: seen("rs1", "rs2", "rs3"), TermStart: t0, Now: t0,
		Timing: Timing{Grace: time.Hour, LogWait: time.Second, DropHold: time.Minute}}
	v.Logs, v.Lost = map[Join]uint64{}, map[Join]bool{}
	for _, b := range r.Backups {
		v.Logs[Join{r.ID, r.Epoch, b}], v.Lost[Join{r.ID, r.Epoch, b}] = 1<<32, true
	}
	d := Next(v)
	if d.Map == nil {
		t.Fatal("no failover")
	}
	nr := d.Map.Region(r.ID)
	if nr.Primary == r.Primary || slices.Contains(nr.Group(), r.Primary) {
		t.Fatalf("region %+v: the lost primary %s kept a role", nr, r.Primary)
	}
	// The next decision, the primary held as the master records it.
	v.Map, v.Logs, v.Lost = d.Map, nil, nil
	v.Servers = droppedAt(v.Servers, r.Primary, t0)
	if n := Next(v).Map; n != nil && slices.Contains(n.Region(r.ID).Group(), r.Primary) {
		t.Fatalf("the held lost primary joined again: %+v", n.Region(r.ID))
	}
}
