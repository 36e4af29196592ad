package region

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/replication"
)

// Attaching replication to hosted regions without holding up map
// installs or other regions. An attach runs in three steps:
//
//  1. under mapMu: a serving region is quiesced and its old stream taken
//     out of service (its replicator refuses from then on); a job
//     records what the attach is for (the map's region: primary, epoch,
//     group);
//  2. without mapMu: the old stream is retired: the commands it still
//     had queued (the end of a compaction, a log free) are handed to its
//     backups, bounded by retireDrain, before it closes and before any
//     dial (a new connection raises a backup's epoch: it would refuse
//     them); a backup left without them would fail the new stream's
//     check and be seeded whole. Then every backup of every region being
//     attached is dialed at once, each attempt bounded by dialAttempt and
//     retried until ReplicationConnect (a backup not listening yet fails
//     fast);
//     Still without mapMu, the new stream is attached on the dialed
//     connections (replication.Shipper.Attach: check, catch-up, seed,
//     IN_SYNC), which may take as long as seeds take;
//  3. under mapMu again: if the published map still gives the region
//     the same role, epoch and group, the stream serves the region
//     (Shipper.Serve) and the quiesce ends; otherwise the stream and its
//     connections are closed.
//
// An install whose map changes a region being attached (another primary,
// epoch or group, or drops it) supersedes the job before anything else:
// the dials and the stream's attach are cancelled, the install waits for
// step 2 to return (promptly: every wait in it ends with the job's
// contexts), and a quiesced region is released refusing writes (its
// stream is retired), so an install never waits for a dial or a seed and
// never demotes a region an attach holds still, and no seed reads a
// region that is no longer still. Install then attaches it anew for its
// own map if it still hosts it.

// dialAttempt bounds one connection attempt to a backup (its transport
// handshake included): a backup whose socket exists but whose server does
// not answer yet is retried, not waited on.
const dialAttempt = 2 * time.Second

// retireDrain bounds how long a re-attach hands the old stream's queued
// commands to its backups (the region's writes are held meanwhile); a
// backup they did not all reach is seeded by the new stream.
const retireDrain = 2 * time.Second

// errSuperseded ends an attach whose map changed while it dialed.
var errSuperseded = errors.New("region: attach superseded by a newer map")

// attachJob is one region's attach between steps 1 and 3. Its fields are
// written under Server.mapMu only (the dial goroutine reads m, r and ctx).
type attachJob struct {
	id     uint64
	m      *regionmap.Map
	r      regionmap.Assignment
	er     *engine.Region
	ctx    context.Context // the dials (bounded by ReplicationConnect)
	cancel context.CancelFunc
	// attachCtx is the stream's attach in step 2 (not bounded: seeds take
	// their time; its commands are bounded by their own timeout).
	attachCtx  context.Context
	stopAttach context.CancelFunc
	// stepped is closed when step 2 returned; p and err are its result
	// (written before, read after).
	stepped chan struct{}
	p       *primaryRepl
	err     error
	// st is the routing the attach started from; waiters get its
	// outcome (controller only).
	st      *routing
	waiters []*attachBatch
	// release ends the quiesce of a serving region; nil when it was not
	// serving or is released.
	release func()
	aborted bool
	dialed  *dialedGroup
	// old is the stream the region served with, retired in step 2 (nil:
	// none); after is an earlier job's retire of the region that must end
	// first, retired is closed when this job's has (nil: no retire).
	old     *primaryRepl
	after   <-chan struct{}
	retired chan struct{}
}

// abort supersedes j: its dials are cancelled and a region it quiesced is
// released refusing writes (its old stream is retired: nothing may be
// acknowledged until an attach succeeds). Called with mapMu held.
func (j *attachJob) abort() {
	if j.aborted {
		return
	}
	j.aborted = true
	j.cancel()
	j.stopAttach()
	// The region stays still until step 2 returned: a seed must not read
	// a region that moves on.
	<-j.stepped
	if j.p != nil {
		j.p.close() // attached but never served
		j.p = nil
	}
	j.end(replication.Refuse{Err: replication.ErrNoBackups})
}

