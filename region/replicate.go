package region

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/replication"
)

// Replication in the region server. A region with backups in the map is
// served by its primary only once replication is attached: for each backup
// a QP whose peer exposes the region's log buffer (the Mirror WRITEs into
// it) and the backup server's ring for commands (a Shipper sends them, in
// order). Until then requests get StatusUnavailable. On a backup server
// the region is a Replica: its buffer is exposed to the primary's
// connection request, TypeReplicate requests feed it.

// backupRegion is a region this server is a backup for.
//
// Locks: hello, then Server.replMu or the replica's own lock (never
// replMu while waiting for the replica: its lock is held through a
// command's disk I/O, and replMu is taken by every command of every
// region).
type backupRegion struct {
	rep *replication.Replica
	// hello serializes the region's replication hellos
	// (acceptReplication) and its promotion: a hello that replaces the
	// buffer folds the old one into the region without replMu, and no
	// other hello or promotion of the region may see it half done.
	hello sync.Mutex
	// buf is the buffer exposed to the primary; revoked: fence revoked
	// it and no fresh one replaced it yet (a hello must replace it).
	// Under Server.replMu.
	buf     *rdma.MR
	revoked bool
	// epoch of the primary connections in qps; a hello at a newer epoch
	// from a new primary fences them off first. Under Server.replMu
	// (written with hello held too).
	epoch uint64
	qps   []rdma.QP
	// primary sent the hellos of qps, as the map named it (zero: not
	// known, the map lagged): a hello at a newer epoch from the same
	// primary (name and run) keeps the buffer. Under Server.replMu.
	primary regionmap.Server
	// lost is the primary whose connections all ended without a goodbye
	// (primaryLost fenced it off; zero: none since the last hello), at
	// the epoch of those connections (lostEpoch). Under Server.replMu.
	lost      regionmap.Server
	lostEpoch uint64
}

// fence cuts the primary connections of the backup's current epoch: the
// buffer is revoked (a WRITE still in flight fails rather than complete
// unseen) and their QPs closed. Called with replMu held.
func (b *backupRegion) fence() {
	b.buf.Revoke()
	b.revoked = true
	for _, qp := range b.qps {
		qp.Close()
	}
	b.qps = nil
}

// primaryRepl is the replication attached to a hosted region.
type primaryRepl struct {
	shipper *replication.Shipper
	mirror  *replication.Mirror
	qps     []rdma.QP
	group   []string // the map's backups (joining included) it was attached for
	epoch   uint64   // the region's epoch it was attached at
	// pending are joining backups left out of the stream until they are
	// pre-seeded (preseed.go); with every backup pending the region
	// serves alone: shipper and mirror are nil.
	pending []string
	// synced are the backups the stream's attach brought in sync (its
	// IN_SYNC reached them): each holds a complete copy at epoch.
	synced []string
}

func (p *primaryRepl) close() {
	if p.shipper == nil {
		return
	}
	p.shipper.Close()
	p.closeConns()
}

// retire ends p before its region, still (quiesced), re-attaches: the
// region's replicator refuses from the call on, the commands queued for
// live backups are handed to them until ctx ends (replication.Shipper.
// Retire), then p closes. It returns why the hand-over stopped early.
func (p *primaryRepl) retire(ctx context.Context) error {
	if p.shipper == nil {
		return nil
	}
	err := p.shipper.Retire(ctx)
	p.closeConns()
	return err
}

func (p *primaryRepl) closeConns() {
	p.mirror.Close()
	for _, qp := range p.qps {
		qp.Close()
	}
}

func (s *Server) replMode(m *regionmap.Map) replication.Mode {
	if m.Replication == "build-index" {
		return replication.BuildIndex
	}
	return replication.SendIndex
}

