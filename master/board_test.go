package master

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
)

// twoRegions is a map of rs1..rs3 with region 1 (rs1; rs2, rs3) and region
// 2 (rs2; rs3) at epoch 1.
func twoRegions() *regionmap.Map {
	return &regionmap.Map{Version: 1, Replicas: 3, Servers: []regionmap.Server{srv("rs1"), srv("rs2"), srv("rs3")},
		Regions: []regionmap.Assignment{
			{ID: 1, End: "m", Primary: "rs1", Backups: []string{"rs2", "rs3"}, Epoch: 1},
			{ID: 2, Start: "m", Primary: "rs2", Backups: []string{"rs3"}, Epoch: 1},
		}}
}

func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*regionmap.Map)
		want []string
	}{
		{"nothing", func(*regionmap.Map) {}, nil},
		{"failover", func(m *regionmap.Map) {
			m.Regions[0].Primary, m.Regions[0].Backups, m.Regions[0].Epoch = "rs2", []string{"rs3"}, 2
		}, []string{"region 1: primary rs1 → rs2, backups [rs2 rs3] → [rs3], epoch 1 → 2"}},
		{"join", func(m *regionmap.Map) {
			m.Servers = append(m.Servers, srv("rs4"))
			m.Regions[1].Joining, m.Regions[1].Epoch = []string{"rs4"}, 2
		}, []string{"server rs4 added", "region 2: joining [] → [rs4], epoch 1 → 2"}},
		{"restart and removal", func(m *regionmap.Map) {
			m.Servers[1].Started = 9
			m.Servers = m.Servers[:2]
		}, []string{"server rs2: new run 9", "server rs3 removed"}},
		{"new address", func(m *regionmap.Map) { m.Servers[0].Shm = "/elsewhere" }, []string{"server rs1: new addresses"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, next := twoRegions(), twoRegions()
			tc.edit(next)
			if got := changes(old, next); !slices.Equal(got, tc.want) {
				t.Fatalf("changes = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFailovers(t *testing.T) {
	now := t0.Add(time.Minute)
	old, next := twoRegions(), twoRegions()
	next.Regions[0].Primary, next.Regions[0].Backups, next.Regions[0].Epoch = "rs2", []string{"rs3"}, 2
	for _, tc := range []struct {
		name      string
		obs       map[string]Observed
		termStart time.Time
		took      time.Duration
		gone      time.Time
	}{
		{"seen gone", observe(nil, "rs1", func(o *Observed) { o.Gone = now.Add(-3 * time.Second) }), t0, 3 * time.Second, now.Add(-3 * time.Second)},
		{"never seen gone: from the term's start", nil, now.Add(-10 * time.Second), 10 * time.Second, time.Time{}},
		{"gone before the term", observe(nil, "rs1", func(o *Observed) { o.Gone = t0 }), now.Add(-2 * time.Second), 2 * time.Second, t0},
		{"gone after now", observe(nil, "rs1", func(o *Observed) { o.Gone = now.Add(time.Second) }), now.Add(-2 * time.Second), 2 * time.Second, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := failovers(old, next, tc.obs, tc.termStart, now)
			want := []Failover{{Region: 1, From: "rs1", To: "rs2", Epoch: 2, At: now, Took: tc.took, Gone: tc.gone}}
			if !slices.Equal(got, want) {
				t.Fatalf("failovers = %+v, want %+v", got, want)
			}
		})
	}
	if got := failovers(old, old, nil, t0, now); len(got) != 0 {
		t.Fatalf("failovers of an unchanged map = %+v", got)
	}
	moving := twoRegions()
	moving.Regions[0].MoveTo = "rs2"
	got := failovers(moving, next, observe(nil, "rs1", func(o *Observed) { o.Gone = t0 }), t0, now)
	if len(got) != 1 || !got[0].Moved || !got[0].Gone.IsZero() {
		t.Fatalf("a planned move: %+v, want one Moved, not timed", got)
	}
}

func TestBoardHistoryBounded(t *testing.T) {
	var b board
	old := twoRegions()
	for v := range uint64(historyLen + 5) {
		next := old.Clone()
		next.Version = v + 2
		next.Regions[0].Epoch = v + 2
		b.published(old, next, t0.Add(time.Duration(v)*time.Second), []Failover{{Region: 1, Epoch: v + 2}})
		old = next
	}
	s := b.snapshot()
	if len(s.Maps) != historyLen || len(s.Failovers) != historyLen {
		t.Fatalf("%d maps and %d failovers kept, want %d", len(s.Maps), len(s.Failovers), historyLen)
	}
	if s.Maps[0].Version != historyLen+6 || s.Failovers[0].Epoch != historyLen+6 || s.Map.Version != historyLen+6 {
		t.Fatalf("newest kept: map %d, failover epoch %d, current %d; want %d first", s.Maps[0].Version, s.Failovers[0].Epoch, s.Map.Version, historyLen+6)
	}
	if got := fmt.Sprint(s.Maps[0].Changes); got != fmt.Sprintf("[region 1: epoch %d → %d]", historyLen+5, historyLen+6) {
		t.Fatalf("changes of the newest: %s", got)
	}
}