// end releases j's quiesce, if held, after installing rep (nil: keep the
// region's replicator). Called with mapMu held.
func (j *attachJob) end(rep engine.Replicator) {
	if j.release == nil {
		return
	}
	if rep != nil {
		j.er.SetReplicator(rep)
	}
	j.release()
	j.release = nil
}

// supersedes reports whether a map whose region id is cur (nil: absent)
// ends an attach started for was: the server (name) is no longer its
// primary, or the epoch or the backups (joining included) changed. known
// false: the map is not for this run of the server.
func supersedes(was regionmap.Assignment, cur *regionmap.Assignment, name string, known bool) bool {
	return !known || cur == nil || !cur.Serving(name) || cur.Epoch != was.Epoch ||
		!slices.Equal(cur.Group(), was.Group()) || !slices.Equal(cur.Joining, was.Joining)
}

// abortAttaches supersedes every attach job (the server closes, or its
// session ended). Called with mapMu held.
func (s *Server) abortAttaches() {
	for _, j := range s.jobs() {
		s.supersede(j.id)
	}
}

// attachRegions starts attaching regions ids of st (hosted there, none
// with a job in flight): step 1 here, step 2 on a goroutine per region,
// whose return is a steppedEvent for the controller (step 3, stepped).
// A region with no backups left serves alone at once. b, if set, gets
// every region's outcome. Run by the controller.
func (s *Server) attachRegions(st *routing, ids []uint64, b *attachBatch) {
	alone := map[uint64]bool{}
	for _, id := range ids {
		j, err := s.prepareAttach(st, id)
		switch {
		case err != nil:
			s.markAttaching(st, id) // retried by the tick
			s.logAttachErr(id, err)
			b.add()
			b.finish(err)
		case j == nil:
			alone[id] = true // no backups: it serves alone
		default:
			j.st = st
			j.wait(b)
			s.attachWG.Add(1)
			go s.step2(j)
		}
	}
	s.publishAttached(st, alone)
}

// step2 is step 2 of job j, without mapMu: retire the old stream, dial,
// attach the new one; then the controller takes over (stepped).
func (s *Server) step2(j *attachJob) {
	defer s.attachWG.Done()
	s.retireOld(j)
	j.dialed = s.dialGroup(j.ctx, j.m, j.r)
	if err := j.attachCtx.Err(); err != nil {
		j.err = err // superseded while dialing
	} else {
		j.p, j.err = s.attachDialed(j.attachCtx, j.m, j.r, j.er, j.dialed)
	}
	close(j.stepped)
	if !s.submit(steppedEvent{j}) {
		// No controller left (the server closed: Close aborted every
		// attach first, so this one is aborted and its stream closed).
		j.dialed.close()
	}
}

// wait makes b get j's outcome.
func (j *attachJob) wait(b *attachBatch) {
	if b != nil {
		b.add()
		j.waiters = append(j.waiters, b)
	}
}

// stepped is step 3 of job j, whose step 2 returned: the stream serves
// the region and routing publishes it attached, unless a newer map (or
// the server's close) superseded it; a failed attach leaves the region
// waiting (attaching: retried by the re-attach tick). Run by the
// controller.
func (s *Server) stepped(j *attachJob) {
	err := s.finishJob(j.st, j)
	switch {
	case err == nil:
		s.publishAttached(j.st, map[uint64]bool{j.id: true})
	case !errors.Is(err, errSuperseded):
		s.markAttaching(j.st, j.id)
		s.logAttachErr(j.id, err)
	}
	for _, b := range j.waiters {
		b.finish(err)
	}
}

// markAttaching publishes region id (hosted in st, and still with the
// same handle) as waiting for its stream: unavailable until attached.
// Run by the controller.
func (s *Server) markAttaching(st *routing, id uint64) {
	cur := s.state.Load()
	er := cur.hosted(id)
	if er == nil || er != st.hosted(id) || cur.attaching(id) {
		return
	}
	s.state.Store(cur.with(map[uint64]route{id: {er: er, how: routeAttaching}}))
}

