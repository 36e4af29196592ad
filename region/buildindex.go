package region

import (
	"math/rand/v2"

	"github.com/tebis-go/tebis/replication"
)

// Build-Index log identities. A Build-Index backup names what it applied
// by a point of its primary's log, and the log by an identity the primary
// draws each time it becomes a region's primary (opened, or promoted) and
// keeps while it stays primary (re-attaches after group changes continue
// the same log). A promoted primary also keeps its handover (the old
// primary's records it replayed) for the backups that applied less.

// buildLog is one primaryship's identity (0: none drawn) and handover.
type buildLog struct {
	id       uint64
	handover *replication.Handover
}

// startBuildLog draws a new log identity for region id, whose primary
// this server just became (ho: its promotion's handover, or nil).
func (s *Server) startBuildLog(id uint64, ho *replication.Handover) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	var l uint64
	for l == 0 {
		l = rand.Uint64()
	}
	s.regionLocked(id).buildLog = buildLog{id: l, handover: ho}
}

// buildLogOf returns region id's log identity and handover, drawing an
// identity if none was (a region hosted since before any was needed).
func (s *Server) buildLogOf(id uint64) (uint64, *replication.Handover) {
	s.replMu.Lock()
	l := s.regionLocked(id).buildLog
	s.replMu.Unlock()
	if l.id == 0 {
		s.startBuildLog(id, nil)
		return s.buildLogOf(id)
	}
	return l.id, l.handover
}
