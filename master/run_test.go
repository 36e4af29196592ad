package master

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/coord/coordtest"
)

// runFake runs Run on f with a fake clock at t0 until the test ends.
func runFake(t *testing.T, f *coordtest.Coordinator, grace time.Duration) *clock {
	t.Helper()
	clk := &clock{t: t0}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Name: "m", Coord: f, Grace: grace, Recheck: 2 * time.Millisecond,
			Log: zaptest.NewLogger(t), Now: clk.Now})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v at the context's end, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return 10s after its context ended")
		}
	})
	return clk
}

// wait polls cond until it holds, failing the test after 10 s.
func wait(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle waits until Run made two more decisions: the second began after
// the first ended, hence after everything the test did before settle
// (watches deliver synchronously) and the first's write, if any.
func settle(t *testing.T, f *coordtest.Coordinator) {
	t.Helper()
	n := f.Counters().Reads
	wait(t, "two decisions", func() bool { return f.Counters().Reads >= n+2 })
}

func leading(f *coordtest.Coordinator, terms int) func() bool {
	return func() bool { c := f.Counters(); return c.Terms == terms && c.Waiting == 0 }
}

func campaigning(f *coordtest.Coordinator, campaigns int) func() bool {
	return func() bool { c := f.Counters(); return c.Campaigns == campaigns && c.Waiting == 1 }
}

func atVersion(f *coordtest.Coordinator, ver int32) func() bool {
	return func() bool { _, v := f.Map(); return v == ver }
}

var all4 = []string{"rs1", "rs2", "rs3", "rs4"}

// promoted checks that region r of m lost its primary dead to a backup.
func promoted(t *testing.T, m *regionmap.Map, r regionmap.Assignment) {
	t.Helper()
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	nr := m.Region(r.ID)
	if nr.Primary != r.Backups[0] || nr.Epoch <= r.Epoch || slices.Contains(nr.Group(), r.Primary) {
		t.Fatalf("region %+v after its primary %s died: %+v", r, r.Primary, nr)
	}
}

// reportLogs reports log positions for r's backups at r's epoch, the
// first backup's the highest.
func reportLogs(f *coordtest.Coordinator, r regionmap.Assignment) {
	for i, b := range r.Backups {
		f.AddReport(coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: b, Pos: uint64(len(r.Backups)-i) << 32, Complete: true})
	}
}

func TestRunPromotesBackup(t *testing.T) {
	m := threeWay(t)
	f := newFake(m, all4...)
	clk := runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f) // the watches delivered: the servers were seen live
	settle(t, f)
	if _, v := f.Map(); v != 0 {
		t.Fatalf("a healthy cluster's map was rewritten (znode version %d)", v)
	}

	// The promotion waits for both backups' log positions (up to LogWait)
	// and takes the most complete log.
	r := m.Regions[0]
	f.RemoveServer(r.Primary)
	settle(t, f)
	clk.Advance(900 * time.Millisecond)
	f.AddReport(coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: r.Backups[0], Pos: 2<<32 | 500, Complete: true})
	settle(t, f)
	// (the dead server's backup roles went at once)
	got, v := f.Map()
	if v > 1 || got.Region(r.ID).Primary != r.Primary {
		t.Fatalf("promoted before every live backup reported its log position (znode version %d): %+v", v, got.Region(r.ID))
	}
	f.AddReport(coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: r.Backups[1], Pos: 2<<32 | 900, Complete: true})
	wait(t, "a new map", atVersion(f, 2))
	got, _ = f.Map()
	if got.Version != m.Version+2 {
		t.Fatalf("map version %d, want %d", got.Version, m.Version+2)
	}
	if nr := got.Region(r.ID); nr.Primary != r.Backups[1] || nr.Epoch <= r.Epoch {
		t.Fatalf("region %+v after its primary died: %+v; want %s (the most complete log) promoted", r, nr, r.Backups[1])
	}
	settle(t, f)
	if _, v := f.Map(); v != 2 {
		t.Fatalf("the map changed again without a cause (znode version %d)", v)
	}
	if c := f.Counters(); c.Rejected+c.Conflicts != 0 || c.Forgets != 2 {
		t.Fatalf("counters %+v", c)
	}
	for _, rep := range f.Reports() {
		if j := rep.Key(); j.Region == r.ID && j.Epoch == r.Epoch {
			t.Fatalf("report of the old epoch kept: %+v", j)
		}
	}

	// Without reports nobody is promoted, after LogWait too (a backup
	// that did not report may lack acknowledged writes); the first
	// complete report after LogWait is promoted.
	r2 := *got.Region(2)
	f.RemoveServer(r2.Primary)
	settle(t, f)
	got, v = f.Map()
	if got.Region(r2.ID).Primary != r2.Primary {
		t.Fatalf("promoted without log positions within LogWait (znode version %d)", v)
	}
	clk.Advance(time.Second)
	settle(t, f)
	settle(t, f)
	if got, v = f.Map(); got.Region(r2.ID).Primary != r2.Primary {
		t.Fatalf("promoted %s after LogWait without its report (znode version %d)", got.Region(r2.ID).Primary, v)
	}
	f.AddReport(coord.LogReport{Region: r2.ID, Epoch: got.Region(r2.ID).Epoch, Server: r2.Backups[1], Pos: 1 << 32, Complete: true})
	wait(t, "the second promotion", func() bool { m, _ := f.Map(); return m.Region(r2.ID).Primary != r2.Primary })
	got, _ = f.Map()
	if p := got.Region(r2.ID).Primary; p != r2.Backups[1] {
		t.Fatalf("promoted %s, the only backup that reported is %s", p, r2.Backups[1])
	}
}