// finishJob ends job j once dialed: step 3, unless a newer map (or the
// server's close) superseded it. Called with mapMu held.
func (s *Server) finishJob(st *routing, j *attachJob) error {
	if rs := s.region(j.id); rs.job == j {
		rs.job = nil
	}
	cur := s.state.Load()
	if !j.aborted && (s.closed.Load() || cur.hosted(j.id) != j.er || supersedes(j.r, cur.region(j.id), s.cfg.Name, true)) {
		j.abort()
	}
	if j.aborted {
		j.dialed.close()
		return fmt.Errorf("region %d: %w", j.id, errSuperseded)
	}
	j.cancel()
	j.stopAttach()
	return s.finishAttach(j)
}

// prepareAttach is step 1 for region id of st: it returns the job to dial
// for, or nil when the region has no backups left (it then serves alone).
// Called with mapMu held.
func (s *Server) prepareAttach(st *routing, id uint64) (*attachJob, error) {
	r := st.region(id)
	er := st.hosted(id)
	rs := s.region(id)
	var release func()
	var old *primaryRepl
	if rs.resumed {
		// A serving region (its group changed, or its attach is retried):
		// make it still and take its old stream out of service (retired
		// in step 2); its replicator refuses from here.
		var err error
		if release, err = er.Quiesce(); err != nil {
			return nil, fmt.Errorf("region: quiesce region %d: %w", id, err)
		}
		old = s.takeStream(id, er)
	}
	if len(r.Group()) == 0 {
		if old != nil {
			old.close() // no backup of the group is left to hand anything to
		}
		// The master left it without backups: it serves alone, its only
		// copy (set explicitly: a retired stream leaves a refusing
		// replicator). No backup holds the old primary's segments any
		// more: a backup that joins later is seeded, never rebased.
		s.takeRebase(id, er)
		s.serveAlone(st.m, *r, er)
		if release != nil {
			release()
		}
		er.Resume()
		rs.resumed = true
		s.log.Warn("region has no backups left: serving without replication", zap.Uint64("region", id), zap.Uint64("epoch", r.Epoch))
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(s.bgCtx, time.Duration(s.cfg.ReplicationConnect))
	actx, stopAttach := context.WithCancel(s.bgCtx)
	j := &attachJob{id: id, m: st.m, r: *r, er: er, ctx: ctx, cancel: cancel, attachCtx: actx, stopAttach: stopAttach,
		stepped: make(chan struct{}), release: release, old: old}
	j.after, j.retired = s.retireSlot(id, old != nil)
	rs.job = j
	return j, nil
}

// finishAttach is step 3 for j (not superseded): the stream step 2
// attached serves the region. Called with mapMu held.
func (s *Server) finishAttach(j *attachJob) error {
	p, err := j.p, j.err
	switch {
	case err != nil:
		// The old stream is retired: until an attach succeeds no write may
		// be acknowledged without its backups (the writers the quiesce
		// held go on at release, before the caller marks it attaching).
		j.end(replication.Refuse{Err: replication.ErrNoBackups})
		return fmt.Errorf("region: attach replication of region %d: %w", j.id, err)
	case p.shipper == nil:
		// Only joining backups, none pre-seeded yet: it serves alone until
		// they are attached (set explicitly, as above).
		s.serveAlone(j.m, j.r, j.er)
	default:
		p.shipper.Serve()
	}
	j.end(nil)
	s.replMu.Lock()
	rs := s.regionLocked(j.id)
	rs.stream = p
	rs.recordSynced(j.r.Epoch, p.synced)
	s.replMu.Unlock()
	j.er.Resume()
	rs.resumed = true
	s.reportJoins(j.r, p)
	s.startPreSeeds(j.r, p, j.er)
	return nil
}

// dialedGroup is what step 2 found of a region's backups.
type dialedGroup struct {
	pre     map[string]*replication.Preseeded
	pending []string // joining backups left out until pre-seeded
	cq      *rdma.CQ
	results []dialResult // the other backups, in group order
}

// dialResult is one backup's connections, or why there are none.
type dialResult struct {
	name    string
	joining bool
	qp      rdma.QP
	rc      *ring.Client
	err     error
}

// close closes the QPs of d (an attach that did not use them).
func (d *dialedGroup) close() {
	for _, res := range d.results {
		if res.qp != nil {
			res.qp.Close()
		}
	}
}

// recordSynced remembers that the backups names hold complete copies of
// the region at epoch (an attach brought them in sync), until its epoch
// moves on. Called with replMu held.
func (rs *regionState) recordSynced(epoch uint64, names []string) {
	for _, j := range rs.members {
		if j.syncedAt != epoch {
			j.syncedAt = 0
		}
	}
	for _, name := range names {
		rs.memberLocked(name).syncedAt = epoch
	}
}

// syncedAt lists the backups of region r an attach brought in sync at
// r's epoch (recordSynced). A joining one among them is a copy already:
// its join is reported (the map may not show it yet), and its own replica
// says its copy is complete.
func (s *Server) syncedAt(r regionmap.Assignment) map[string]bool {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	out := map[string]bool{}
	rs := s.regions[r.ID]
	if rs == nil {
		return out
	}
	for _, name := range r.Group() {
		if j := rs.members[name]; j != nil && j.syncedAt == r.Epoch {
			out[name] = true
		}
	}
	return out
}

// dialGroup dials region r's backups (those not left pending for a
// pre-seed) in parallel, each until ctx ends (a joining one for at most
// 2 s: it holds nothing yet, not worth holding the region for). A joining
// backup an earlier attach at this epoch brought in sync (syncedAt) is a
// copy: dialed and required like any backup. Left pending, it was
// pre-seeded again, and once the map listed it as a backup nothing
// attached it; left out when unreachable, its replica would still say
// complete while the stream acknowledged writes it lacks. It takes no
// Server lock but replMu briefly.
func (s *Server) dialGroup(ctx context.Context, m *regionmap.Map, r regionmap.Assignment) *dialedGroup {
	d := &dialedGroup{pre: s.preseedsOf(m, r), cq: rdma.NewCQ()}
	synced := s.syncedAt(r)
	hello := replwire.Hello{Region: r.ID, Epoch: r.Epoch, SegSize: s.vol.SegmentSize()}.Encode()
	for _, name := range r.Group() {
		joining := slices.Contains(r.Joining, name) && !synced[name]
		if joining && d.pre != nil && d.pre[name] == nil {
			d.pending = append(d.pending, name) // pre-seeded while the region serves, then attached
			continue
		}
		d.results = append(d.results, dialResult{name: name, joining: joining})
	}
	var wg sync.WaitGroup
	for i := range d.results {
		res := &d.results[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			srv, _ := m.Server(res.name)
			tr, addr, err := s.replTransport(srv)
			if err != nil {
				res.err = err
				return
			}
			dctx, cancel := ctx, context.CancelFunc(func() {})
			if res.joining {
				dctx, cancel = context.WithTimeout(ctx, 2*time.Second)
			}
			defer cancel()
			res.qp, res.rc, res.err = s.dialBackup(dctx, tr, addr, d.cq, hello)
		}()
	}
	wg.Wait()
	return d
}

// dialBackup connects to a backup's region buffer (hello) and its command
// ring, attempt after attempt (each bounded by dialAttempt, 100 ms apart)
// until ctx ends or the server closes.
func (s *Server) dialBackup(ctx context.Context, tr rdma.Transport, addr string, cq *rdma.CQ, hello []byte) (rdma.QP, *ring.Client, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, dialAttempt)
		qp, err := tr.Dial(actx, addr, rdma.ConnConfig{CQ: cq, Private: hello})
		var rc *ring.Client
		if err == nil {
			if rc, err = s.peer(actx, tr, addr); err != nil {
				qp.Close()
			}
		}
		cancel()
		if err == nil {
			return qp, rc, nil
		}
		if ctx.Err() != nil || s.closed.Load() {
			return nil, nil, err
		}
		if !s.pause(ctx, 100*time.Millisecond) {
			return nil, nil, err
		}
	}
}

// onlySuperseded reports whether err (errors.Join of attach errors) holds
// nothing but superseded attaches (logged when superseded: no warning).
func onlySuperseded(err error) bool {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if !onlySuperseded(e) {
				return false
			}
		}
		return true
	}
	return errors.Is(err, errSuperseded)
}
