package region

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/metrics"
	"github.com/tebis-go/tebis/internal/pki"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
)

// Server is a running region server.
type Server struct {
	cfg  Config
	deps deps // Start's options
	log  *zap.Logger
	vol  *engine.Volume
	tls  *tls.Config // the tcp transport's, both ways; nil: plaintext

	state atomic.Pointer[routing]
	mapMu sync.Mutex // serializes map changes
	rings []*ring.Server
	// listeners are rings by transport name (shm, tcp), published once
	// listen returns (read by the metrics, which answer from before).
	listeners atomic.Pointer[map[string]*ring.Server]
	// registry holds the server's metrics (metrics.go, collector.go),
	// served at /metrics; reqMetrics are the request path's.
	registry   *prometheus.Registry
	reqMetrics *requestMetrics
	closed     atomic.Bool
	ops        opsMeter // requests served per region (status.go)

	// replMu guards regions (regionstate.go: each region's role and
	// its data) and peers.
	replMu   sync.Mutex
	regions  map[uint64]*regionState
	peers    map[string]*ring.Client // command rings to backup servers, by address
	replCQ   *rdma.CQ
	replStop context.CancelFunc
	replRing *ring.Server // serves replication commands (their own workers)
	// attachWG counts the attaches' step 2 (attach.go), run without
	// mapMu; bg the pre-seeds' goroutines (preseed.go); bgCtx ends them
	// at Close.
	attachWG sync.WaitGroup
	bg       sync.WaitGroup
	bgCtx    context.Context

	// ctl is the goroutine that changes the server's roles
	// (controller.go); mapMu is held while it handles an event.
	ctl controller

	cluster *clusterLink // nil: standalone
	// lease is the read lease of a managed server's ZooKeeper session
	// (lease.go); nil: standalone, no lease.
	lease atomic.Pointer[coord.Lease]
	// health is the volume's health (health.go); fault the fault-fs
	// injector (faultfs.go), nil unless Config.FaultFS.
	health healthMon
	fault  *faultInjector
	// httpSrv serves the HTTP endpoints (http.go) on httpLn, at httpAddr;
	// nil: off. joined: a managed server's joinCluster returned (cluster
	// is set), for the endpoints, which answer from before it.
	httpSrv  *http.Server
	httpLn   net.Listener
	httpAddr string
	joined   atomic.Bool
}

// Start opens the volume, loads the map and starts listening; opts
// replace what it would reach outside cfg (options.go).
func Start(cfg Config, log *zap.Logger, opts ...Option) (_ *Server, err error) {
	var d deps
	for _, o := range opts {
		o(&d)
	}
	defer func() {
		if err != nil && d.coord != nil {
			d.coord.Close() // the server owns it (WithCoordinator)
		}
	}()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if d.coord != nil && cfg.Zookeeper == "" {
		return nil, fmt.Errorf("%w: a coordinator given to a standalone server (zookeeper is empty)", ErrConfig)
	}
	tlsCfg, err := pki.Load(cfg.tlsFiles())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if log == nil {
		log = zap.NewNop()
	}
	if tlsCfg == nil && cfg.TCP != "" && plaintextExposed(cfg.TCP) {
		log.Warn("tcp listens beyond loopback without TLS: anyone who reaches it can read and write every key (set tls_cert, tls_key and tls_ca)", zap.String("tcp", cfg.TCP))
	}
	fs, fault := d.fs, (*faultInjector)(nil)
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("region: data dir: %w", err)
	}
	mode := engine.SyncModeSync
	if cfg.SyncMode == "async" {
		mode = engine.SyncModeAsync
	}
	if cfg.UnsafeLoneAck {
		log.Warn("UNSAFE: a primary without backups acknowledges writes as the sync mode says, without its own fdatasync (--unsafe-lone-ack): in async mode its crash loses acknowledged writes")
	}
	if cfg.FaultFS {
		fault = newFaultInjector(cfg.DataDir, log.Named("fault-fs"))
		fs = newFaultFS(fs, fault)
	}
	vol, err := engine.Open(engine.Options{
		FS: fs, GrowStep: int64(cfg.GrowStep), SpaceReserve: spaceReserve(cfg.SpaceReserve),
		Dir: cfg.DataDir, SegmentSize: int64(cfg.SegmentSize), L0Pairs: cfg.L0Pairs, GrowthFactor: cfg.GrowthFactor,
		SyncMode: mode, CacheBytes: int64(cfg.CacheSize), CompactionBypassCache: cfg.CompactionBypassCache,
		BufferedReplicaWrites: cfg.BufferedReplicaWrites, Logger: log.Named("engine"),
		// A region replicating to backups starts compacting only once they
		// are attached (install, attachLocked).
		HoldBackground: true,
	})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, deps: d, log: log, vol: vol, tls: tlsCfg, regions: map[uint64]*regionState{},
		peers: map[string]*ring.Client{}, replCQ: rdma.NewCQ(), fault: fault}
	s.health.kick = make(chan struct{}, 1)
	s.reqMetrics = newRequestMetrics()
	s.registry = metrics.NewRegistry()
	s.registry.MustRegister(s.reqMetrics, serverCollector{s})
	s.replRing = ring.NewServer(ring.ServerConfig{Handlers: map[uint16]ring.HandlerFunc{wire.TypeReplicate: s.handleReplicate},
		Spinners: 1, Workers: 4, SpinTime: time.Duration(cfg.SpinTime), Log: log.Named("replication-ring")})
	var ctx context.Context
	ctx, s.replStop = context.WithCancel(context.Background())
	s.bgCtx = ctx
	go s.drainReplCQ(ctx)
	s.startController()
	// Probes answer from here on: not ready while the map loads, the
	// server registers, or its regions attach.
	err = s.serveHTTP()
	var m *regionmap.Map
	switch {
	case err != nil:
	case cfg.Zookeeper != "":
		// Managed: nothing is served until the master's map arrives.
		m = &regionmap.Map{}
		s.state.Store(newRouting(m, nil))
		err = s.listen()
		if err == nil {
			err = s.joinCluster()
		}
		s.joined.Store(err == nil)
	default:
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
		s.health.wg.Add(1)
		go s.watchHealth(ctx)
		if fault != nil {
			s.health.wg.Add(1)
			go func() {
				defer s.health.wg.Done()
				fault.poll(ctx)
			}()
		}
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	log.Info("region server started", zap.String("name", cfg.Name), zap.String("shm", cfg.Shm), zap.String("tcp", cfg.TCP), zap.Bool("tls", tlsCfg != nil),
		zap.Uint64("map_version", m.Version), zap.Int("regions", len(s.state.Load().hostedIDs())))
	return s, nil
}