func TestRunGraceForUnseenServers(t *testing.T) {
	m := threeWay(t)
	r := m.Regions[0] // rs1 is its primary: never live here
	f := newFake(m, "rs2", "rs3", "rs4")
	clk := runFake(t, f, 10*time.Second)
	wait(t, "leading", leading(f, 1))
	settle(t, f) // the watches delivered: the servers were seen live
	settle(t, f)
	clk.Advance(9 * time.Second)
	settle(t, f)
	if _, v := f.Map(); v != 0 {
		t.Fatalf("a server never seen live was failed within the grace (znode version %d)", v)
	}
	clk.Advance(time.Second)
	for _, b := range r.Backups { // the backups see their primary gone and report
		f.AddReport(coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: b, Pos: 1 << 32, Complete: true})
	}
	wait(t, "a new map after the grace", atVersion(f, 1))
	got, _ := f.Map()
	promoted(t, got, r)
}

func TestRunCampaignsAgainAfterLoss(t *testing.T) {
	m := threeWay(t)
	f := newFake(m, all4...)
	runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f) // the watches delivered: the servers were seen live
	settle(t, f)

	// Deposed while idle: Run notices Lost and campaigns again; while
	// another leads it decides nothing.
	f.Depose()
	wait(t, "campaigning again", campaigning(f, 2))
	reads := f.Counters().Reads
	r := m.Regions[0]
	f.RemoveServer(r.Primary)
	reportLogs(f, r)
	time.Sleep(20 * time.Millisecond) // 10 Rechecks
	if c := f.Counters(); c.Reads != reads || c.Writes != 0 {
		t.Fatalf("a deposed master went on deciding: %+v", c)
	}
	f.Yield()
	wait(t, "leading again", leading(f, 2))
	wait(t, "the promotion", atVersion(f, 1))
	got, _ := f.Map()
	promoted(t, got, r)

	// Deposed between reading the map and writing it: the write is
	// refused, the map stays, and Run campaigns again.
	f.SetBeforeWrite(func() {
		f.SetBeforeWrite(nil)
		f.Depose()
	})
	r2 := *got.Region(2)
	f.RemoveServer(r2.Primary)
	reportLogs(f, r2)
	wait(t, "campaigning again", campaigning(f, 3))
	if _, v := f.Map(); v != 1 {
		t.Fatalf("a deposed master's write went through (znode version %d)", v)
	}
	if c := f.Counters(); c.Rejected != 1 {
		t.Fatalf("counters %+v: want one write refused", c)
	}
	f.Yield()
	wait(t, "the second promotion", atVersion(f, 2))
	got, _ = f.Map()
	promoted(t, got, r2)
	if c := f.Counters(); c.Terms != 3 {
		t.Fatalf("counters %+v: want 3 terms", c)
	}
}

