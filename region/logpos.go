package region

import (
	"context"
	"slices"
	"sync"
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
// catch-up is unfinished); the master promotes only a backup that
// reported its copy complete. Called by runLogReports only; it returns
// whether a report failed (to be tried again).
func (s *Server) reportLogs(live map[string]coord.ServerInfo) (failed bool) {
	c := s.cluster
	st := s.state.Load()
	if c == nil || st == nil || !c.knows(st.m, s.cfg.Name) {
		return false
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
		if !b.buf.View(func([]byte) { pos, complete = b.rep.Report(r.Epoch) }) {
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
			failed = true
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
	return failed
}

// logReportRetry is how soon a failed log position report is tried again.
const logReportRetry = 500 * time.Millisecond

// logReporter feeds reportLogs: the latest set of live servers and kicks
// from the server list watch and from map installs (a map can make this
// server a backup of a region whose primary is already gone). Kicks never
// block.
type logReporter struct {
	kick chan struct{} // buffered 1
	mu   sync.Mutex
	live map[string]coord.ServerInfo // latest from the server list watch; nil: none yet
}

func newLogReporter() *logReporter { return &logReporter{kick: make(chan struct{}, 1)} }

// servers records the live servers (the server list watch) and kicks.
func (l *logReporter) servers(live map[string]coord.ServerInfo) {
	l.mu.Lock()
	l.live = live
	l.mu.Unlock()
	l.poke()
}

// poke asks for a report round without blocking.
func (l *logReporter) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// runLogReports reports log positions whenever kicked, and again after
// logReportRetry while a report fails, until ctx ends: the master does not
// promote a backup whose report it lacks.
func (s *Server) runLogReports(ctx context.Context, l *logReporter) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-retry.C:
		}
		l.mu.Lock()
		live := l.live
		l.mu.Unlock()
		if live == nil {
			continue
		}
		if s.reportLogs(live) {
			retry.Reset(logReportRetry)
		}
	}
}
