package master

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tebis-go/tebis/client/regionmap"
)

// Moving a live primary (docs/failover.md, "Moving a primary"): an
// operator's move, a drain or the balancer. A move lives within one
// epoch of its region and takes two maps:
//
//  1. the map names the target, one of the region's backups, in MoveTo
//     (the epoch stays): the primary stops serving and replicating the
//     region, then reports its release; its backups report their log
//     positions as after a failure;
//  2. once the primary released (or failed), the region fails over as if
//     its primary had died: a backup that reported a complete copy is
//     promoted (the target first) at a new epoch, and the old primary, if
//     it may hold roles, joins the group.
//
// Until the release, the old primary may still serve: nothing is promoted
// before it (a promotion before would let it answer reads a new primary
// made stale). A move ends with any change of its region's epoch: a
// group that changes meanwhile, no release within Timing.MoveTimeout, or
// no backup with a complete copy after the release cancel it, and the
// primary serves again at a new epoch.

// MoveOutcome is an operator's move request the master is done with.
type MoveOutcome struct {
	Region uint64
	Target string
	// Err is why the move was given up; nil: the target is primary.
	Err error
}

// releasedBy reports whether r's primary released r for its move
// (MoveTo set) at r's epoch.
func (v *plan) releasedBy(r *regionmap.Assignment) bool {
	if r.MoveTo == "" {
		return false
	}
	_, ok := v.Released[Join{r.ID, r.Epoch, r.Primary}]
	return ok
}

// mayHold reports whether server name may be given a new role: live, not
// restarted, healthy, not drained, not held back after a drop, not a
// primary this decision failed over as lost.
func (v *plan) mayHold(name string) bool {
	_, live := v.Live[name]
	return live && !v.restarted[name] && !v.Unhealthy[name] && !v.Requests.Drained[name] && !v.held(name) &&
		!slices.ContainsFunc(v.lost, func(j Join) bool { return j.Server == name })
}

// target reports whether server name may take r's primary role by a move
// (nil) or why not: a backup (not joining) that may hold roles, not
// dropped at r's epoch.
func (v *plan) target(r *regionmap.Assignment, name string) error {
	switch {
	case name == r.Primary:
		return fmt.Errorf("%s is the region's primary already", name)
	case !slices.Contains(r.Backups, name):
		return fmt.Errorf("%s is not a backup of region %d (backups %v, joining %v)", name, r.ID, r.Backups, r.Joining)
	case v.dead(name):
		return fmt.Errorf("%s is not live", name)
	case v.Requests.Drained[name]:
		return fmt.Errorf("%s is drained", name)
	case v.Unhealthy[name]:
		return fmt.Errorf("%s reported its volume unhealthy", name)
	case !v.mayHold(name) || v.Dropped[Join{r.ID, r.Epoch, name}]:
		return fmt.Errorf("%s may hold no new role now (restarted or dropped)", name)
	}
	return nil
}

// expireMoves cancels the moves of m whose primary did not release within
// Timing.MoveTimeout of the master first seeing them: the primary (live:
// a dead one is failed over by heal) serves again at a new epoch.
func expireMoves(v *plan, m *regionmap.Map) bool {
	changed := false
	for i := range m.Regions {
		r := &m.Regions[i]
		if r.MoveTo == "" || v.releasedBy(r) || v.Timing.MoveTimeout <= 0 || v.dead(r.Primary) {
			continue // a dead primary's region is heal's (a failover)
		}
		since, ok := v.Moving[Join{r.ID, r.Epoch, r.MoveTo}]
		if !ok {
			since = v.TermStart
		}
		if v.Now.Sub(since) >= v.Timing.MoveTimeout {
			r.MoveTo, r.Released = "", false
			r.Epoch++
			changed = true
		}
	}
	return changed
}

