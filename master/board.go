package master

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
)

// historyLen bounds the map versions and failovers a master remembers for
// its status page.
const historyLen = 20

// MapChange is a region map this master published: its version, when,
// and what changed from the one before (Changes).
type MapChange struct {
	Version uint64
	At      time.Time
	Changes []string
}

// Failover is a region's primary replaced by this master: the failed
// primary, the promoted backup, the new epoch, when it was published and
// how long after the failed primary was seen gone (or after this master's
// term began, when it never saw it go).
type Failover struct {
	Region   uint64
	From, To string
	Epoch    uint64
	At       time.Time
	Took     time.Duration
	// Moved: a planned move of a live primary (the old map's MoveTo),
	// not a failure.
	Moved bool
	// Gone is when the master saw the old primary's registration end or
	// change (zero: it did not, as for a primary failed over for its
	// disk, or moved).
	Gone time.Time
}

// board is what a master shows of itself and of the cluster (http.go):
// what its watches observed while it leads, and its recent decisions.
// Its methods are safe for concurrent use and never block on anything but
// its own lock.
type board struct {
	mu        sync.Mutex
	leading   bool
	since     time.Time // when the current role began
	validated bool      // leading, its last read of the map was valid
	mapErr    string    // leading: why its last read of the map failed
	m         *regionmap.Map
	live      map[string]coord.ServerInfo
	health    map[string]coord.Health
	dropped   map[Join]bool
	joins     map[Join]bool
	maps      []MapChange // newest first
	failovers []Failover  // newest first
}

// snapshot is a consistent copy of a board.
type snapshot struct {
	Leading   bool
	Since     time.Time
	Validated bool
	MapErr    string
	Map       *regionmap.Map
	Live      map[string]coord.ServerInfo
	Health    map[string]coord.Health
	Dropped   map[Join]bool
	Joins     map[Join]bool
	Maps      []MapChange
	Failovers []Failover
}

func (b *board) snapshot() snapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return snapshot{Leading: b.leading, Since: b.since, Validated: b.validated, MapErr: b.mapErr, Map: b.m,
		Live: maps.Clone(b.live), Health: maps.Clone(b.health), Dropped: maps.Clone(b.dropped), Joins: maps.Clone(b.joins),
		Maps: slices.Clone(b.maps), Failovers: slices.Clone(b.failovers)}
}

// lead records the start (on) or end of a term at now; a term's
// observations start empty.
func (b *board) lead(on bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.leading, b.since, b.validated, b.mapErr = on, now, false, ""
	b.live, b.health, b.dropped, b.joins = nil, nil, nil, nil
}

func (b *board) setLive(live map[string]coord.ServerInfo) {
	b.mu.Lock()
	b.live = maps.Clone(live)
	b.mu.Unlock()
}

func (b *board) setHealth(h map[string]coord.Health) {
	b.mu.Lock()
	b.health = maps.Clone(h)
	b.mu.Unlock()
}

func (b *board) setReports(dropped, joins map[Join]bool) {
	b.mu.Lock()
	b.dropped, b.joins = maps.Clone(dropped), maps.Clone(joins)
	b.mu.Unlock()
}

func (b *board) setMap(m *regionmap.Map) {
	b.mu.Lock()
	if b.m == nil || m.Version >= b.m.Version {
		b.m = m
	}
	b.mu.Unlock()
}

// decided records a decision's outcome: err nil, the map read was valid.
// A leader is ready while its last read of the map was valid: one that
// can no longer read it (ZooKeeper unreachable, the map corrupt) decides
// nothing.
func (b *board) decided(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.validated, b.mapErr = err == nil, ""
	if err != nil {
		b.mapErr = err.Error()
	}
}

// published records the publication of next after old at now, with the
// failovers it made.
func (b *board) published(old, next *regionmap.Map, now time.Time, fos []Failover) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.maps = prepend(b.maps, MapChange{Version: next.Version, At: now, Changes: changes(old, next)})
	for _, f := range fos {
		b.failovers = prepend(b.failovers, f)
	}
	if b.m == nil || next.Version >= b.m.Version {
		b.m = next
	}
}

// prepend adds v before s, keeping at most historyLen entries.
func prepend[T any](s []T, v T) []T {
	s = append([]T{v}, s...)
	if len(s) > historyLen {
		s = s[:historyLen]
	}
	return s
}

// failovers lists the regions whose primary next replaced with another
// server than old's: failed over, or moved (old's MoveTo). Took is timed
// from when the failed primary was observed gone (obs; termStart if
// never or earlier), Gone is that observation if it is not after now.
func failovers(old, next *regionmap.Map, obs map[string]Observed, termStart, now time.Time) []Failover {
	var out []Failover
	for _, r := range next.Regions {
		o := old.Region(r.ID)
		if o == nil || o.Primary == "" || o.Primary == r.Primary {
			continue
		}
		f := Failover{Region: r.ID, From: o.Primary, To: r.Primary, Epoch: r.Epoch, At: now, Moved: o.MoveTo != ""}
		gone := obs[o.Primary].Gone
		if !gone.IsZero() && !gone.After(now) && !f.Moved {
			f.Gone = gone
		}
		from := gone
		if from.IsZero() || from.Before(termStart) || from.After(now) {
			from = termStart
		}
		f.Took = now.Sub(from)
		out = append(out, f)
	}
	return out
}

// changes describes, one line each, what next changed from old: servers
// added, removed or restarted, and each region's new primary, backups,
// joining backups and epoch.
func changes(old, next *regionmap.Map) []string {
	var out []string
	for _, s := range next.Servers {
		o, ok := old.Server(s.Name)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("server %s added", s.Name))
		case o.Started != s.Started:
			out = append(out, fmt.Sprintf("server %s: new run %d", s.Name, s.Started))
		case o != s:
			out = append(out, fmt.Sprintf("server %s: new addresses", s.Name))
		}
	}
	for _, s := range old.Servers {
		if _, ok := next.Server(s.Name); !ok {
			out = append(out, fmt.Sprintf("server %s removed", s.Name))
		}
	}
	for _, r := range next.Regions {
		o := old.Region(r.ID)
		if o == nil {
			out = append(out, fmt.Sprintf("region %d added: primary %s, epoch %d", r.ID, r.Primary, r.Epoch))
			continue
		}
		var what []string
		if o.Primary != r.Primary {
			what = append(what, fmt.Sprintf("primary %s → %s", o.Primary, r.Primary))
		}
		if !slices.Equal(o.Backups, r.Backups) {
			what = append(what, fmt.Sprintf("backups %v → %v", o.Backups, r.Backups))
		}
		if !slices.Equal(o.Joining, r.Joining) {
			what = append(what, fmt.Sprintf("joining %v → %v", o.Joining, r.Joining))
		}
		if o.Epoch != r.Epoch {
			what = append(what, fmt.Sprintf("epoch %d → %d", o.Epoch, r.Epoch))
		}
		if len(what) > 0 {
			out = append(out, fmt.Sprintf("region %d: %s", r.ID, strings.Join(what, ", ")))
		}
	}
	return out
}