// openBackup opens (or creates) the engine region a backup holds and its
// replica, unless this server has it already.
func (s *Server) openBackup(m *regionmap.Map, r regionmap.Assignment) (*backupRegion, error) {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	rs := s.regionLocked(r.ID)
	if rs.backup != nil {
		return rs.backup, nil
	}
	mode := s.replMode(m)
	desc := engine.RegionDesc{ID: r.ID, Epoch: r.Epoch}
	var (
		eb  *engine.Backup // Send-Index
		er  *engine.Region // Build-Index
		err error
	)
	if mode == replication.SendIndex {
		var ok bool
		if eb, ok = s.vol.Backup(r.ID); !ok {
			if _, ok := s.vol.Region(r.ID); ok {
				// Its primary once, failed over while away: what it holds
				// is stale. It becomes an empty backup, which the primary
				// seeds.
				s.log.Warn("demoting a region this server was primary of to an empty backup", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch))
				rs.resumed = false
				eb, err = s.vol.DemoteRegion(r.ID, r.Epoch)
			} else {
				eb, err = s.vol.CreateBackupRegion(desc)
			}
		}
	} else if er, _, err = s.vol.OpenRegion(desc); err == nil {
		// A copy of the primary's region from now on (engine.Volume.IsCopy):
		// without its buffer it may lack acknowledged writes.
		err = s.vol.SetFollower(r.ID, true)
	}
	if err != nil {
		return nil, fmt.Errorf("region: open backup region %d: %w", r.ID, err)
	}
	buf, err := rdma.Register(int(2 * s.vol.SegmentSize()))
	if err != nil {
		return nil, err
	}
	var rep *replication.Replica
	if eb != nil {
		rep, err = replication.NewSendIndexReplica(s.vol, eb, r.Epoch, buf.Bytes())
	} else {
		rep, err = replication.NewBuildIndexReplica(s.vol, er, r.Epoch, buf.Bytes())
	}
	if err != nil {
		buf.Deregister()
		return nil, err
	}
	b := &backupRegion{rep: rep, buf: buf}
	rs.backup, rs.role = b, roleBackup
	if er != nil {
		// It indexes its primary's records with its own writes, which
		// wait for nothing, nor do its L0 compactions: one a stream of
		// its primaryship here refused is released (a handle deposed
		// here refuses them).
		er.SetReplicator(replication.Follow{})
		er.Resume() // a Build-Index backup compacts on its own
	}
	return b, nil
}

// commandPrefix starts the private data of a primary's command ring
// connection: the listener hands it to the replication ring server, whose
// spinner and workers serve only replication commands (client requests
// that wait for replication must never starve them: two servers backing up
// each other would wait on each other).
var commandPrefix = []byte("TBRQ")

// otherConn takes the connection requests that are not client rings.
func (s *Server) otherConn(req rdma.ConnRequest) error {
	var cert *x509.Certificate
	c, certified := req.(rdma.Certified)
	if certified {
		cert = c.PeerCertificate()
	}
	if !mayReplicate(s.tls != nil, certified, cert) {
		req.Reject()
		return fmt.Errorf("region: a replication connection refused: %w: its certificate is not a server's", rdma.ErrAuth)
	}
	if cr, ok := req.(rdma.Credentialed); ok && !serverUID(cr.PeerUID(), uint32(os.Getuid())) {
		// shm_allow_uids admits clients; a primary runs as a server does.
		req.Reject()
		return fmt.Errorf("region: a replication connection refused: %w: uid %d is not a server's", rdma.ErrAuth, cr.PeerUID())
	}
	if pd := req.Private(); len(pd) >= len(commandPrefix) && string(pd[:len(commandPrefix)]) == string(commandPrefix) {
		return s.replRing.Adopt(req, pd[len(commandPrefix):])
	}
	return s.acceptReplication(req)
}

// mayReplicate says whether a connection may carry replication (a
// primary's commands, its log mirror): any may on a server without TLS
// and over transports that do not authenticate by certificate (shm checks
// uids); over TLS only a peer whose certificate allows server
// authentication, as servers' do and clients' do not.
func mayReplicate(tlsOn, certified bool, cert *x509.Certificate) bool {
	if !tlsOn || !certified {
		return true
	}
	return cert != nil && slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
}

// serverUID says whether a local peer of uid may replicate to this
// server (run as self): over shm only a process of the server's own user
// or root may, whatever uids may connect as clients.
func serverUID(uid, self uint32) bool { return uid == self || uid == 0 }

