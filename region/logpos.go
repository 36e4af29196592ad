package region

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/replication"
)

// reportLogs is a backup's part in choosing whom to promote: for every
// region the map makes it a backup of (not joining) whose primary's
// registration is gone or belongs to a new run (the master fails such a
// primary over), whose primary released it for a move (Released), or
// whose primary it lost (lost.go: a LostReport goes first),
// it reports once per region epoch how much of the
// primary's log its buffer holds and whether its copy is complete
// (replication.Replica.Report); the master promotes only a backup that
// reported its copy complete. Called by runLogReports only; it returns
// whether a report failed (to be tried again).
func (s *Server) reportLogs(live map[string]coord.ServerInfo) (failed bool) {
	c := s.cluster
	st := s.state.Load()
	if c == nil || st == nil || !c.knows(st.m, s.cfg.Name) {
		return false
	}
	out, failed := s.dueLogReports(st.m, live)
	for _, d := range out {
		j := d.LogReport
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		if d.lost {
			err = c.sess.Report(ctx, coord.LostReport{Region: j.Region, Epoch: j.Epoch, Server: j.Server})
		}
		if err == nil {
			err = c.sess.Report(ctx, j)
		}
		cancel()
		if err != nil {
			s.log.Warn("reporting the log position failed", zap.Uint64("region", j.Region), zap.Error(err))
			failed = true
			continue
		}
		s.replMu.Lock()
		rs := s.regionLocked(j.Region) // a region of the map: reported as its backup
		rs.reported = max(rs.reported, j.Epoch)
		s.replMu.Unlock()
		s.log.Info("primary failed: log position reported", zap.Uint64("region", j.Region), zap.Uint64("epoch", j.Epoch),
			zap.Uint64("segment_index", j.Pos>>32), zap.Uint64("offset", j.Pos&(1<<32-1)), zap.Bool("incomplete", !j.Complete))
	}
	return failed
}

// dueLogReports is logReports for this server's copies under map m: what
// was reported and the copies are taken under replMu, the copies read
// without it (a replica's lock is held through a command's disk I/O and a
// buffer fold; replMu is taken by every command of every region).
func (s *Server) dueLogReports(m *regionmap.Map, live map[string]coord.ServerInfo) ([]logDue, bool) {
	s.replMu.Lock()
	reported := map[[2]uint64]bool{}
	copies := map[uint64]logCopy{}
	lost := map[uint64]lostPrimary{}
	for id, rs := range s.regions {
		if r := m.Region(id); rs.reported != 0 && (r == nil || r.Epoch > rs.reported) {
			rs.reported = 0
		}
		if rs.reported != 0 {
			reported[[2]uint64{id, rs.reported}] = true
		}
		if b := rs.backup; b != nil {
			copies[id] = bufferedCopy{rep: b.rep, buf: b.buf}
			if b.lost.Name != "" {
				lost[id] = lostPrimary{b.lost, b.lostEpoch}
			}
		}
	}
	s.replMu.Unlock()
	return logReports(m, s.cfg.Name, live, reported, copies, lost)
}

// logDue is a log position report due; lost: the backup lost the
// primary (lost.go), and a LostReport goes first.
type logDue struct {
	coord.LogReport
	lost bool
}

// reportReleases is a moved primary's part (docs/failover.md, "Moving a
// primary"): for every region the installed map moves away from this
// server (regionmap.Assignment.MoveTo) that it no longer serves, it
// reports the release once per region epoch. Install deposed such a
// region (refused its writes, withdrew its routing) before it published
// that map, so a release read from the published map is never early: the
// master promotes a backup only after it. Called by runLogReports only;
// it returns whether a report failed.
func (s *Server) reportReleases() (failed bool) {
	c := s.cluster
	st := s.state.Load()
	if c == nil || st == nil || !c.knows(st.m, s.cfg.Name) {
		return false
	}
	var due []coord.ReleaseReport
	s.replMu.Lock()
	for _, r := range st.m.Regions {
		if r.Primary != s.cfg.Name || r.MoveTo == "" {
			continue
		}
		if rs := s.regionLocked(r.ID); rs.role != rolePrimary && rs.released < r.Epoch {
			due = append(due, coord.ReleaseReport{Region: r.ID, Epoch: r.Epoch, Server: s.cfg.Name})
		}
	}
	s.replMu.Unlock()
	for _, rr := range due {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.sess.Report(ctx, rr)
		cancel()
		if err != nil {
			s.log.Warn("reporting a release failed", zap.Uint64("region", rr.Region), zap.Error(err))
			failed = true
			continue
		}
		s.replMu.Lock()
		rs := s.regionLocked(rr.Region)
		rs.released = max(rs.released, rr.Epoch)
		s.replMu.Unlock()
		s.log.Info("moving the primary role away: region released", zap.Uint64("region", rr.Region), zap.Uint64("epoch", rr.Epoch))
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
	retry := s.clock().NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.kick:
		case <-retry.Chan():
		}
		l.mu.Lock()
		live := l.live
		l.mu.Unlock()
		failed := s.reportReleases()
		if live != nil && s.reportLogs(live) {
			failed = true
		}
		if failed {
			retry.Reset(logReportRetry)
		}
	}
}

// logCopy is a backup's copy of a region as a log position report reads
// it (replication.Replica.Report); ok is false when it cannot be read now.
type logCopy interface {
	report(epoch uint64) (pos uint64, complete, ok bool)
}

// bufferedCopy is a backup's replica and the buffer it exposed when the
// report was due.
type bufferedCopy struct {
	rep *replication.Replica
	buf *rdma.MR
}

// report reads the copy with its buffer held: a WRITE of a primary in
// this process (loopback, tcp) does not copy into it meanwhile. ok is
// false once the buffer was replaced (deregistered): the report is tried
// again.
func (c bufferedCopy) report(epoch uint64) (pos uint64, complete, ok bool) {
	ok = c.buf.View(func([]byte) { pos, complete = c.rep.Report(epoch) })
	return pos, complete, ok
}

// logReports decides the log position reports due from server name under
// map m: one per region that lists it as a backup, whose primary is not
// live with the map's run (live), released the region, or was lost with
// the map's run (lost, by region), and not reported at the region's epoch
// yet. A backup role without a copy (its region failed to open) reports an
// incomplete copy at position 0: the master must not wait for it. failed:
// a copy could not be read (to be tried again).
func logReports(m *regionmap.Map, name string, live map[string]coord.ServerInfo, reported map[[2]uint64]bool, copies map[uint64]logCopy, lost map[uint64]lostPrimary) (out []logDue, failed bool) {
	for _, r := range m.Regions {
		if !slices.Contains(r.Backups, name) || reported[[2]uint64{r.ID, r.Epoch}] {
			continue
		}
		mine, _ := m.Server(r.Primary)
		isLost := lostRun(m, r, lost[r.ID])
		if reg, ok := live[r.Primary]; ok && (mine.Started == 0 || reg.Started == mine.Started) && !r.Released && !isLost {
			continue // the primary is the map's, has not released the region for a move, and was not lost
		}
		var pos uint64
		var complete bool
		if c := copies[r.ID]; c != nil {
			var ok bool
			if pos, complete, ok = c.report(r.Epoch); !ok {
				failed = true
				continue
			}
		}
		out = append(out, logDue{coord.LogReport{Region: r.ID, Epoch: r.Epoch, Server: name, Pos: pos, Complete: complete}, isLost})
	}
	return out, failed
}
