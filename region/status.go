package region

import (
	"slices"
	"time"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
)

// Status is the server's own view of itself, served as /status.json and
// rendered as its status page (/): what the map gives it, what it serves,
// and each hosted region's engine state. Fields are added, never renamed
// (the master's status page reads it).
type Status struct {
	Name string `json:"name"`
	// Run is the registered run (managed servers; 0: not registered).
	Run        int64  `json:"run,omitempty"`
	MapVersion uint64 `json:"map_version"`
	// Health is "ok", or the volume's state ("no-space", "failed").
	Health      string `json:"health"`
	HealthError string `json:"health_error,omitempty"`
	// Unready lists why /readyz fails (empty: ready).
	Unready []string `json:"unready,omitempty"`
	// L0Capacity is the configured L0 capacity, in pairs.
	L0Capacity int `json:"l0_capacity"`
	// Compactions, LevelMoves, LogSeals, SegmentsUsed and SegmentsFree
	// are the volume's (engine.Stats).
	Compactions  uint64         `json:"compactions"`
	LevelMoves   uint64         `json:"level_moves"`
	LogSeals     uint64         `json:"log_seals"`
	SegmentsUsed int64          `json:"segments_used"`
	SegmentsFree int64          `json:"segments_free"`
	Regions      []RegionStatus `json:"regions"`
}

// RegionStatus is one region of the map this server has a role in, or
// hosts.
type RegionStatus struct {
	ID    uint64 `json:"id"`
	Start string `json:"start"`
	End   string `json:"end"`
	Epoch uint64 `json:"epoch"`
	// Role is what the installed map names this server: "primary",
	// "backup", "joining", or "none" (hosted, no role in the map).
	Role string `json:"role"`
	// Serving is how a primary's requests are answered: "served",
	// "attaching" (waiting for its backups), "withdrawn" (handed over),
	// "incomplete" (its copy here is not complete), or "" (not primary).
	Serving string `json:"serving,omitempty"`
	// OpsPerSec is the rate of requests served (primary).
	OpsPerSec float64 `json:"ops_per_sec"`
	// Backups is, for a primary with an attached stream, each live
	// backup's replication lag (replication.BackupStats; absent: dropped
	// from the stream).
	Backups map[string]BackupLag `json:"backups,omitempty"`
	// Complete is, for a backup, whether its copy holds every write its
	// primary acknowledged (promotable).
	Complete *bool `json:"complete,omitempty"`
	// Hosted: the volume has the region (as primary or copy); the engine
	// fields below are set only then.
	Hosted      bool          `json:"hosted"`
	L0Pairs     int           `json:"l0_pairs"`
	Levels      []LevelStatus `json:"levels,omitempty"`
	LogSegments int           `json:"log_segments"`
}

// LevelStatus is one on-device level of a region.
type LevelStatus struct {
	Level    int   `json:"level"`
	Pairs    int64 `json:"pairs"`
	Bytes    int64 `json:"bytes"`
	Segments int   `json:"segments"`
}

// hostedRegion is what Status reads of a hosted region's engine.
type hostedRegion interface {
	Stats() engine.RegionStats
}

// Status returns the server's status now.
func (s *Server) Status() Status {
	st := s.state.Load()
	if st == nil { // a standalone server loading its map
		st = newRouting(&regionmap.Map{}, nil)
	}
	es := s.vol.Stats()
	out := Status{Name: s.cfg.Name, MapVersion: st.m.Version, Health: "ok", Unready: s.unready(), L0Capacity: s.cfg.L0Pairs,
		Compactions: es.Compactions, LevelMoves: es.LevelMoves, LogSeals: es.LogSeals, SegmentsUsed: es.SegmentsUsed, SegmentsFree: es.SegmentsFree}
	if s.joined.Load() { // s.cluster is set, and read, only after it joined
		out.Run = s.cluster.started.Load()
	}
	if h := s.health.cur.Load(); h != nil {
		out.Health, out.HealthError = h.state, h.err.Error()
	}
	copies := map[uint64]bool{}
	for _, c := range s.Stats().Copies {
		copies[c.Region] = c.Complete
	}
	streams := s.streams()
	now := time.Now()
	seen := map[uint64]bool{}
	for _, r := range st.m.Regions {
		rs := RegionStatus{ID: r.ID, Start: r.Start, End: r.End, Epoch: r.Epoch, Role: "none"}
		switch {
		case r.Primary == s.cfg.Name:
			rs.Role = "primary"
		case slices.Contains(r.Backups, s.cfg.Name):
			rs.Role = "backup"
		case slices.Contains(r.Joining, s.cfg.Name):
			rs.Role = "joining"
		}
		seen[r.ID] = true
		s.fillRegion(&rs, st.routes[r.ID].how, streams[r.ID], copies, now)
		if rs.Role == "none" && !rs.Hosted {
			continue
		}
		out.Regions = append(out.Regions, rs)
	}
	for _, r := range s.vol.Regions() { // hosted, not in the map
		if d := r.Desc(); !seen[d.ID] {
			rs := RegionStatus{ID: d.ID, Start: string(d.Start), End: string(d.End), Role: "none"}
			s.fillRegion(&rs, 0, nil, copies, now)
			out.Regions = append(out.Regions, rs)
		}
	}
	return out
}

// BackupLag is how far a backup is behind its primary: log bytes the
// primary appended that its WRITEs have not completed at the backup, and
// commands queued for it not completed yet (replication.BackupStats).
type BackupLag struct {
	Bytes    int64 `json:"lag_bytes"`
	Commands int   `json:"commands_pending"`
}

// fillRegion adds to rs what the server's routing, replication and engine
// hold of it.
func (s *Server) fillRegion(rs *RegionStatus, how routeState, p *primaryRepl, copies map[uint64]bool, now time.Time) {
	switch how {
	case routeServed:
		rs.Serving = "served"
	case routeAttaching:
		rs.Serving = "attaching"
	case routeWithdrawn:
		rs.Serving = "withdrawn"
	case routeIncomplete:
		rs.Serving = "incomplete"
	}
	if rs.Role == "primary" {
		rs.OpsPerSec = s.ops.rate(rs.ID, now)
	}
	if p != nil && p.shipper != nil {
		rs.Backups = map[string]BackupLag{}
		for _, b := range p.shipper.Backups() {
			if b.Live {
				rs.Backups[b.Name] = BackupLag{Bytes: b.LagBytes, Commands: b.CommandsPending}
			}
		}
	}
	if c, ok := copies[rs.ID]; ok {
		rs.Complete = &c
	}
	var h hostedRegion
	if r, ok := s.vol.Region(rs.ID); ok {
		h = r
	} else if b, ok := s.vol.Backup(rs.ID); ok {
		h = b
	}
	if h == nil {
		return
	}
	es := h.Stats()
	rs.Hosted, rs.L0Pairs, rs.LogSegments = true, es.L0Pairs, es.LogSegments
	for _, l := range es.Levels {
		if l.Segments > 0 {
			rs.Levels = append(rs.Levels, LevelStatus{Level: l.Level, Pairs: l.Pairs, Bytes: l.KVBytes, Segments: l.Segments})
		}
	}
}