func TestRunJoinCompletes(t *testing.T) {
	m := threeWay(t)
	f := newFake(m, all4...)
	runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f) // the watches delivered: the servers were seen live
	r := m.Regions[1]
	f.RemoveServer(r.Backups[0])
	wait(t, "a new map", atVersion(f, 1))
	got, _ := f.Map()
	nr := *got.Region(r.ID)
	if nr.Primary != r.Primary || len(nr.Joining) != 1 || nr.Epoch <= r.Epoch {
		t.Fatalf("region %+v after backup %s left: %+v", r, r.Backups[0], nr)
	}
	joiner := nr.Joining[0]
	// A report of an older epoch does not count; the current one does.
	stale := coord.JoinReport{Region: r.ID, Epoch: nr.Epoch - 1, Server: joiner}
	f.AddReport(stale)
	settle(t, f)
	if _, v := f.Map(); v != 1 {
		t.Fatal("a stale join report was taken")
	}
	cur := coord.JoinReport{Region: r.ID, Epoch: nr.Epoch, Server: joiner}
	f.AddReport(cur)
	wait(t, "the join", atVersion(f, 2))
	got, _ = f.Map()
	dr := got.Region(r.ID)
	if len(dr.Joining) != 0 || !slices.Contains(dr.Backups, joiner) || dr.Epoch != nr.Epoch {
		t.Fatalf("region after the join: %+v", dr)
	}
	if rs := f.Reports(); slices.Contains(rs, coord.Report(stale)) || !slices.Contains(rs, coord.Report(cur)) {
		t.Fatalf("reports kept: %v; want the stale one forgotten", rs)
	}
}

func TestRunRetriesConflict(t *testing.T) {
	m := threeWay(t)
	f := newFake(m, all4...)
	runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f) // the watches delivered: the servers were seen live
	settle(t, f)
	// Another writer changes the map under the first write.
	f.SetBeforeWrite(func() {
		f.SetBeforeWrite(nil)
		other, _ := f.Map()
		other.Version++
		f.PutMap(other)
	})
	r := m.Regions[2]
	// The positions first: a decision between the primary's removal and
	// the reports would write the map once for the other regions (whose
	// backup it was) and promote in a second write.
	reportLogs(f, r)
	f.RemoveServer(r.Primary)
	wait(t, "the retried write", atVersion(f, 2))
	got, _ := f.Map()
	promoted(t, got, r)
	if got.Version != m.Version+2 {
		t.Fatalf("map version %d, want %d (after the other writer's)", got.Version, m.Version+2)
	}
	if c := f.Counters(); c.Conflicts != 1 || c.Terms != 1 {
		t.Fatalf("counters %+v: want one conflict in one term", c)
	}
}

func TestRunWithoutMap(t *testing.T) {
	f := newFake(nil, all4...)
	runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f) // the watches delivered: the servers were seen live
	settle(t, f)
	if c := f.Counters(); c.Writes != 0 {
		t.Fatalf("wrote without a map: %+v", c)
	}
	// The map appears (tebis cluster init): Run takes it up.
	m := threeWay(t)
	f.PutMap(m)
	f.RemoveServer(m.Regions[0].Primary)
	wait(t, "a new map", atVersion(f, 2))
}

func TestRunNeedsCoordinator(t *testing.T) {
	if err := Run(context.Background(), Config{Name: "m"}); err == nil {
		t.Fatal("Run without a coordinator succeeded")
	}
}

// TestRunHoldsBackDroppedServer: a backup its primary reported dropped
// (here: still registered, as a killed server is until its session
// expires) leaves the group and joins again only after DropHold.
func TestRunHoldsBackDroppedServer(t *testing.T) {
	m, err := InitialMap([]regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")}, Layout{Regions: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(m, "rs1", "rs2", "rs3")
	clk := runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f)
	r := m.Regions[0]
	x := r.Backups[0]
	f.AddReport(coord.DropReport{Region: r.ID, Epoch: r.Epoch, Server: x})
	wait(t, "the drop", atVersion(f, 1))
	settle(t, f)
	got, v := f.Map()
	if nr := got.Region(r.ID); v != 1 || slices.Contains(nr.Group(), x) {
		t.Fatalf("znode version %d, region %+v: want %s out and not back yet", v, nr, x)
	}
	clk.Advance(5 * time.Second) // the default DropHold
	wait(t, "the dropped server joining again", atVersion(f, 2))
	got, _ = f.Map()
	if nr := got.Region(r.ID); !slices.Contains(nr.Joining, x) {
		t.Fatalf("region %+v after the hold: want %s joining", nr, x)
	}
}