// startMoves starts moves in regions of m that are settled (none changed
// by this decision, in old, no move in flight, no backup joining) and
// hold enough backups: the old primary rejoins as a joining backup, so a
// move leaves the region len(Backups) complete copies until it is
// seeded again, and it never starts with fewer than the map's
// min_copies (it would refuse writes). Operators' requests first, then
// primaries of drained servers (a group too small for a move first gets
// an extra joining backup), then, if the map changed in nothing else, one
// move of the balancer (Balance or a Rebalance request). It returns
// whether it started any, and whether the balancer found the primaries
// spread as evenly as the groups allow.
func startMoves(v *plan, old, m *regionmap.Map, changedElse bool) (started, balanced bool) {
	settled := func(r *regionmap.Assignment) bool {
		o := old.Region(r.ID)
		if o == nil || o.Epoch != r.Epoch || r.MoveTo != "" || o.MoveTo != "" || len(r.Joining) > 0 || !v.mayHoldPrimary(r.Primary) {
			return false
		}
		for _, b := range r.Group() { // a drop waits for its group change
			if v.Dropped[Join{r.ID, r.Epoch, b}] || v.dead(b) {
				return false
			}
		}
		return true
	}
	for i := range m.Regions {
		r := &m.Regions[i]
		if t, ok := v.Requests.Moves[r.ID]; ok && settled(r) && len(r.Backups) >= m.Copies() && v.target(r, t) == nil {
			r.MoveTo = t
			started = true
		}
	}
	load := primaries(m)
	for i := range m.Regions {
		r := &m.Regions[i]
		if !v.Requests.Drained[r.Primary] || !settled(r) {
			continue
		}
		if len(r.Backups) < m.Copies() {
			// An extra copy first: the region must keep min_copies
			// complete copies through the move (trim leaves it be).
			if xs := spares(v, r); len(xs) > 0 {
				load := roleLoad(m)
				x := slices.MinFunc(xs, func(a, b string) int {
					if load[a] != load[b] {
						return load[a] - load[b]
					}
					return strings.Compare(a, b)
				})
				r.Joining = append(r.Joining, x)
				r.Epoch++
				started = true
			}
			continue
		}
		if t := v.leastLoaded(r, r.Backups, load); t != "" {
			r.MoveTo = t
			load[r.Primary]--
			load[t]++
			started = true
		}
	}
	if !v.Balance && !v.Requests.Rebalance {
		return started, true
	}
	if started || changedElse || slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool { return r.MoveTo != "" || v.dead(r.Primary) }) {
		return started, false
	}
	if slices.ContainsFunc(m.Regions, func(r regionmap.Assignment) bool {
		return len(r.Joining) > 0 || len(r.Backups) > m.Replicas-1
	}) {
		return false, false // a group still changing (a role handed over joins, or is trimmed)
	}
	if r, t := balanceMove(v, m); r != nil && len(r.Backups) >= m.Copies() {
		r.MoveTo = t
		return true, false
	}
	if r, t := balanceRoles(v, m); r != nil {
		r.Joining = append(r.Joining, t)
		r.Epoch++
		return true, false
	}
	return false, true
}

// mayHoldPrimary reports whether a region whose primary is name may start
// a move: its primary is live and its run the map's.
func (v *plan) mayHoldPrimary(name string) bool {
	_, live := v.Live[name]
	return live && !v.restarted[name]
}

// primaries counts the regions each server of m is primary of.
func primaries(m *regionmap.Map) map[string]int {
	load := map[string]int{}
	for _, r := range m.Regions {
		load[r.Primary]++
	}
	return load
}

// leastLoaded returns the server of names that may take r's primary role
// with the fewest primaries in load (then by name), or "".
func (v *plan) leastLoaded(r *regionmap.Assignment, names []string, load map[string]int) string {
	var cands []string
	for _, n := range names {
		if v.target(r, n) == nil {
			cands = append(cands, n)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if load[cands[i]] != load[cands[j]] {
			return load[cands[i]] < load[cands[j]]
		}
		return cands[i] < cands[j]
	})
	if len(cands) == 0 {
		return ""
	}
	return cands[0]
}

// byLoad lists the live servers that may hold roles, the least loaded
// first (then by name).
func (v *plan) byLoad(load map[string]int) []string {
	var servers []string
	for name := range v.Live {
		if v.mayHold(name) {
			servers = append(servers, name)
		}
	}
	sort.Slice(servers, func(i, j int) bool {
		if load[servers[i]] != load[servers[j]] {
			return load[servers[i]] < load[servers[j]]
		}
		return servers[i] < servers[j]
	})
	return servers
}

// balanceMove is the balancer's policy: among the servers that may hold
// roles, a server with at least two primaries more than another moves one
// of its regions (the lowest id that can) to a backup of it with at least
// two fewer (the least loaded, then by name). Moving only across a gap of
// two is the hysteresis: every move narrows the spread, and no move is
// undone by the next. nil: no such move (the primaries are as even as
// the groups allow).
func balanceMove(v *plan, m *regionmap.Map) (*regionmap.Assignment, string) {
	load := primaries(m)
	servers := v.byLoad(load)
	slices.Reverse(servers) // the most loaded first
	for _, src := range servers {
		for i := range m.Regions {
			r := &m.Regions[i]
			if r.Primary != src {
				continue
			}
			var under []string
			for _, b := range r.Backups {
				if load[b] <= load[src]-2 {
					under = append(under, b)
				}
			}
			if t := v.leastLoaded(r, under, load); t != "" {
				return r, t
			}
		}
	}
	return nil, ""
}