// acceptReplication answers a primary's connection request for a region
// this server is a backup for: it exposes the region's log buffer. A
// hello from a new primary fences the old one and replaces the buffer;
// a Build-Index backup first folds the old buffer into its region
// (replication.Replica.SetBuffer), which applies up to two segments of
// records: that runs under the region's hello lock and its replica's
// lock only, never under replMu, which every command of every region
// takes (a fold under it stalled replication for all of them, and other
// primaries' hang watchdogs dropped this healthy server). The region's
// own commands wait for the fold (the replica's lock): the old
// primary's are refused from its start (the epoch is raised first), and
// the new primary's can only come once this connection is accepted,
// after it.
func (s *Server) acceptReplication(req rdma.ConnRequest) error {
	h, err := replwire.DecodeHello(req.Private())
	if err != nil {
		req.Reject()
		return err
	}
	b := s.backupOf(h.Region)
	if b == nil {
		req.Reject()
		return fmt.Errorf("region: replication request for region %d, which this server does not back up", h.Region)
	}
	// One hello of the region at a time (its listeners' accept loops are
	// separate): a second one must not find the old primary fenced and
	// the new buffer not installed yet, and expose the revoked one.
	b.hello.Lock()
	defer b.hello.Unlock()
	gone := s.backupOf(h.Region) != b
	switch {
	case gone:
		err = fmt.Errorf("region: replication request for region %d, which this server no longer backs up", h.Region)
	case h.SegSize != s.vol.SegmentSize():
		err = fmt.Errorf("region: replication request for region %d with %d-byte segments, this volume has %d", h.Region, h.SegSize, s.vol.SegmentSize())
	case h.Epoch < b.rep.Epoch():
		err = fmt.Errorf("%w: replication request for region %d at epoch %d, backup at %d", replication.ErrStaleEpoch, h.Region, h.Epoch, b.rep.Epoch())
	case h.Epoch <= b.rep.Reported():
		// Its primary is gone and the master may promote this copy on
		// its report: a hello of that epoch (the old primary resuming)
		// must not fence or replace its buffer.
		err = fmt.Errorf("%w: replication request for region %d at epoch %d", replication.ErrReported, h.Region, h.Epoch)
	}
	if err != nil {
		req.Reject()
		return err
	}
	var m *regionmap.Map
	if st := s.state.Load(); st != nil {
		m = st.m
	}
	from, known := helloSender(m, h.Region, h.Epoch)
	s.replMu.Lock()
	oldEpoch := b.epoch
	replace := b.revoked // a fence with no buffer after it (a failed replacement, a promotion that failed)
	switch {
	case h.Epoch > b.epoch && len(b.qps) > 0 && known && samePrimary(b.primary, from):
		// The same primary re-attaching at a new epoch (its group
		// changed): the buffer holds records it acknowledged that no log
		// holds yet; it is kept (the old connections closed), and so is
		// the copy's completeness: the new stream re-sends the tail into
		// it only after the backup applied its check's catch-up (a sealed
		// segment the buffer held whose flush never came, among others).
		for _, qp := range b.qps {
			qp.Close()
		}
		b.qps = nil
		s.log.Info("the region's primary re-attached: buffer kept", zap.Uint64("region", h.Region), zap.Uint64("epoch", b.epoch), zap.Uint64("new_epoch", h.Epoch))
	case h.Epoch > b.epoch && len(b.qps) > 0:
		// A new primary (or one the map cannot name yet): the old one
		// (perhaps paused, not dead) must not get another WRITE
		// acknowledged. Its buffer is revoked, then replaced below.
		b.fence()
		replace = true
	}
	s.replMu.Unlock()
	// The old primary's commands still in flight are refused from here.
	b.rep.RaiseEpoch(h.Epoch)
	if replace {
		if err := s.rebuffer(b); err != nil {
			req.Reject()
			return err
		}
		s.log.Info("fenced the region's previous primary", zap.Uint64("region", h.Region), zap.Uint64("epoch", oldEpoch), zap.Uint64("new_epoch", h.Epoch))
	}
	s.replMu.Lock()
	switch {
	case known:
		b.primary = from
	case h.Epoch > b.epoch:
		b.primary = regionmap.Server{}
	}
	b.epoch = max(b.epoch, h.Epoch)
	buf := b.buf
	s.replMu.Unlock()
	qp, err := req.Accept(rdma.ConnConfig{CQ: s.replCQ, Expose: []*rdma.MR{buf}})
	if err != nil {
		return err
	}
	s.replMu.Lock()
	b.qps = append(b.qps, qp)
	b.lost = regionmap.Server{}
	s.replMu.Unlock()
	s.log.Info("primary connected for replication", zap.Uint64("region", h.Region), zap.Uint64("epoch", h.Epoch))
	return nil
}

