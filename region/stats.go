package region

import (
	"encoding/json"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/region/wire"
)

// ServerStats is what a TypeStats request returns (JSON): the volume's
// counters and what this server's primaries sent to their backups.
type ServerStats struct {
	Name    string       `json:"name"`
	Engine  engine.Stats `json:"engine"`
	ReplNet uint64       `json:"replication_net_bytes"` // mirror WRITEs + commands, every backup counted
	Dropped []string     `json:"dropped_backups,omitempty"`
}

// Stats returns the server's counters.
func (s *Server) Stats() ServerStats {
	st := ServerStats{Name: s.cfg.Name, Engine: s.vol.Stats()}
	s.replMu.Lock()
	defer s.replMu.Unlock()
	for id, p := range s.primaries {
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
