package region

import (
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// fakeCopy is a backup's copy as logReports reads it.
type fakeCopy struct {
	pos      uint64
	complete bool
	ok       bool
}

func (c fakeCopy) report(uint64) (uint64, bool, bool) { return c.pos, c.complete, c.ok }

// TestLogReports: which log position reports a backup owes, and what they
// say. A backup role whose region failed to open (no copy) reports an
// incomplete copy: the master promotes only complete copies, and without
// the report it would wait for this backup for ever (nor could the failed
// primary's new run take its region back).
func TestLogReports(t *testing.T) {
	m := &regionmap.Map{Version: 5,
		Servers: []regionmap.Server{{Name: "p", Started: 1}, {Name: "q", Started: 1}, {Name: "b", Started: 1}},
		Regions: []regionmap.Assignment{
			{ID: 1, Primary: "p", Backups: []string{"b"}, Epoch: 3},                                   // p gone: due
			{ID: 2, Primary: "q", Backups: []string{"b"}, Epoch: 4},                                   // q live, the map's run: not due
			{ID: 3, Primary: "p", Backups: []string{"b"}, Epoch: 7},                                   // p gone, no copy: due, incomplete
			{ID: 4, Primary: "p", Joining: []string{"b"}, Epoch: 2},                                   // joining: never
			{ID: 5, Primary: "p", Backups: []string{"b"}, Epoch: 9},                                   // reported already
			{ID: 6, Primary: "q", Backups: []string{"x"}, Epoch: 1},                                   // not ours
			{ID: 7, Primary: "q", Backups: []string{"b", "x"}, MoveTo: "x", Released: true, Epoch: 2}, // q live, released for a move: due
			{ID: 8, Primary: "q", Backups: []string{"b", "x"}, MoveTo: "x", Epoch: 5},                 // moving, not released yet: not due
			{ID: 9, Primary: "q", Backups: []string{"b"}, Epoch: 6},                                   // q live, lost with the map's run: due, lost
			{ID: 10, Primary: "q", Backups: []string{"b"}, Epoch: 6},                                  // q live, an older run lost: not due
			{ID: 11, Primary: "q", Backups: []string{"b"}, Epoch: 6},                                  // q live, lost at an older epoch: not due
		}}
	live := map[string]coord.ServerInfo{"q": {Server: regionmap.Server{Name: "q"}, Started: 1}, "b": {Server: regionmap.Server{Name: "b"}, Started: 1}}
	copies := map[uint64]logCopy{1: fakeCopy{pos: 3<<32 | 100, complete: true, ok: true}, 2: fakeCopy{ok: true, complete: true}, 5: fakeCopy{ok: true},
		7: fakeCopy{pos: 2 << 32, complete: true, ok: true}, 8: fakeCopy{ok: true, complete: true}}
	copies[9], copies[10], copies[11] = fakeCopy{pos: 4 << 32, complete: true, ok: true}, fakeCopy{ok: true, complete: true}, fakeCopy{ok: true, complete: true}
	lost := map[uint64]lostPrimary{9: {regionmap.Server{Name: "q", Started: 1}, 6}, 10: {regionmap.Server{Name: "q", Started: 7}, 6},
		11: {regionmap.Server{Name: "q", Started: 1}, 5}}
	reported := map[[2]uint64]bool{{5, 9}: true}
	out, failed := logReports(m, "b", live, reported, copies, lost)
	want := []logDue{
		{coord.LogReport{Region: 1, Epoch: 3, Server: "b", Pos: 3<<32 | 100, Complete: true}, false},
		{coord.LogReport{Region: 3, Epoch: 7, Server: "b"}, false},
		{coord.LogReport{Region: 7, Epoch: 2, Server: "b", Pos: 2 << 32, Complete: true}, false},
		{coord.LogReport{Region: 9, Epoch: 6, Server: "b", Pos: 4 << 32, Complete: true}, true},
	}
	if failed || len(out) != len(want) {
		t.Fatalf("reports %+v (failed %v), want %+v", out, failed, want)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("report %d: %+v, want %+v", i, out[i], want[i])
		}
	}
	reported[[2]uint64{9, 6}] = true
	// q restarts (a new run): region 2 is due. A copy that cannot be read
	// now (its buffer revoked) is tried again, not reported.
	live["q"] = coord.ServerInfo{Server: regionmap.Server{Name: "q"}, Started: 2}
	copies[2] = fakeCopy{ok: false}
	reported[[2]uint64{1, 3}], reported[[2]uint64{3, 7}], reported[[2]uint64{7, 2}] = true, true, true
	reported[[2]uint64{8, 5}] = true  // due too (q's new run), reported
	reported[[2]uint64{10, 6}] = true // likewise
	reported[[2]uint64{11, 6}] = true
	out, failed = logReports(m, "b", live, reported, copies, lost)
	if !failed || len(out) != 0 {
		t.Fatalf("an unreadable copy: reports %+v, failed %v", out, failed)
	}
}