// helloSender names the primary a replication hello for region at epoch
// comes from, as map m knows it: an epoch of a region has one primary.
// ok is false when m does not have the region at that epoch (it lags, or
// it is not known).
func helloSender(m *regionmap.Map, region, epoch uint64) (regionmap.Server, bool) {
	if m == nil {
		return regionmap.Server{}, false
	}
	r := m.Region(region)
	if r == nil || r.Epoch != epoch {
		return regionmap.Server{}, false
	}
	srv, ok := m.Server(r.Primary)
	if !ok || srv.Started == 0 {
		return regionmap.Server{}, false // no run: a restart could not be told apart
	}
	return srv, true
}

// samePrimary reports whether a and b name the same run of one server.
func samePrimary(a, b regionmap.Server) bool {
	return a.Name != "" && a.Name == b.Name && a.Started != 0 && a.Started == b.Started
}

// rebuffer gives b's replica a fresh buffer, b fenced (its old buffer
// revoked). The replica folds the old one first (Build-Index), under its
// own lock: called with b.hello held and replMu not held.
func (s *Server) rebuffer(b *backupRegion) error {
	buf, err := rdma.Register(int(2 * s.vol.SegmentSize()))
	if err != nil {
		return err
	}
	if err := b.rep.SetBuffer(buf.Bytes()); err != nil {
		buf.Deregister()
		return err
	}
	s.replMu.Lock()
	old := b.buf
	b.buf, b.revoked = buf, false
	s.replMu.Unlock()
	old.Deregister()
	return nil
}

// handleReplicate applies one command to a backup region.
func (s *Server) handleReplicate(h *ring.ServerRequest) ring.Reply {
	c, err := replwire.DecodeCommand(h.Payload)
	if err != nil {
		return badRequest(err)
	}
	b := s.backupOf(c.Region)
	if b == nil {
		return errorReply(wire.StatusUnavailable, "server %s does not back up region %d", s.cfg.Name, c.Region)
	}
	label := labelRewriteIndex
	switch {
	case c.Kind == replication.CmdFlush && s.replMode(s.state.Load().m) == replication.BuildIndex:
		label = labelInsert // the backup indexes the records itself
	case c.Kind == replication.CmdFlush, c.Kind == replication.CmdLogFree:
		label = labelLogReplication
	}
	// Commands write and sync the backup's files (a flush, an index
	// segment): the ones queued behind it go to another worker.
	h.WillBlock()
	var reply []byte
	if err := labeledErr(label, func() (err error) { reply, err = b.rep.Reply(c); return err }); err != nil {
		if errors.Is(err, replication.ErrStaleEpoch) || errors.Is(err, replication.ErrReported) {
			return errorReply(wire.StatusStaleEpoch, "%v", err)
		}
		if errors.Is(err, replication.ErrOutOfSync) {
			// An answer, not a failure: the primary catches it up or seeds it.
			s.log.Info("replication command refused: this backup is out of sync", zap.Uint64("region", c.Region), zap.Stringer("kind", c.Kind), zap.Error(err))
			return errorReply(wire.StatusInternal, "%v", err)
		}
		s.log.Error("replication command failed", zap.Uint64("region", c.Region), zap.Stringer("kind", c.Kind), zap.Error(err))
		return errorReply(wire.StatusInternal, "%v", err)
	}
	return ring.Reply{Payload: reply}
}

// ringLink sends a region's commands over a backup server's ring.
type ringLink struct {
	c      *ring.Client
	region uint64
	epoch  uint64
}

func (l *ringLink) Send(ctx context.Context, c *replication.Command) ([]byte, error) {
	// The command's Data (a shipped index segment: 2 MiB) goes as the
	// request's tail, copied once into the ring, not into an encoding first.
	rep, err := l.c.Call(ctx, ring.Request{Type: wire.TypeReplicate, Region: l.region, Epoch: l.epoch, Payload: c.EncodeHead(nil), Tail: c.Data, ReplySize: 4 << 10})
	if err != nil {
		return nil, err
	}
	if rep.Status != 0 {
		return nil, fmt.Errorf("backup refused %s (status %d): %s", c.Kind, rep.Status, rep.Payload)
	}
	return rep.Payload, nil
}

