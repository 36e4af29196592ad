package region

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/testseed"
)

// planString renders a plan as "step id, step id, ...".
func planString(acts []action) string {
	var b strings.Builder
	for i, a := range acts {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %d", a.step, a.region)
	}
	return b.String()
}

func TestPlan(t *testing.T) {
	r := func(id uint64, epoch uint64, primary string, backups ...string) regionmap.Assignment {
		return regionmap.Assignment{ID: id, Epoch: epoch, Primary: primary, Backups: backups}
	}
	mapOf := func(rs ...regionmap.Assignment) *regionmap.Map { return &regionmap.Map{Version: 9, Regions: rs} }
	primary := held{role: rolePrimary}
	streaming := func(epoch uint64, group ...string) held {
		return held{role: rolePrimary, stream: true, epoch: epoch, group: group}
	}
	job := func(h held, r regionmap.Assignment) held {
		h.job = &r
		return h
	}
	joining := r(1, 4, "p", "b")
	joining.Joining = []string{"c"}
	moving := func(a regionmap.Assignment, to string) regionmap.Assignment {
		a.MoveTo = to
		return a
	}
	for _, tc := range []struct {
		name    string
		m       *regionmap.Map
		known   bool
		managed bool
		hs      map[uint64]held
		want    string
	}{
		{name: "first map: open, attach", m: mapOf(r(1, 1, "p", "b")), known: true,
			want: "open 1, attach 1"},
		{name: "first map, no backups: open, serve alone", m: mapOf(r(1, 1, "p")), known: true,
			want: "open 1, alone 1"},
		{name: "backup of a region: open its replica", m: mapOf(r(1, 1, "b", "p")), known: true,
			want: "open-backup 1"},
		{name: "first map, a joining backup: open, attach", m: mapOf(joining), known: true,
			want: "open 1, attach 1"},
		{name: "joining a region: open its replica", m: mapOf(regionmap.Assignment{ID: 1, Epoch: 2, Primary: "b", Joining: []string{"p"}}), known: true,
			want: "open-backup 1"},
		{name: "kept, stream unchanged: serve as it is", m: mapOf(r(1, 3, "p", "b")), known: true,
			hs: map[uint64]held{1: streaming(3, "b")}, want: "keep 1, serve 1"},
		{name: "kept, new epoch: a new stream", m: mapOf(r(1, 4, "p", "b")), known: true,
			hs: map[uint64]held{1: streaming(3, "b")}, want: "reattach 1, attach 1"},
		{name: "kept, a backup joined: a new stream", m: mapOf(joining), known: true,
			hs: map[uint64]held{1: streaming(4, "b")}, want: "reattach 1, attach 1"},
		{name: "kept, group emptied: the attach retires the stream", m: mapOf(r(1, 4, "p")), known: true,
			hs: map[uint64]held{1: streaming(3, "b")}, want: "reattach 1, attach 1"},
		{name: "kept without a stream, backups: attach", m: mapOf(r(1, 3, "p", "b")), known: true,
			hs: map[uint64]held{1: primary}, want: "keep 1, attach 1"},
		{name: "kept without a stream or backups: serve alone", m: mapOf(r(1, 3, "p")), known: true,
			hs: map[uint64]held{1: primary}, want: "keep 1, alone 1"},
		{name: "backup named primary: promote, attach", m: mapOf(r(1, 5, "p", "c")), known: true, managed: true,
			hs: map[uint64]held{1: {role: roleBackup}}, want: "promote 1, attach 1"},
		{name: "backup named primary, no backups left: promote, serve alone", m: mapOf(r(1, 5, "p")), known: true, managed: true,
			hs: map[uint64]held{1: {role: roleBackup}}, want: "promote 1, alone 1"},
		{name: "managed, incomplete copy named primary: refused, not served", m: mapOf(r(1, 5, "p", "b")), known: true, managed: true,
			hs: map[uint64]held{1: {copy: true}}, want: "incomplete 1"},
		{name: "static, a copy named primary: the operator's word", m: mapOf(r(1, 5, "p", "b")), known: true,
			hs: map[uint64]held{1: {copy: true}}, want: "open-copy 1, attach 1"},
		{name: "the copy cannot be read: fail", m: mapOf(r(1, 5, "p")), known: true, managed: true,
			hs: map[uint64]held{1: {copyErr: errors.New("boom")}}, want: "fail 1"},
		{name: "moved to a backup: deposed before reopened as a backup", m: mapOf(r(2, 6, "b", "p")), known: true, managed: true,
			hs: map[uint64]held{2: streaming(5, "b")}, want: "depose 2, open-backup 2"},
		{name: "moved away, dropped from the map, kept", m: mapOf(r(1, 3, "p", "b"), r(3, 6, "b")), known: true, managed: true,
			hs:   map[uint64]held{1: streaming(3, "b"), 3: primary, 4: primary},
			want: "depose 3, depose 4, keep 1, serve 1"},
		{name: "a map not for this run: depose all, no roles", m: mapOf(r(1, 3, "p", "b"), r(2, 3, "b", "p")), known: false, managed: true,
			hs: map[uint64]held{1: streaming(3, "b"), 2: {role: roleBackup}}, want: "depose 1"},
		{name: "an attach the map supersedes is cancelled before anything else", m: mapOf(r(1, 4, "p", "b"), r(2, 1, "b")), known: true, managed: true,
			hs:   map[uint64]held{1: job(primary, r(1, 3, "p", "b")), 2: job(primary, r(2, 1, "p"))},
			want: "supersede 1, supersede 2, depose 2, keep 1, attach 1"},
		{name: "an attach for the same region, epoch and group goes on", m: mapOf(r(1, 3, "p", "b")), known: true, managed: true,
			hs: map[uint64]held{1: job(primary, r(1, 3, "p", "b"))}, want: "keep 1, attach 1"},
		{name: "moving away: deposed, nothing opened", m: mapOf(moving(r(1, 3, "p", "b"), "b")), known: true, managed: true,
			hs: map[uint64]held{1: streaming(3, "b")}, want: "depose 1"},
		{name: "moving away while attaching: superseded, deposed", m: mapOf(moving(r(1, 3, "p", "b"), "b")), known: true, managed: true,
			hs: map[uint64]held{1: job(primary, r(1, 3, "p", "b"))}, want: "supersede 1, depose 1"},
		{name: "released: nothing to do until the next map", m: mapOf(moving(r(1, 3, "p", "b"), "b")), known: true, managed: true,
			hs: map[uint64]held{1: {}}, want: ""},
		{name: "a move to this server: still a backup until promoted", m: mapOf(moving(r(1, 3, "b", "p"), "p")), known: true, managed: true,
			hs: map[uint64]held{1: {role: roleBackup}}, want: "open-backup 1"},
		{name: "a cancelled move: the released primary serves again", m: mapOf(r(1, 4, "p", "b")), known: true, managed: true,
			want: "open 1, attach 1"},
		{name: "a map not for this run supersedes every attach", m: mapOf(r(1, 3, "p", "b")), known: false, managed: true,
			hs: map[uint64]held{1: job(primary, r(1, 3, "p", "b"))}, want: "supersede 1, depose 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := planString(plan(tc.m, "p", tc.known, tc.managed, tc.hs))
			if got != tc.want {
				t.Fatalf("plan = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestPlanOrderings checks plan's ordering rules on random maps and
// holdings: supersedes first, then deposes, then per region one role
// step followed by at most one serving step; a deposed region is never
// served as primary by the same plan; only regions the map names this
// server primary of are served.
func TestPlanOrderings(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 19))
	servers := []string{"p", "b", "c"}
	pick := func() string { return servers[rng.IntN(len(servers))] }
	for iter := range 20_000 {
		m := &regionmap.Map{Version: 2}
		hs := map[uint64]held{}
		for id := uint64(1); id <= 5; id++ {
			if rng.IntN(5) > 0 {
				r := regionmap.Assignment{ID: id, Epoch: uint64(1 + rng.IntN(3)), Primary: pick()}
				for _, s := range servers {
					if s != r.Primary && rng.IntN(2) == 0 {
						if rng.IntN(4) == 0 {
							r.Joining = append(r.Joining, s)
						} else {
							r.Backups = append(r.Backups, s)
						}
					}
				}
				if len(r.Backups) > 0 && rng.IntN(4) == 0 {
					r.MoveTo = r.Backups[rng.IntN(len(r.Backups))] // a move in flight
				}
				m.Regions = append(m.Regions, r)
			}
			var h held
			switch rng.IntN(3) {
			case 1:
				h.role = roleBackup
			case 2:
				h.role = rolePrimary
				if rng.IntN(2) == 0 {
					h.stream, h.epoch = true, uint64(1+rng.IntN(3))
					h.group = []string{pick()}
				}
			}
			if h.role == roleNone {
				h.copy = rng.IntN(3) == 0
			}
			if rng.IntN(3) == 0 {
				h.job = &regionmap.Assignment{ID: id, Epoch: uint64(1 + rng.IntN(3)), Primary: "p", Backups: []string{pick()}}
			}
			hs[id] = h
		}
		known, managed := rng.IntN(5) > 0, rng.IntN(2) == 0
		acts := plan(m, "p", known, managed, hs)
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("iteration %d (known %v, managed %v): %s\nmap %+v\nplan %s", iter, known, managed, fmt.Sprintf(format, args...), m.Regions, planString(acts))
		}
		phase := 0 // 0 supersedes, 1 deposes, 2 regions
		deposed := map[uint64]bool{}
		roleOf := map[uint64]step{}
		served := map[uint64]bool{}
		for _, a := range acts {
			switch a.step {
			case stepSupersede:
				if phase > 0 {
					fail("supersede %d after a depose or a role step", a.region)
				}
			case stepDepose:
				if phase > 1 {
					fail("depose %d after a role step", a.region)
				}
				phase = 1
				deposed[a.region] = true
				if hs[a.region].role != rolePrimary {
					fail("depose %d, which is not hosted", a.region)
				}
			case stepAttach, stepAlone, stepServe:
				phase = 2
				rs := roleOf[a.region]
				if rs == 0 || served[a.region] {
					fail("%s %d without a role step before it, or twice", a.step, a.region)
				}
				if rs == stepIncomplete || rs == stepFail || rs == stepOpenBackup {
					fail("%s %d after %s", a.step, a.region, rs)
				}
				if deposed[a.region] {
					fail("region %d deposed and served as primary by one plan", a.region)
				}
				if r := m.Region(a.region); !known || r == nil || !r.Serving("p") {
					fail("region %d served, but the map does not have this server serve it as primary", a.region)
				}
				served[a.region] = true
			default:
				phase = 2
				if roleOf[a.region] != 0 {
					fail("two role steps for region %d", a.region)
				}
				roleOf[a.region] = a.step
				if a.step == stepPromote && hs[a.region].role != roleBackup {
					fail("promote %d, not a backup here", a.region)
				}
				if a.step == stepIncomplete && !managed {
					fail("incomplete %d in a static map", a.region)
				}
			}
		}
		for _, r := range m.Regions {
			if !known {
				continue
			}
			rs := roleOf[r.ID]
			switch {
			case r.Serving("p") && (rs == 0 || rs == stepOpenBackup):
				fail("region %d: primary here, role step %v", r.ID, rs)
			case slices.Contains(r.Group(), "p") && rs != stepOpenBackup:
				fail("region %d: a backup here, role step %v", r.ID, rs)
			case r.Serving("p") && rs != stepIncomplete && rs != stepFail && !served[r.ID]:
				fail("region %d: primary here, never served", r.ID)
			case r.Primary == "p" && r.MoveTo != "" && (rs != 0 || hs[r.ID].role == rolePrimary && !deposed[r.ID]):
				fail("region %d: moving away from here, yet role step %v or not deposed", r.ID, rs)
			}
		}
	}
}