// spaceReserve is the engine's SpaceReserve for the configured one (0:
// none).
func spaceReserve(b ByteSize) int64 {
	if b == 0 {
		return -1
	}
	return int64(b)
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
// It returns once every region waiting for its backups is attached or
// failed to.
func (s *Server) Reload() error {
	m, err := s.loadMap()
	if err != nil {
		return err
	}
	return s.install(m)
}

// drainReplCQ watches the disconnects of primaries' mirror connections:
// one that ended without a goodbye may be its primary's death
// (primaryLost).
func (s *Server) drainReplCQ(ctx context.Context) {
	buf := make([]rdma.Completion, 16)
	for {
		n, err := s.replCQ.Wait(ctx, buf)
		if err != nil {
			return
		}
		for _, c := range buf[:n] {
			if c.Op != rdma.OpDisconnect {
				continue
			}
			if errors.Is(c.Err, rdma.ErrPeerLost) {
				s.log.Info("a primary's replication connection was lost", zap.Error(c.Err))
				s.primaryLost(c.QP)
				continue
			}
			s.log.Info("a primary's replication connection closed", zap.Error(c.Err))
		}
	}
}

// MapVersion is the version of the map being served.
func (s *Server) MapVersion() uint64 { return s.state.Load().m.Version }

func (s *Server) listen() error {
	handlers, short := s.handlers(), s.shortHandlers()
	defer func() {
		named := map[string]*ring.Server{}
		for i, rs := range s.rings {
			named[s.ringName(i)] = rs
		}
		s.listeners.Store(&named)
	}()
	refused := func(err error) { s.log.Warn("connection refused: peer not authenticated", zap.Error(err)) }
	var shm, tcp rdma.Transport = &rdma.Shm{PeerUIDs: s.cfg.shmPeerUIDs(uint32(os.Getuid())), OnRefused: refused},
		&rdma.TCP{TLS: s.tls, OnRefused: refused}
	if s.deps.listen != nil {
		shm, tcp = s.deps.listen, s.deps.listen
	}
	for _, l := range []struct {
		tr   rdma.Transport
		addr string
	}{{shm, s.cfg.Shm}, {tcp, s.cfg.TCP}} {
		if l.addr == "" {
			continue
		}
		rs, err := ring.Listen(ring.ServerConfig{
			Transport: l.tr, Addr: l.addr, Handlers: handlers, Short: short,
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
		out[s.ringName(i)] = rs.Addr()
	}
	return out
}

// ringName is the transport of s.rings[i]: shm's listener comes first.
func (s *Server) ringName(i int) string {
	if s.cfg.Shm == "" || i == 1 {
		return "tcp"
	}
	return "shm"
}

// Close stops serving (connections close, in-flight requests finish), then
// syncs every region and closes the volume.
func (s *Server) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.closeHTTP()
	for _, rs := range s.rings {
		rs.Close()
	}
	if s.replStop != nil {
		s.replStop() // no reattach from now on
	}
	// An install or attach in progress ends first (later ones see closed).
	aborted := make(chan struct{})
	if s.submit(abortEvent{done: aborted}) {
		<-aborted
	}
	s.attachWG.Wait()  // attaches' step 2 (cancelled; their step 3 runs on the controller)
	s.bg.Wait()        // pre-seeds (their context ended with replStop)
	s.health.wg.Wait() // the health monitor (a step-down ends with replStop)
	s.flushPrimaries()
	s.leaveCluster()
	s.stopController() // nothing sends it events any more
	s.replRing.Close()
	s.closeReplication()
	if s.replStop != nil {
		s.replStop()
	}
	var errs []error
	if st := s.state.Load(); st != nil {
		for _, id := range st.hostedIDs() {
			if err := st.hosted(id).Sync(); err != nil && !errors.Is(err, engine.ErrClosed) {
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
