package region

import (
	"maps"
	"slices"

	"github.com/tebis-go/tebis/replication"
)

// regionState is everything this server holds of one region: its role and
// that role's data. The request path reads the published routing
// (server.go) instead, which install derives from these roles.
//
// Server.regions holds one per region the server has held since it
// started; entries are never removed (a region's pointer stays valid), so
// the map grows only with the regions maps assigned to this server, never
// with what peers send. The map and every field not marked otherwise are
// under Server.replMu; role is written with mapMu and replMu both held
// (either one suffices to read it).
type regionState struct {
	id   uint64
	role role

	// roleBackup:
	//
	// backup is the open replica and its buffer (nil unless roleBackup).
	// reported is the region epoch at which this backup reported its log
	// position after its primary failed (logpos.go; 0: none).
	backup   *backupRegion
	reported uint64

	// released is the region epoch at which this server reported it
	// released the region for a move (logpos.go; 0: none).
	released uint64

	// rolePrimary (kept across a depose until the next primaryship
	// replaces them):
	//
	// stream is the attached replication (nil: none attached, or serving
	// alone with no stream ever attached). promoted: promoted in this
	// process, its backups not rebased yet (the next attach rebases them,
	// once). buildLog: the Build-Index log identity of this primaryship
	// (id 0: none drawn). retiring is closed once the retire of an old
	// stream, running in an attach, is over (nil: none running).
	// members are what it holds of its group's backups, by name: the
	// joining ones' pre-seeds, which ones an attach brought in sync.
	stream   *primaryRepl
	promoted bool
	buildLog buildLog
	retiring chan struct{}
	members  map[string]*member

	// Under mapMu (the controller's): resumed: the hosted handle's
	// background work runs (it was attached or served); job: its attach
	// in flight (attach.go), nil: none.
	resumed bool
	job     *attachJob
}

// member is what a primary holds of one backup of its region's group.
type member struct {
	// seeding: a pre-seed of the joining backup runs (preseed.go);
	// seeded: its result, until an attach uses it.
	seeding bool
	seeded  *replication.Preseeded
	// failedAt is the region epoch at which its pre-seed failed (reported
	// dropped until the map moves on; 0: none); syncedAt the epoch at
	// which an attach brought it in sync (0: none).
	failedAt uint64
	syncedAt uint64
}

// regionLocked returns region id's state, creating it. Called with replMu
// held, for a region a map assigned to this server.
func (s *Server) regionLocked(id uint64) *regionState {
	rs := s.regions[id]
	if rs == nil {
		if s.regions == nil {
			s.regions = map[uint64]*regionState{}
		}
		rs = &regionState{id: id}
		s.regions[id] = rs
	}
	return rs
}

// region is regionLocked for a caller without replMu.
func (s *Server) region(id uint64) *regionState {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	return s.regionLocked(id)
}

// backupOf returns the replica of region id this server backs up, or nil.
// It takes replMu.
func (s *Server) backupOf(id uint64) *backupRegion {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	if rs := s.regions[id]; rs != nil {
		return rs.backup
	}
	return nil
}

// streamOf returns region id's attached stream, or nil. It takes replMu.
func (s *Server) streamOf(id uint64) *primaryRepl {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	if rs := s.regions[id]; rs != nil {
		return rs.stream
	}
	return nil
}

// sortedRegions returns the region states, by id. Called with replMu
// held.
func (s *Server) sortedRegions() []*regionState {
	out := make([]*regionState, 0, len(s.regions))
	for _, id := range slices.Sorted(maps.Keys(s.regions)) {
		out = append(out, s.regions[id])
	}
	return out
}

// streams returns the attached streams, by region. It takes replMu.
func (s *Server) streams() map[uint64]*primaryRepl {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	out := map[uint64]*primaryRepl{}
	for id, rs := range s.regions {
		if rs.stream != nil {
			out[id] = rs.stream
		}
	}
	return out
}

// jobs returns the attaches in flight. Called with mapMu held; it takes
// replMu.
func (s *Server) jobs() []*attachJob {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	var out []*attachJob
	for _, rs := range s.sortedRegions() {
		if rs.job != nil {
			out = append(out, rs.job)
		}
	}
	return out
}

// memberLocked returns rs's record of backup name, creating it.
// Called with replMu held.
func (rs *regionState) memberLocked(name string) *member {
	j := rs.members[name]
	if j == nil {
		if rs.members == nil {
			rs.members = map[string]*member{}
		}
		j = &member{}
		rs.members[name] = j
	}
	return j
}

// setRoles sets the role of regions ids. Called with mapMu held; it
// takes replMu.
func (s *Server) setRoles(ids []uint64, r role) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	for _, id := range ids {
		s.regionLocked(id).role = r
	}
}