// replTransport picks the transport to reach a peer server.
func (s *Server) replTransport(peer regionmap.Server) (rdma.Transport, string, error) {
	want := s.cfg.ReplicationTransport
	if want == "" {
		want = "tcp"
		if peer.Shm != "" {
			want = "shm"
		}
	}
	addr := peer.Addr(want)
	if addr == "" {
		return nil, "", fmt.Errorf("%w: server %s has no %s address", ErrConfig, peer.Name, want)
	}
	if s.deps.dial != nil {
		return s.deps.dial, addr, nil
	}
	if want == "shm" {
		return &rdma.Shm{}, addr, nil
	}
	return &rdma.TCP{TLS: s.tls}, addr, nil
}

// peer returns the ring client to a backup server, dialing it once. The
// dial runs without replMu (a backup that does not answer must not hold up
// the replication commands this server serves).
func (s *Server) peer(ctx context.Context, tr rdma.Transport, addr string) (*ring.Client, error) {
	s.replMu.Lock()
	if c := s.peers[addr]; c != nil && c.Err() == nil {
		s.replMu.Unlock()
		return c, nil
	}
	s.replMu.Unlock()
	c, err := ring.Dial(ctx, ring.ClientConfig{Transport: tr, Addr: addr, RequestRing: int(4*s.vol.SegmentSize() + 64<<10), PrivatePrefix: commandPrefix, SpinTime: time.Duration(s.cfg.SpinTime)})
	if err != nil {
		return nil, err
	}
	s.replMu.Lock()
	defer s.replMu.Unlock()
	if o := s.peers[addr]; o != nil && o.Err() == nil {
		c.Close() // dialed meanwhile by another attach
		return o, nil
	}
	s.peers[addr] = c
	return c, nil
}

// attachDialed attaches a stream of a hosted region to the backups d
// connected to (dialGroup): replication.Shipper.Attach, until ctx ends;
// the caller makes it serve (Serve). A backup that could not be reached
// is left out (logged) in a static map; in a managed cluster it is
// reported to the master and, unless it is only joining, fails the
// attach. With only joining backups, none pre-seeded, it returns a
// primaryRepl without a stream: the region is to serve alone. The region
// must be still. It takes no Server lock but replMu briefly (step 2 of
// attach.go: without mapMu).
func (s *Server) attachDialed(ctx context.Context, m *regionmap.Map, r regionmap.Assignment, er *engine.Region, d *dialedGroup) (*primaryRepl, error) {
	var backups []replication.Backup
	links := map[string]replication.Link{}
	p := &primaryRepl{group: r.Group(), epoch: r.Epoch, pending: d.pending}
	pre := d.pre
	fail := func(err error) (*primaryRepl, error) {
		d.close()
		return nil, err
	}
	for _, res := range d.results {
		name, err := res.name, res.err
		if err != nil && res.joining && s.cluster != nil {
			// Acknowledging without a joining backup loses nothing: it is
			// not a copy until its join is reported.
			s.reportDropped(ctx, r, name)
			s.log.Warn("joining backup unreachable: left out", zap.Uint64("region", r.ID), zap.String("backup", name), zap.Error(err))
			continue
		}
		if err != nil {
			if s.cluster != nil {
				// Managed: acknowledging writes it lacks would lose them if
				// it were promoted; the master redoes the group first.
				s.reportDropped(ctx, r, name)
				return fail(fmt.Errorf("backup %s unreachable (reported to the master): %w", name, err))
			}
			s.log.Error("backup unreachable: region replicates without it", zap.Uint64("region", r.ID), zap.String("backup", name), zap.Error(err))
			continue
		}
		if len(res.qp.PeerRegions()) != 1 {
			return fail(fmt.Errorf("region: backup %s exposed %d regions for region %d", name, len(res.qp.PeerRegions()), r.ID))
		}
		p.qps = append(p.qps, res.qp)
		backups = append(backups, replication.Backup{Name: name, QP: res.qp, Buffer: res.qp.PeerRegions()[0]})
		links[name] = &ringLink{c: res.rc, region: r.ID, epoch: r.Epoch}
	}
	cq := d.cq
	if len(backups) == 0 && len(p.pending) == len(r.Group()) {
		// Only joining backups, none pre-seeded yet: nothing to wait for.
		// None holds the old primary's segments: a promotion's rebase is
		// for no one (the pre-seeds name this primary's segments).
		s.takeRebase(r.ID, er)
		// The primary is the only copy (the caller makes it serve alone:
		// it syncs every write before the acknowledgement, and refuses
		// writes under min_copies > 1).
		s.log.Info("region serves alone until its joining backups are pre-seeded", zap.Uint64("region", r.ID), zap.Strings("joining", p.pending))
		return p, nil
	}
	if len(backups) == 0 && len(r.Group()) > 0 {
		// Acknowledging writes no backup of the map holds would lose them
		// in a failover: wait until one answers (or the map changes).
		return nil, fmt.Errorf("%w: none of the region's %d backups is reachable", replication.ErrNoBackups, len(r.Group()))
	}
	tail, err := er.LogTail()
	if err != nil {
		return fail(err)
	}
	if p.mirror, err = replication.NewMirror(s.vol.SegmentSize(), tail.Segment, cq, backups); err != nil {
		return fail(err)
	}
	var onDrop func(string, error)
	if s.cluster != nil {
		onDrop = func(name string, _ error) { s.reportDropped(s.bgCtx, r, name) }
	}
	logID, handover := s.buildLogOf(r.ID)
	p.shipper, err = replication.NewShipper(replication.ShipperConfig{Region: er, Epoch: r.Epoch, Mode: s.replMode(m), LogID: logID, Handover: handover,
		SegSize: s.vol.SegmentSize(), Mirror: p.mirror, Links: links, Credits: s.cfg.ReplicationCredits, Log: s.log.Named("replication"),
		Rebase: s.takeRebase(r.ID, er), OnDrop: onDrop, Strict: s.cluster != nil, Preseeded: pre,
		MinCopies: m.Copies(), Joining: r.Joining, HungAfter: s.cfg.HungBackupAfter()})
	if err == nil {
		err = p.shipper.Attach(ctx) // closes the shipper when it fails
	}
	if err != nil {
		p.closeConns()
		return nil, err
	}
	dropped := p.shipper.Dropped()
	for name := range links {
		if _, gone := dropped[name]; !gone {
			p.synced = append(p.synced, name)
		}
	}
	s.log.Info("replication attached", zap.Uint64("region", r.ID), zap.Int("backups", len(backups)), zap.Stringer("mode", s.replMode(m)))
	return p, nil
}

