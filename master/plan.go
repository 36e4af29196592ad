package master

import (
	"slices"
	"sort"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// Join names a joining backup whose seeding its primary reported done at
// the region's epoch.
type Join struct {
	Region, Epoch uint64
	Server        string
}

// View is what the master observes at one decision; Next decides from it
// alone and does not modify it.
type View struct {
	Map  *regionmap.Map
	Live map[string]regionmap.Server // registered region servers by name
	// Now is the decision's time: the times of the View are compared
	// with it.
	Now time.Time
	// TermStart is when this master's term as leader began: what
	// Timing.Grace counts from for a server with no LastLive time, and
	// Timing.LogWait for a failed primary with no Gone time.
	TermStart time.Time
	// Servers is what this master observed of each server (across its
	// terms); a server without an entry was never observed.
	Servers map[string]Observed
	// Timing is how long decisions wait for what they wait on.
	Timing Timing
	Joins  map[Join]bool // joins reported done
	// Dropped are backups their primary dropped from its replication
	// stream at the region's epoch (a late WRITE or a failed command): the
	// primary serves no write until the map leaves them out.
	Dropped map[Join]bool
	// Logs are the log positions backups reported for a region's epoch
	// once its primary failed (higher: more of the primary's log).
	Logs map[Join]uint64
	// Incomplete are backups that reported, with their log position,
	// that their copy is not complete at the region's epoch (a seed, a
	// new primary's catch-up or a restart not finished): promoted, they
	// would lose acknowledged writes.
	Incomplete map[Join]bool
	// Lost are backups that reported losing the region's primary at its
	// epoch (coord.LostReport: its connections ended without a goodbye,
	// and they fenced it off); with their log positions (Logs) from every
	// live backup, the primary fails over while still registered.
	Lost map[Join]bool
	// Unhealthy are live servers whose volume cannot store writes (their
	// health znode names their registered run: a full or failing disk).
	// A server that was primary of a region stepped down before it
	// published that: it serves no region of its earlier run and
	// registered as a new run, which Next fails over as a restart's. One
	// that was primary of nothing published it for the run the map has:
	// its backup roles stay (until a command it cannot store has its
	// primary drop it). Either way it gets no new role, and a backup of
	// it is promoted only when no healthy backup holds a complete copy
	// (made primary so, it steps down then).
	Unhealthy map[string]bool
	// Released are the primaries that released a region the map moves
	// away from them (regionmap.Assignment.MoveTo) at its epoch, each
	// with when the master first saw the report.
	Released map[Join]time.Time
	// Moving is when the master first saw each move of the map (Server:
	// its target) at its region's epoch; a move it never saw counts from
	// TermStart.
	Moving map[Join]time.Time
	// Requests are the operators' requests: moves, drains, a rebalance.
	Requests coord.Requests
	// Balance has the master spread the primaries evenly by itself.
	Balance bool
}

// Observed is when the master observed events of one server; a zero time:
// never.
type Observed struct {
	// LastLive is when the server was last seen registered. A server of
	// the map not in View.Live is dead if it has a LastLive time, and
	// otherwise once Timing.Grace has passed since View.TermStart.
	LastLive time.Time
	// Gone is when the server's registration was last seen ending or
	// changing to a new run. A failed primary's promotion waits for its
	// live backups' log positions until Timing.LogWait has passed since
	// Gone (since View.TermStart without a Gone time).
	Gone time.Time
	// Dropped is when a primary last reported the server dropped from
	// its stream (each report timed when first seen). Until
	// Timing.DropHold has passed since Dropped, the server joins no group
	// unless its Gone time is later (it registered again since).
	Dropped time.Time
}

// Timing is the master's waiting policy.
type Timing struct {
	// Grace is how long after View.TermStart a server of the map that
	// was never seen live counts as alive.
	Grace time.Duration
	// LogWait bounds how long a failed primary's promotion waits, from
	// the primary's Observed.Gone, for its live backups' log positions
	// (0: it does not wait).
	LogWait time.Duration
	// DropHold is how long after Observed.Dropped a server joins no
	// group: a server dropped because it died is still registered until
	// its session expires, and adding it back at once would stall the
	// group's attach on a dead peer.
	DropHold time.Duration
	// MoveTimeout bounds how long a move waits for its primary's release
	// (from View.Moving) before it is cancelled (0: no bound).
	MoveTimeout time.Duration
}

// Decision is what Next decided.
type Decision struct {
	// Map is the map to publish after View.Map; nil: View.Map needs no
	// change.
	Map *regionmap.Map
	// Restarted are the live servers whose registered run differs from
	// View.Map's, sorted: the decision failed them over as dead servers;
	// they take roles again once the map names their new run.
	Restarted []string
	// Moves are the operators' move requests this decision settles
	// (done, or given up with the reason): the master deletes them.
	Moves []MoveOutcome
	// Rebalanced: View.Requests.Rebalance is done (the primaries are as
	// even as the groups allow).
	Rebalanced bool
	// Lost are the live primaries the decision failed over because
	// every live backup of the region reported losing them (Region and
	// Epoch: before the failover); the master holds them back from new
	// roles as it holds dropped servers (Observed.Dropped).
	Lost []Join
}

// plan is one decision's inputs: the View and the servers Next found
// restarted.
type plan struct {
	*View
	restarted map[string]bool
	lost      []Join // Decision.Lost
}

// dead reports whether the master treats server name as failed.
func (v *plan) dead(name string) bool {
	if v.restarted[name] {
		return true
	}
	if _, ok := v.Live[name]; ok {
		return false
	}
	if !v.Servers[name].LastLive.IsZero() {
		return true
	}
	return v.Now.Sub(v.TermStart) >= v.Timing.Grace
}

// Next returns the map the master should publish after v.Map, or nil when
// v.Map needs no change. Rules, per region (only when the map sets
// Replicas, except the first):
//   - servers' addresses follow their registrations; a server whose
//     registered run (Started) differs from the map's restarted: it is
//     failed over as if dead, and the map keeps its old run until no
//     region gives it a role it is being failed over from (so that it
//     cannot take one back while a failover waits for log positions; a
//     static map, which nothing heals, takes the new run at once);
//   - a dead primary is replaced by its live backup with the most complete
//     log (then the first in the map's order); the region's epoch grows;
//     with no live backup the region waits for its primary; until every
//     live backup reported its log position, or Timing.LogWait passed,
//     the region is left as it is;
//   - only a backup that reported its log position with a complete copy
//     is promoted; while no live backup did (after Timing.LogWait too: one that
//     never reports, or reported its copy incomplete), the region is left
//     as it is: it waits for a report or for its primary (unavailable
//     rather than without acknowledged writes);
//   - a primary's new run that keeps its regions (none of their backups
//     could be promoted) takes them at a new epoch;
//   - dead backups and joining backups, and those their live primary
//     reported dropped at the current epoch, leave the group (epoch
//     grows); a failed primary's drop reports do not count;
//   - a joining backup reported done at the current epoch becomes a backup;
//   - a group short of Replicas-1 gets live servers that hold the fewest
//     regions (then by name) as joining backups (epoch grows), except
//     servers reported dropped within Timing.DropHold (Observed.Dropped)
//     and unhealthy ones (a full or failing disk: Unhealthy);
//   - among the backups that may replace a failed primary, healthy ones
//     come first (an unhealthy one only when no healthy one reported a
//     complete copy).
//
// A server whose disk fails (docs/failover.md, "Full or failing disks")
// and is primary of a region steps down: it stops serving as primary,
// reports itself unhealthy and registers as a new run, so its regions are
// failed over by the restart rule above (to a backup with a complete
// copy, a healthy one first; the others are given back to its new run,
// which serves their reads). One that is primary of nothing only reports
// itself unhealthy: it keeps its backup roles. Neither is given a new
// role until it reports itself healthy again.
//
// The version grows by one whenever anything changed.
func Next(view View) Decision {
	v := &plan{View: &view, restarted: map[string]bool{}}
	m := v.Map.Clone()
	changed := false
	for name, srv := range v.Live {
		if old, ok := v.Map.Server(name); ok && old.Started != 0 && srv.Started != 0 && old.Started != srv.Started {
			// It restarted (perhaps within its session timeout, unseen by
			// the membership watch): its copies may lack what it
			// acknowledged before, so it is failed over like a dead one.
			v.restarted[name] = true
		}
	}
	balanced := true
	if m.Replicas > 0 {
		for i := range m.Regions {
			if heal(v, &m.Regions[i]) {
				changed = true
			}
		}
		if expireMoves(v, m) {
			changed = true
		}
		for i := range m.Regions {
			if grow(v, m, &m.Regions[i]) {
				changed = true
			}
			if drainBackups(v, m, &m.Regions[i]) {
				changed = true
			}
			if trim(v, m, &m.Regions[i]) {
				changed = true
			}
		}
		var started bool
		started, balanced = startMoves(v, v.Map, m, changed)
		changed = changed || started
	}
	for name, srv := range v.Live {
		if v.restarted[name] && m.Replicas > 0 && failingOver(v, m, name) {
			// The map keeps the old run until the server's roles are gone:
			// with its new run in the map it would take them back, its
			// copies perhaps lacking what it acknowledged.
			continue
		}
		i := slices.IndexFunc(m.Servers, func(s regionmap.Server) bool { return s.Name == name })
		srv.Name = name
		switch {
		case i < 0 && m.Replicas > 0:
			m.Servers = append(m.Servers, srv)
			changed = true
		case i >= 0 && m.Servers[i] != srv:
			if m.Servers[i].Started != srv.Started {
				// A new run keeps the regions it is primary of (none of
				// their backups could be promoted): a new epoch, so that
				// its backups report afresh if it fails again (their
				// reports of this failure describe copies its attach
				// replaces).
				for j := range m.Regions {
					if m.Regions[j].Primary == name {
						m.Regions[j].Epoch++
						m.Regions[j].MoveTo, m.Regions[j].Released = "", false
					}
				}
			}
			m.Servers[i] = srv
			changed = true
		}
	}
	sort.Slice(m.Servers, func(i, j int) bool { return m.Servers[i].Name < m.Servers[j].Name })
	d := Decision{Moves: moveOutcomes(v, m), Rebalanced: v.Requests.Rebalance && balanced, Lost: v.lost}
	for name := range v.restarted {
		d.Restarted = append(d.Restarted, name)
	}
	slices.Sort(d.Restarted)
	if changed {
		m.Version = v.Map.Version + 1
		d.Map = m
	}
	return d
}

// failingOver reports whether a region of m still gives server name a
// role it is being failed over from (a later decision removes it: a
// failover waiting for log positions). A primary without a live backup
// is not failed over, nor one whose live backups all reported an
// incomplete copy: the region waits for it, and it resumes with its new
// run.
func failingOver(v *plan, m *regionmap.Map, name string) bool {
	for _, r := range m.Regions {
		if r.Primary == name {
			if slices.ContainsFunc(r.Backups, func(b string) bool { return !v.dead(b) && !v.Incomplete[Join{r.ID, r.Epoch, b}] }) {
				return true
			}
			continue
		}
		if slices.Contains(r.Group(), name) {
			return true
		}
	}
	return false
}

// heal handles failures and finished joins in one region.
func heal(v *plan, r *regionmap.Assignment) bool {
	changed := false
	epoch := r.Epoch // the epoch backups report their log positions at
	// A failed primary's drop reports do not count: a backup dropped by a
	// primary that then died (or was paused past its session and resumed:
	// a backup that promised its copy to a failover refuses it) still
	// holds every write the primary acknowledged (a managed stream
	// acknowledges none after a drop until the map leaves the backup out),
	// and its own report says whether its copy is complete.
	lost := !v.dead(r.Primary) && v.lostBy(r)
	primaryDead := v.dead(r.Primary) || lost
	// A primary that released its region for a move is failed over like
	// a dead one, except that a region no backup can take returns to it.
	released := !primaryDead && v.releasedBy(r)
	gone := primaryDead || released
	alive := func(names []string) []string {
		var out []string
		for _, n := range names {
			if !v.dead(n) && (gone || !v.Dropped[Join{Region: r.ID, Epoch: r.Epoch, Server: n}]) {
				out = append(out, n)
			}
		}
		return out
	}
	if released && !r.Released {
		// Published first: the backups report their log positions only
		// from this map on (a report fences the copy against the epoch's
		// commands, which a primary not released yet still sends).
		r.Released = true
		return true
	}
	if gone && waitLogs(v, r, alive(r.Backups)) {
		return false
	}
	none := len(promotable(v, r, alive(r.Backups))) == 0
	if released {
		// A planned move promotes only a backup that may hold the role
		// (healthy, not drained): the old primary, which holds every
		// write, serves again rather.
		none = !slices.ContainsFunc(promotable(v, r, alive(r.Backups)), func(i int) bool { return v.mayHold(alive(r.Backups)[i]) })
	}
	if primaryDead && len(alive(r.Backups)) > 0 && none {
		return false // no live backup reported a complete copy: wait for one, or for the primary
	}
	if b, j := alive(r.Backups), alive(r.Joining); len(b) != len(r.Backups) || len(j) != len(r.Joining) {
		r.Backups, r.Joining = b, j
		r.Epoch++
		changed = true
	}
	if released && none && !changed {
		r.Epoch++ // no backup can take it: the move is cancelled, the primary serves again
		changed = true
	}
	cands := promotable(v, &regionmap.Assignment{ID: r.ID, Epoch: epoch}, r.Backups)
	if released {
		cands = slices.DeleteFunc(cands, func(i int) bool { return !v.mayHold(r.Backups[i]) })
	}
	if gone && len(cands) > 0 {
		prefer := func(keep func(string) bool) {
			if k := slices.DeleteFunc(slices.Clone(cands), func(i int) bool { return !keep(r.Backups[i]) }); len(k) > 0 {
				cands = k
			}
		}
		prefer(func(b string) bool { return !v.Unhealthy[b] }) // a full or failing disk could not take the region's writes
		prefer(func(b string) bool { return b == r.MoveTo })
		prefer(func(b string) bool { return !v.Requests.Drained[b] })
		best := cands[0]
		for _, i := range cands {
			if v.Logs[Join{r.ID, epoch, r.Backups[i]}] > v.Logs[Join{r.ID, epoch, r.Backups[best]}] {
				best = i
			}
		}
		old := r.Primary
		if lost {
			v.lost = append(v.lost, Join{r.ID, epoch, old})
		}
		r.Primary = r.Backups[best]
		r.Backups = slices.Delete(slices.Clone(r.Backups), best, best+1)
		if released && v.mayHold(old) {
			r.Joining = append(r.Joining, old) // moved, not failed: it stays in the group
		}
		if !changed {
			r.Epoch++
		}
		changed = true
	}
	if r.Epoch != epoch {
		r.MoveTo, r.Released = "", false // a move lives within one epoch
	}
	var still []string
	for _, j := range r.Joining {
		if v.Joins[Join{Region: r.ID, Epoch: r.Epoch, Server: j}] {
			r.Backups = append(r.Backups, j)
			changed = true
		} else {
			still = append(still, j)
		}
	}
	r.Joining = still
	return changed
}

// lostBy reports whether r's primary is lost to its backups: every live
// backup of r reported losing it (View.Lost) and its log position at r's
// epoch, and at least one a complete copy, while the primary has not
// released r for a move. A backup reports a loss once every connection
// of the primary ended without a goodbye (the process died, or the
// network cut it off), after it fenced the primary off (docs/failover.md,
// "Failure detection"): the primary can no longer acknowledge a write or
// confirm a read, and r fails over without waiting for its session to
// expire. With no complete copy among them the primary keeps r (its
// reports of their drops count).
func (v *plan) lostBy(r *regionmap.Assignment) bool {
	if r.Released || v.releasedBy(r) {
		return false
	}
	n, complete := 0, false
	for _, b := range r.Backups {
		if v.dead(b) {
			continue
		}
		j := Join{r.ID, r.Epoch, b}
		if _, ok := v.Logs[j]; !ok || !v.Lost[j] {
			return false
		}
		n++
		complete = complete || !v.Incomplete[j]
	}
	return n > 0 && complete
}

// promotable lists the indexes in backups of those that may replace r's
// primary: those that reported their log position at r's epoch with a
// complete copy. A backup that did not report (hung, its report lost, its
// seed perhaps unfinished) is not: its copy may lack acknowledged writes.
func promotable(v *plan, r *regionmap.Assignment, backups []string) []int {
	var out []int
	for i, b := range backups {
		j := Join{r.ID, r.Epoch, b}
		if _, reported := v.Logs[j]; reported && !v.Incomplete[j] {
			out = append(out, i)
		}
	}
	return out
}

// held reports whether server name is held back from joining groups: a
// primary dropped it within Timing.DropHold, and it has not registered
// again since.
func (v *plan) held(name string) bool {
	o := v.Servers[name]
	if o.Dropped.IsZero() || v.Now.Sub(o.Dropped) >= v.Timing.DropHold {
		return false
	}
	return !o.Gone.After(o.Dropped)
}

// waitLogs reports whether r's failover waits for log positions: a live
// backup has not reported one at r's epoch, and Timing.LogWait has not
// passed since its primary went.
func waitLogs(v *plan, r *regionmap.Assignment, backups []string) bool {
	since := v.Servers[r.Primary].Gone
	if at, ok := v.Released[Join{r.ID, r.Epoch, r.Primary}]; ok && !v.dead(r.Primary) {
		since = at
	}
	if since.IsZero() {
		since = v.TermStart
	}
	if v.Timing.LogWait <= 0 || v.Now.Sub(since) >= v.Timing.LogWait {
		return false
	}
	for _, b := range backups {
		if _, ok := v.Logs[Join{r.ID, r.Epoch, b}]; !ok {
			return true
		}
	}
	return false
}

// grow adds joining backups to a region short of replicas.
func grow(v *plan, m *regionmap.Map, r *regionmap.Assignment) bool {
	members := slices.DeleteFunc(r.Group(), func(n string) bool { return v.Requests.Drained[n] })
	want := m.Replicas - 1 - len(members)
	if want <= 0 || v.dead(r.Primary) || r.MoveTo != "" {
		return false
	}
	load := map[string]int{}
	for _, o := range m.Regions {
		load[o.Primary]++
		for _, b := range o.Group() {
			load[b]++
		}
	}
	in := map[string]bool{r.Primary: true}
	for _, b := range r.Group() {
		in[b] = true
	}
	var cands []string
	for name := range v.Live {
		if !in[name] && v.mayHold(name) {
			cands = append(cands, name)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		if load[cands[i]] != load[cands[j]] {
			return load[cands[i]] < load[cands[j]]
		}
		return cands[i] < cands[j]
	})
	if len(cands) == 0 {
		return false
	}
	if want > len(cands) {
		want = len(cands)
	}
	r.Joining = append(r.Joining, cands[:want]...)
	r.Epoch++
	return true
}