// TestRunSkipsIncompleteBackup: a backup's report that its copy is
// incomplete reaches the decision: the other backup is promoted although
// the incomplete one holds more of the log.
func TestRunSkipsIncompleteBackup(t *testing.T) {
	m := threeWay(t)
	f := newFake(m, all4...)
	runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f)
	settle(t, f)
	r := m.Regions[0]
	f.RemoveServer(r.Primary)
	settle(t, f)
	f.AddReport(coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: r.Backups[0], Pos: 2<<32 | 500, Complete: true})
	f.AddReport(coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: r.Backups[1], Pos: 9 << 32})
	wait(t, "a new map", func() bool { got, _ := f.Map(); return got.Region(r.ID).Primary != r.Primary })
	if got, _ := f.Map(); got.Region(r.ID).Primary != r.Backups[0] {
		t.Fatalf("promoted %s, whose copy is incomplete; want %s", got.Region(r.ID).Primary, r.Backups[0])
	}
}

// TestRunUnhealthyServer: a server whose disk cannot store writes
// publishes its health report for a new run and registers as that run
// (its step-down): the master fails its regions over as a restart's and
// gives it no role while the report is there, also when a group then has
// no other candidate; a report naming a run that is not registered counts
// for nothing; once the report goes the server joins groups again.
func TestRunUnhealthyServer(t *testing.T) {
	m := threeWay(t)
	f := newFake(m, all4...)
	clk := runFake(t, f, time.Hour)
	wait(t, "leading", leading(f, 1))
	settle(t, f)
	r := *m.Region(1) // rs1's, backups rs2 and rs3
	f.SetHealth("rs1", &coord.Health{Name: "rs1", Started: 2, State: coord.HealthFailed})
	settle(t, f)
	if _, v := f.Map(); v != 0 {
		t.Fatalf("a health report of a run not registered changed the map (znode version %d)", v)
	}
	f.SetServer(coord.ServerInfo{Server: srv("rs1"), Started: 2})
	reportLogs(f, r)
	r3 := *m.Region(3) // rs1 is its backup
	clk.Advance(2 * time.Second)
	wait(t, "region 1 moved off rs1", func() bool {
		got, _ := f.Map()
		return got.Region(1).Primary != "rs1"
	})
	settle(t, f)
	settle(t, f)
	noRole := func(what string) {
		t.Helper()
		got, _ := f.Map()
		for _, o := range got.Regions {
			if o.Primary == "rs1" || slices.Contains(o.Group(), "rs1") {
				t.Fatalf("%s: region %d gives the unhealthy rs1 a role: %+v", what, o.ID, o)
			}
		}
	}
	noRole("after the step-down")
	if got, _ := f.Map(); got.Region(3).Epoch <= r3.Epoch {
		t.Fatalf("region 3 kept rs1 as a backup: %+v", got.Region(3))
	}
	// rs4 dies: its groups are short, and only the unhealthy rs1 is left.
	f.RemoveServer("rs4")
	clk.Advance(2 * time.Second)
	for _, o := range func() []regionmap.Assignment { got, _ := f.Map(); return got.Regions }() {
		if o.Primary == "rs4" {
			reportLogs(f, o)
		}
	}
	settle(t, f)
	settle(t, f)
	noRole("with rs4 dead")
	// Healthy again: it joins.
	f.SetHealth("rs1", nil)
	wait(t, "rs1 joining again", func() bool {
		got, _ := f.Map()
		return slices.ContainsFunc(got.Regions, func(o regionmap.Assignment) bool { return slices.Contains(o.Group(), "rs1") })
	})
}