// serveAlone makes a primary with no backup in a stream its only copy:
// every write is durable before its acknowledgement, whatever the sync
// mode (unless Config.UnsafeLoneAck); with the map's min_copies above 1 writes are refused (reads go
// on).
func (s *Server) serveAlone(m *regionmap.Map, r regionmap.Assignment, er *engine.Region) {
	er.SetReplicator(&replication.Alone{Region: er, MinCopies: m.Copies(), Unsafe: s.cfg.UnsafeLoneAck})
	if m.Copies() > 1 {
		s.log.Warn("region refuses writes: fewer copies than min_copies", zap.Uint64("region", r.ID), zap.Int("copies", 1), zap.Int("min_copies", m.Copies()))
	}
}

// flushPrimaries lets each hosted region finish its compactions and its
// backups persist the whole log (a clean stop leaves complete backups).
func (s *Server) flushPrimaries() {
	ps := s.streams()
	st := s.state.Load()
	for id, p := range ps {
		if er := st.hosted(id); er != nil {
			if err := er.WaitIdle(); err != nil {
				s.log.Warn("region did not settle before stop", zap.Uint64("region", id), zap.Error(err))
			}
		}
		if p.shipper == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := p.shipper.Flush(ctx); errors.Is(err, replication.ErrNoBackups) {
			s.log.Info("no live backup to flush the log to at stop", zap.Uint64("region", id))
		} else if err != nil {
			s.log.Warn("flushing the log to the backups at stop failed", zap.Uint64("region", id), zap.Error(err))
		}
		cancel()
	}
}

// closeReplication stops shipping and closes server-to-server state.
func (s *Server) closeReplication() {
	s.replMu.Lock()
	defer s.replMu.Unlock()
	for _, rs := range s.regions {
		if rs.stream != nil {
			rs.stream.close()
		}
	}
	for _, c := range s.peers {
		c.Close()
	}
	for _, rs := range s.regions {
		b := rs.backup
		if b == nil {
			continue
		}
		for _, qp := range b.qps {
			qp.Close()
		}
		b.rep.Close()
		b.buf.Deregister()
	}
}
