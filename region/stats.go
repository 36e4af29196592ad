package region

import (
	"encoding/json"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma/ring"
)

// ServerStats is what a TypeStats request returns (JSON): the volume's
// counters and what this server's primaries sent to their backups.
type ServerStats struct {
	Name    string       `json:"name"`
	Engine  engine.Stats `json:"engine"`
	ReplNet uint64       `json:"replication_net_bytes"` // mirror WRITEs + commands, every backup counted
	Dropped []string     `json:"dropped_backups,omitempty"`
	Copies  []CopyStats  `json:"copies,omitempty"`
	// Health is the volume's: "ok", or "no-space" or "failed" while it
	// cannot store writes (health.go), with the disk's error and since
	// when (RFC 3339).
	Health      string `json:"health"`
	HealthError string `json:"health_error,omitempty"`
	HealthSince string `json:"health_since,omitempty"`
}

// CopyStats is a region this server backs up: the newest epoch its
// replica accepted, and whether its copy is complete (it holds every write
// its primary acknowledged: promotable; replication.Replica.Complete).
type CopyStats struct {
	Region   uint64 `json:"region"`
	Epoch    uint64 `json:"epoch"`
	Complete bool   `json:"complete"`
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	st := ServerStats{Name: s.cfg.Name, Engine: s.vol.Stats(), Health: "ok"}
	if h := s.health.cur.Load(); h != nil {
		st.Health, st.HealthError, st.HealthSince = h.state, h.err.Error(), h.since.UTC().Format(time.RFC3339Nano)
	}
	backups := map[uint64]*backupRegion{}
	s.replMu.Lock()
	for id, rs := range s.regions {
		if rs.backup != nil {
			backups[id] = rs.backup
		}
	}
	s.replMu.Unlock()
	// A replica's lock may be held through a command's disk I/O: not
	// under replMu, which every other region's commands take.
	for id, b := range backups {
		st.Copies = append(st.Copies, CopyStats{Region: id, Epoch: b.rep.Epoch(), Complete: b.rep.Complete()})
	}
	for id, p := range s.streams() {
		if p.shipper == nil {
			continue
		}
		st.ReplNet += p.shipper.NetBytes()
		for b := range p.shipper.Dropped() {
			st.Dropped = append(st.Dropped, b+" (region "+itoa(id)+")")
		}
	}
	return st
}

func itoa(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (s *Server) handleStats(*ring.ServerRequest) ring.Reply {
	b, err := json.Marshal(s.Stats())
	if err != nil {
		return errorReply(wire.StatusInternal, "%v", err)
	}
	return ring.Reply{Payload: b}
}
