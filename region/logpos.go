package region

import (
	"context"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/internal/coord"
)

// reportLogs is a backup's part in choosing whom to promote: for every
// region it backs up (not joining) whose primary's registration is gone
// or belongs to a new run (the master fails such a primary over), it
// reports once per region epoch how much of the primary's log its buffer
// holds (replication.Replica.LogPosition) and whether its copy is complete
// (replication.Replica.Complete: not while a seed or a new primary's
// catch-up is unfinished); the master promotes the most complete of the
// complete copies. Called by the server list watch.
func (s *Server) reportLogs(live map[string]coord.ServerInfo) {
	c := s.cluster
	st := s.state.Load()
	if c == nil || st == nil || !c.knows(st.m, s.cfg.Name) {
		return
	}
	m := st.m
	var out []coord.Joined
	s.replMu.Lock()
	for key := range s.logsReported {
		if r := m.Region(key[0]); r == nil || r.Epoch > key[1] {
			delete(s.logsReported, key)
		}
	}
	for id, b := range s.backups {
		r := m.Region(id)
		if r == nil || !slices.Contains(r.Backups, s.cfg.Name) || s.logsReported[[2]uint64{id, r.Epoch}] {
			continue
		}
		mine, _ := m.Server(r.Primary)
		if reg, ok := live[r.Primary]; ok && (mine.Started == 0 || reg.Started == mine.Started) {
			continue // the primary is the map's
		}
		// Held: a WRITE of a primary in this process (loopback, tcp)
		// does not copy into the buffer while it is read.
		var pos uint64
		var complete bool
		if !b.buf.View(func([]byte) { pos, complete = b.rep.LogPosition(), b.rep.Complete() }) {
			continue
		}
		out = append(out, coord.Joined{Region: id, Epoch: r.Epoch, Server: s.cfg.Name, Log: true, Pos: pos, Incomplete: !complete})
	}
	s.replMu.Unlock()
	for _, j := range out {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.sess.ReportJoined(ctx, j)
		cancel()
		if err != nil {
			s.log.Warn("reporting the log position failed", zap.Uint64("region", j.Region), zap.Error(err))
			continue
		}
		s.replMu.Lock()
		if s.logsReported == nil {
			s.logsReported = map[[2]uint64]bool{}
		}
		s.logsReported[[2]uint64{j.Region, j.Epoch}] = true
		s.replMu.Unlock()
		s.log.Info("primary failed: log position reported", zap.Uint64("region", j.Region), zap.Uint64("epoch", j.Epoch),
			zap.Uint64("segment_index", j.Pos>>32), zap.Uint64("offset", j.Pos&(1<<32-1)), zap.Bool("incomplete", j.Incomplete))
	}
}