// spares lists the live servers outside r's group that may hold roles.
func spares(v *plan, r *regionmap.Assignment) []string {
	var out []string
	for name := range v.Live {
		if name != r.Primary && !slices.Contains(r.Group(), name) && v.mayHold(name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// roleLoad counts the roles (primary, backup, joining) each server holds
// in m.
func roleLoad(m *regionmap.Map) map[string]int {
	load := map[string]int{}
	for _, r := range m.Regions {
		load[r.Primary]++
		for _, b := range r.Group() {
			load[b]++
		}
	}
	return load
}

// balanceRoles is the balancer's policy for backup roles, so that a new
// server, or one that returned to full groups, gets copies (and then
// primaries): among the servers that may hold roles, one with at least
// two roles fewer than another joins a group that other backs up (the
// least loaded server, the lowest region id); trim takes the most loaded
// backup out of the group once it joined. nil: none.
func balanceRoles(v *plan, m *regionmap.Map) (*regionmap.Assignment, string) {
	load := roleLoad(m)
	servers := v.byLoad(load)
	if len(servers) < 2 {
		return nil, ""
	}
	low := servers[0]
	for i := len(servers) - 1; i > 0 && load[servers[i]] >= load[low]+2; i-- {
		high := servers[i]
		for j := range m.Regions {
			r := &m.Regions[j]
			if slices.Contains(r.Backups, high) && r.Primary != low && !slices.Contains(r.Group(), low) {
				return r, low
			}
		}
	}
	return nil, ""
}

// trim takes a backup out of a group with more than Replicas-1 backups,
// all joined (a role the balancer handed over): the one on the server
// holding the most roles (then the last by name). The group keeps
// Replicas-1 backups in sync: no copy is lost.
func trim(v *plan, m *regionmap.Map, r *regionmap.Assignment) bool {
	if r.MoveTo != "" || len(r.Joining) > 0 || len(r.Backups) <= m.Replicas-1 || v.dead(r.Primary) || v.Requests.Drained[r.Primary] {
		return false
	}
	load := roleLoad(m)
	worst := -1
	for i, b := range r.Backups {
		if worst < 0 || load[b] > load[r.Backups[worst]] || load[b] == load[r.Backups[worst]] && b > r.Backups[worst] {
			worst = i
		}
	}
	r.Backups = slices.Delete(slices.Clone(r.Backups), worst, worst+1)
	r.Epoch++
	return true
}

// moveOutcomes lists the operators' move requests next settles: done
// (the target is primary) or given up (no such region, or a target that
// cannot take the role).
func moveOutcomes(v *plan, next *regionmap.Map) []MoveOutcome {
	var out []MoveOutcome
	ids := make([]uint64, 0, len(v.Requests.Moves))
	for id := range v.Requests.Moves {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := v.Requests.Moves[id]
		r := next.Region(id)
		switch {
		case r == nil:
			out = append(out, MoveOutcome{Region: id, Target: t, Err: fmt.Errorf("no region %d", id)})
		case r.Primary == t && r.MoveTo == "":
			out = append(out, MoveOutcome{Region: id, Target: t})
		case r.MoveTo == t:
		case len(r.Backups)+len(r.Joining) < next.Copies():
			out = append(out, MoveOutcome{Region: id, Target: t, Err: fmt.Errorf(
				"region %d: %d backups; a move would leave fewer complete copies than min_copies %d while its old primary is seeded again",
				id, len(r.Backups), next.Copies())})
		default:
			if err := v.target(r, t); err != nil {
				out = append(out, MoveOutcome{Region: id, Target: t, Err: err})
			}
		}
	}
	return out
}

// drainBackups takes drained servers out of r's group once the group
// holds Replicas-1 backups without them (grow adds their replacements as
// joining backups first): a drained joining backup goes at once. A
// drained primary's region is moved by startMoves.
func drainBackups(v *plan, m *regionmap.Map, r *regionmap.Assignment) bool {
	if r.MoveTo != "" || len(v.Requests.Drained) == 0 {
		return false
	}
	drained := func(n string) bool { return v.Requests.Drained[n] }
	j := slices.DeleteFunc(slices.Clone(r.Joining), drained)
	b := slices.Clone(r.Backups)
	if kept := slices.DeleteFunc(slices.Clone(b), drained); len(kept) >= m.Replicas-1 {
		b = kept
	}
	if len(b) == len(r.Backups) && len(j) == len(r.Joining) {
		return false
	}
	r.Backups, r.Joining = b, j
	r.Epoch++
	return true
}
