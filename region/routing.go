package region

import (
	"maps"
	"slices"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/replication"
)

// routing is an immutable snapshot the request path reads: the map, and
// how this server answers each region it does not send away with
// WRONG_REGION. Install publishes a new one for each map (install.go);
// attaches, deposes and fences publish changed copies.
type routing struct {
	m      *regionmap.Map
	routes map[uint64]route
	byID   map[uint64]*regionmap.Assignment // m's regions by ID
}

// newRouting returns a routing for map m with routes (nil: none).
func newRouting(m *regionmap.Map, routes map[uint64]route) *routing {
	st := &routing{m: m, routes: routes, byID: make(map[uint64]*regionmap.Assignment, len(m.Regions))}
	for i := range m.Regions {
		st.byID[m.Regions[i].ID] = &m.Regions[i]
	}
	return st
}

// region returns m's assignment of region id, or nil.
func (st *routing) region(id uint64) *regionmap.Assignment { return st.byID[id] }

// route is how the request path answers one region's requests.
type route struct {
	er  *engine.Region // the primary's handle (routeServed, routeAttaching)
	how routeState
	// confirm is the stream a managed primary confirms its reads with
	// before answering them (routeServed with backups; nil: the region
	// serves alone, or the map is static): lease.go.
	confirm *replication.Shipper
}

// routeState is what a region's requests get.
type routeState uint8

const (
	// routeServed: hosted as primary, its replication attached (or it
	// serves alone): served.
	routeServed routeState = iota + 1
	// routeAttaching: hosted as primary, waiting for its stream:
	// StatusUnavailable until attached.
	routeAttaching
	// routeWithdrawn: being handed over (deposed, depose.go) until the
	// next map's routing is published: StatusUnavailable (a client on
	// the same map retries; WRONG_REGION at the same version would make
	// it give up).
	routeWithdrawn
	// routeIncomplete: the map names this server primary of a region
	// whose copy here is incomplete (install.go): StatusUnavailable.
	routeIncomplete
)

// hosted returns region id's handle if this server hosts it as primary
// (served or attaching), else nil.
func (st *routing) hosted(id uint64) *engine.Region {
	if r := st.routes[id]; r.how == routeServed || r.how == routeAttaching {
		return r.er
	}
	return nil
}

// attaching reports whether region id is hosted and waits for its stream.
func (st *routing) attaching(id uint64) bool { return st.routes[id].how == routeAttaching }

// hostedIDs lists the regions hosted as primary, in order.
func (st *routing) hostedIDs() []uint64 { return st.ids(routeServed, routeAttaching) }

// attachingIDs lists the hosted regions waiting for their streams, in
// order.
func (st *routing) attachingIDs() []uint64 { return st.ids(routeAttaching) }

func (st *routing) ids(how ...routeState) []uint64 {
	var out []uint64
	for _, id := range slices.Sorted(maps.Keys(st.routes)) {
		if slices.Contains(how, st.routes[id].how) {
			out = append(out, id)
		}
	}
	return out
}

// with returns a copy of st whose regions have the routes rs (a zero
// route: removed).
func (st *routing) with(rs map[uint64]route) *routing {
	next := &routing{m: st.m, routes: maps.Clone(st.routes), byID: st.byID}
	if next.routes == nil {
		next.routes = map[uint64]route{}
	}
	for id, r := range rs {
		if r.how == 0 {
			delete(next.routes, id)
		} else {
			next.routes[id] = r
		}
	}
	return next
}
