package region

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/region/regionmap"
	"github.com/tebis-go/tebis/region/wire"
)

// Server is a running region server.
type Server struct {
	cfg Config
	log *zap.Logger
	vol *engine.Volume

	state  atomic.Pointer[routing]
	mapMu  sync.Mutex // serializes map changes
	rings  []*ring.Server
	closed atomic.Bool

	replMu    sync.Mutex
	backups   map[uint64]*backupRegion // regions this server backs up
	primaries map[uint64]*primaryRepl  // replication of hosted regions with backups
	peers     map[string]*ring.Client  // command rings to backup servers, by address
	replCQ    *rdma.CQ
	replStop  context.CancelFunc
	replRing  *ring.Server    // serves replication commands (their own workers)
	promoted  map[uint64]bool // regions promoted in this process whose backups have not rebased yet
	resumed   map[uint64]bool // hosted regions whose background work runs; under mapMu

	cluster *clusterLink // nil: standalone
}

// routing is an immutable snapshot: the map and the regions hosted under it.
type routing struct {
	m      *regionmap.Map
	hosted map[uint64]*engine.Region // regions this server is primary for
	// attaching lists hosted regions whose replication is not attached
	// yet: their requests get StatusUnavailable.
	attaching map[uint64]bool
}

// Start opens the volume, loads the map and starts listening.
func Start(cfg Config, log *zap.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("region: data dir: %w", err)
	}
	mode := engine.SyncModeSync
	if cfg.SyncMode == "async" {
		mode = engine.SyncModeAsync
	}
	vol, err := engine.Open(engine.Options{
		Dir: cfg.DataDir, SegmentSize: int64(cfg.SegmentSize), L0Pairs: cfg.L0Pairs, GrowthFactor: cfg.GrowthFactor,
		SyncMode: mode, CacheBytes: int64(cfg.CacheSize), Logger: log.Named("engine"),
		// A region replicating to backups starts compacting only once they
		// are attached (install, attachLocked).
		HoldBackground: true,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, vol: vol, backups: map[uint64]*backupRegion{}, primaries: map[uint64]*primaryRepl{}, resumed: map[uint64]bool{},
		peers: map[string]*ring.Client{}, replCQ: rdma.NewCQ()}
	s.replRing = ring.NewServer(ring.ServerConfig{Handlers: map[uint16]ring.HandlerFunc{wire.TypeReplicate: s.handleReplicate},
		Spinners: 1, Workers: 4, SpinTime: time.Duration(cfg.SpinTime), Log: log.Named("replication-ring")})
	var ctx context.Context
	ctx, s.replStop = context.WithCancel(context.Background())
	go s.drainReplCQ(ctx)
	var m *regionmap.Map
	if cfg.Zookeeper != "" {
		// Managed: nothing is served until the master's map arrives.
		m = &regionmap.Map{}
		s.state.Store(&routing{m: m, hosted: map[uint64]*engine.Region{}, attaching: map[uint64]bool{}})
		err = s.listen()
		if err == nil {
			err = s.joinCluster()
		}
	} else {
		m, err = s.loadMap()
		if err == nil {
			err = s.install(m)
		}
		if err == nil {
			err = s.listen()
		}
		if err == nil {
			if aerr := s.attachAll(); aerr != nil {
				// Served once their backups answer (reattach).
				log.Warn("regions not attached to their backups yet", zap.Error(aerr))
			}
		}
	}
	if err == nil {
		go s.reattach(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	log.Info("region server started", zap.String("name", cfg.Name), zap.String("shm", cfg.Shm), zap.String("tcp", cfg.TCP),
		zap.Uint64("map_version", m.Version), zap.Int("regions", len(s.state.Load().hosted)))
	return s, nil
}

// loadMap reads the map file, or makes the single-region map.
func (s *Server) loadMap() (*regionmap.Map, error) {
	if s.cfg.MapFile == "" {
		return regionmap.Single(regionmap.Server{Name: s.cfg.Name, Shm: s.cfg.Shm, TCP: s.cfg.TCP}), nil
	}
	m, err := regionmap.File(s.cfg.MapFile).Load(context.Background())
	if err != nil {
		return nil, err
	}
	if _, ok := m.Server(s.cfg.Name); !ok {
		return nil, fmt.Errorf("%w: server %q is not in the region map %s", ErrConfig, s.cfg.Name, s.cfg.MapFile)
	}
	return m, nil
}

// Reload re-reads the map file and serves the new map (standalone mode's
// way to change the map: SIGHUP). An older or equal version is ignored.
func (s *Server) Reload() error {
	m, err := s.loadMap()
	if err != nil {
		return err
	}
	return s.install(m)
}

// install opens the regions m assigns to this server and switches routing
// to m. A region this server backed up and m names it primary of is
// promoted (fenced from the old primary, its buffer persisted, L0
// rebuilt). Regions no longer assigned stay in the volume but are no
// longer served, and stop replicating. In a managed cluster a region that
// cannot be opened is logged and left out (the master sees it unserved);
// a standalone map must open whole.
func (s *Server) install(m *regionmap.Map) error {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	old := s.state.Load()
	if (old != nil && m.Version <= old.m.Version) || s.closed.Load() {
		return nil
	}
	next := &routing{m: m, hosted: map[uint64]*engine.Region{}, attaching: map[uint64]bool{}}
	var errs []error
	for _, r := range m.Regions {
		if err := s.installRegion(m, r, old, next); err != nil {
			err = fmt.Errorf("region %d: %w", r.ID, err)
			if s.cfg.Zookeeper == "" {
				return err
			}
			s.log.Error("region not installed", zap.Uint64("region", r.ID), zap.Error(err))
			errs = append(errs, err)
		}
	}
	s.stopDeposed(next)
	s.state.Store(next)
	s.log.Info("region map installed", zap.Uint64("version", m.Version), zap.Int("hosted", len(next.hosted)))
	if len(s.rings) > 0 { // listening: backups can be reached (Start attaches after listen)
		errs = append(errs, s.attachLocked())
	}
	return errors.Join(errs...)
}

// installRegion opens one region of m into next.
func (s *Server) installRegion(m *regionmap.Map, r regionmap.Region, old, next *routing) error {
	if slices.Contains(r.Group(), s.cfg.Name) {
		_, err := s.openBackup(m, r)
		return err
	}
	if r.Primary != s.cfg.Name {
		return nil
	}
	s.replMu.Lock()
	p, attached := s.primaries[r.ID]
	b := s.backups[r.ID]
	s.replMu.Unlock()
	var er *engine.Region
	switch {
	case b != nil:
		var err error
		if er, err = s.promote(r, b); err != nil {
			return err
		}
		delete(s.resumed, r.ID) // a new handle, held until attached
	case old != nil && old.hosted[r.ID] != nil:
		// Still its primary: a group change under a new epoch needs
		// nothing here (dead backups were dropped by the shipper already;
		// the commands' epoch stays the stream's).
		er = old.hosted[r.ID]
		if attached && !sameSet(p.group, r.Group()) {
			// Backups joined or left: re-attach (attachLocked quiesces the
			// region, retires the old stream, seeds the joining ones).
			attached = false
		}
	default:
		var err error
		er, _, err = s.vol.OpenRegion(engine.RegionDesc{ID: r.ID, Epoch: r.Epoch})
		if err == nil && er.IsBackup() {
			// Named primary while it was down: its buffer is gone, its
			// adopted log is what it has.
			s.log.Warn("promoting a backup region without its buffer", zap.Uint64("region", r.ID), zap.Uint64("epoch", r.Epoch))
			er, err = s.vol.PromoteBackup(r.ID, r.Epoch, nil)
			s.markPromoted(r.ID)
			delete(s.resumed, r.ID)
		}
		if err != nil {
			return fmt.Errorf("open: %w", err)
		}
	}
	if !attached && (len(r.Group()) > 0 || p != nil) { // p: a stream to retire (an emptied group)
		next.attaching[r.ID] = true
	}
	next.hosted[r.ID] = er
	if !next.attaching[r.ID] {
		er.Resume()
		s.resumed[r.ID] = true
	}
	return nil
}

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// attachAll attaches replication to the hosted regions that wait for it.
func (s *Server) attachAll() error {
	s.mapMu.Lock()
	defer s.mapMu.Unlock()
	return s.attachLocked()
}

// attachLocked attaches the waiting regions, then publishes routing
// without them in attaching. Called with mapMu held.
func (s *Server) attachLocked() error {
	st := s.state.Load()
	if len(st.attaching) == 0 {
		return nil
	}
	still := map[uint64]bool{}
	var errs []error
	// Regions not serving yet (promoted, just opened) first: they wait for
	// nothing, while a serving one's quiesce may wait for a compaction
	// stuck on a hung backup.
	ids := make([]uint64, 0, len(st.attaching))
	for id := range st.attaching {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uint64) int {
		if s.resumed[a] != s.resumed[b] {
			if s.resumed[b] {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	for _, id := range ids {
		r := st.m.Region(id)
		er := st.hosted[id]
		var release func()
		if s.resumed[id] {
			// A serving region (its group changed, or its attach is
			// retried): make it still and end the old stream.
			var err error
			if release, err = er.Quiesce(); err != nil {
				still[id] = true
				errs = append(errs, fmt.Errorf("region: quiesce region %d: %w", id, err))
				continue
			}
			s.retire(id)
		}
		if len(r.Group()) == 0 {
			// The master left it without backups: it serves alone.
			if release != nil {
				release()
			}
			er.Resume()
			s.resumed[id] = true
			s.log.Warn("region has no backups left: serving without replication", zap.Uint64("region", id), zap.Uint64("epoch", r.Epoch))
			continue
		}
		p, err := s.attach(st.m, *r, er)
		if release != nil {
			release()
		}
		if err != nil {
			still[id] = true
			errs = append(errs, fmt.Errorf("region: attach replication of region %d: %w", id, err))
			continue
		}
		s.replMu.Lock()
		s.primaries[id] = p
		s.replMu.Unlock()
		er.Resume()
		s.resumed[id] = true
		s.reportJoins(*r, p)
	}
	next := *st
	next.attaching = still
	s.state.Store(&next)
	return errors.Join(errs...)
}

// reattach retries, every second, the regions whose replication could not
// attach (they stay unavailable meanwhile), until the server closes.
func (s *Server) reattach(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if len(s.state.Load().attaching) == 0 {
			continue
		}
		s.mapMu.Lock()
		if err := s.attachLocked(); err != nil {
			s.log.Warn("regions still waiting for their backups", zap.Error(err))
		}
		s.mapMu.Unlock()
	}
}

// drainReplCQ logs the disconnects of primaries' mirror connections.
func (s *Server) drainReplCQ(ctx context.Context) {
	buf := make([]rdma.Completion, 16)
	for {
		n, err := s.replCQ.Wait(ctx, buf)
		if err != nil {
			return
		}
		for _, c := range buf[:n] {
			if c.Op == rdma.OpDisconnect {
				s.log.Info("a primary's replication connection closed", zap.Error(c.Err))
			}
		}
	}
}

// MapVersion is the version of the map being served.
func (s *Server) MapVersion() uint64 { return s.state.Load().m.Version }

func (s *Server) listen() error {
	handlers := s.handlers()
	for _, l := range []struct {
		tr   rdma.Transport
		addr string
	}{{&rdma.Shm{}, s.cfg.Shm}, {&rdma.TCP{}, s.cfg.TCP}} {
		if l.addr == "" {
			continue
		}
		rs, err := ring.Listen(ring.ServerConfig{
			Transport: l.tr, Addr: l.addr, Handlers: handlers,
			Spinners: s.cfg.Spinners, Workers: s.cfg.Workers, SpinTime: time.Duration(s.cfg.SpinTime),
			MaxInflight: s.cfg.MaxInflight, Log: s.log.Named(l.tr.Name()), Other: s.otherConn,
		})
		if err != nil {
			return fmt.Errorf("region: listen %s %s: %w", l.tr.Name(), l.addr, err)
		}
		s.rings = append(s.rings, rs)
	}
	return nil
}

// Addrs are the addresses actually listened on, by transport.
func (s *Server) Addrs() map[string]string {
	out := map[string]string{}
	for i, rs := range s.rings {
		name := "shm"
		if s.cfg.Shm == "" || i == 1 {
			name = "tcp"
		}
		out[name] = rs.Addr()
	}
	return out
}

// Close stops serving (connections close, in-flight requests finish), then
// syncs every region and closes the volume.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	for _, rs := range s.rings {
		rs.Close()
	}
	s.flushPrimaries()
	s.leaveCluster()
	s.replRing.Close()
	s.closeReplication()
	if s.replStop != nil {
		s.replStop()
	}
	var errs []error
	if st := s.state.Load(); st != nil {
		for _, r := range st.hosted {
			if err := r.Sync(); err != nil && !errors.Is(err, engine.ErrClosed) {
				errs = append(errs, err)
			}
		}
	}
	if err := s.vol.Close(); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("region server stopped")
	return errors.Join(errs...)
}

// CheckMap validates cfg's region map file (if any) against cfg: the file
// parses and lists this server.
func CheckMap(cfg Config) error {
	s := &Server{cfg: cfg}
	_, err := s.loadMap()
	return err
}
