package region

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/pki"
	"github.com/tebis-go/tebis/rdma/ring"
)

// ErrConfig: a configuration value is missing or out of range.
var ErrConfig = errors.New("region: bad configuration")

// Config configures a region server. Every field has a flag of the same
// name (with dashes) in `tebis server`; sizes and durations carry units.
type Config struct {
	Name    string `yaml:"name"`     // this server's name in the region map
	DataDir string `yaml:"data_dir"` // the engine volume's directory
	Shm     string `yaml:"shm"`      // unix socket path to listen on ("": no shm)
	TCP     string `yaml:"tcp"`      // host:port to listen on ("": no tcp)
	// HTTP is the host:port of the /healthz and /readyz endpoints
	// (http.go; "": off).
	HTTP string `yaml:"http"`
	// MapFile is the standalone region map; "" serves one region over all
	// keys (id 1, this server primary).
	MapFile string `yaml:"map_file"`
	// Zookeeper is the ensemble ("host:port,host:port") of a managed
	// cluster: the server registers there and serves the master's region
	// map (MapFile must be empty).
	Zookeeper string `yaml:"zookeeper"`
	// ZKRoot is the cluster's znode.
	ZKRoot string `yaml:"zk_root"`
	// ZKAuthFile holds the cluster's ZooKeeper credential, user:password
	// ("": none; coord.Config.Auth): the server authenticates with it,
	// and the znodes it creates are that identity's only.
	ZKAuthFile string `yaml:"zk_auth_file"`
	// ZKSessionTimeout: a server silent for longer is declared failed.
	// It also sets how long a primary waits for a hung backup
	// (HungBackupAfter), standalone servers included.
	ZKSessionTimeout Duration `yaml:"zk_session_timeout"`

	SyncMode     string   `yaml:"sync_mode"` // sync (durable before the reply) or async
	SegmentSize  ByteSize `yaml:"segment_size"`
	L0Pairs      int      `yaml:"l0_pairs"`
	GrowthFactor int      `yaml:"growth_factor"`
	CacheSize    ByteSize `yaml:"cache_size"`
	// CompactionBypassCache: engine.Options.CompactionBypassCache.
	CompactionBypassCache bool `yaml:"compaction_bypass_cache"`
	// BufferedReplicaWrites: engine.Options.BufferedReplicaWrites.
	BufferedReplicaWrites bool `yaml:"buffered_replica_writes"`

	MaxKeySize   ByteSize `yaml:"max_key_size"`
	MaxValueSize ByteSize `yaml:"max_value_size"`

	Spinners int `yaml:"spinners"`
	// Workers run requests; a sync put holds its worker until its group
	// commit, so more workers than cores keep commits large.
	Workers     int      `yaml:"workers"`
	SpinTime    Duration `yaml:"spin_time"`
	MaxInflight int      `yaml:"max_inflight"` // per connection

	// ReplicationTransport reaches backup servers: shm, tcp, or "" (shm
	// when the backup has a shm address).
	ReplicationTransport string `yaml:"replication_transport"`
	// ReplicationConnect bounds how long a primary waits for a backup at
	// start before replicating without it.
	ReplicationConnect Duration `yaml:"replication_connect"`
	// ReplicationCredits bounds the index segments queued per backup.
	ReplicationCredits int `yaml:"replication_credits"`

	// GrowStep is how far the volume's segment file grows at a time.
	GrowStep ByteSize `yaml:"grow_step"`
	// SpaceReserve is the free space the segment file's growth leaves the
	// file system (for the metadata store): growing further fails as a
	// full disk, which the server survives (docs/operations.md). 0: none.
	SpaceReserve ByteSize `yaml:"space_reserve"`

	// TLSCert, TLSKey and TLSCA (PEM files, all three or none) turn on
	// mutual TLS on the tcp transport: clients and other servers must
	// present a certificate TLSCA signed, and this server presents
	// TLSCert to them and to the backups it dials (docs/operations.md,
	// "TLS and peer authentication"). None: plaintext.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	TLSCA   string `yaml:"tls_ca"`
	// ShmAllowUIDs are users whose processes may connect over shm besides
	// the server's own user and root.
	ShmAllowUIDs []uint32 `yaml:"shm_allow_uids"`

	// FaultFS wraps the volume's file system in a fault injector driven by
	// the control file FaultFile in DataDir (faultfs.go): a testing
	// feature (the hidden flag --fault-fs), not a configuration key.
	FaultFS bool `yaml:"-"`
	// UnsafeLoneAck makes a primary with no backup acknowledge as the sync
	// mode says, without the fdatasync a lone primary otherwise makes
	// before every acknowledgement (replication.Alone.Unsafe): in async
	// mode its crash loses acknowledged writes. A benchmarking feature
	// (the hidden flag --unsafe-lone-ack: the paper's No-Replication), not
	// a configuration key.
	UnsafeLoneAck bool `yaml:"-"`
}

// DefaultConfig is what an empty configuration file means.
func DefaultConfig() Config {
	return Config{
		Name:         "rs1",
		DataDir:      "data",
		TCP:          "127.0.0.1:7070",
		SyncMode:     "sync",
		SegmentSize:  engine.DefaultSegmentSize,
		L0Pairs:      96 << 10,
		GrowthFactor: 4,
		CacheSize:    64 << 20,
		MaxKeySize:   engine.MaxKeySize,
		MaxValueSize: 64 << 10,
		Spinners:     1,
		Workers:      16,
		SpinTime:     Duration(ring.DefaultSpin),
		MaxInflight:  256,

		ZKRoot:           "/tebis",
		ZKSessionTimeout: Duration(2 * time.Second),

		ReplicationConnect: Duration(30 * time.Second),
		ReplicationCredits: 4,

		GrowStep:     32 << 20,
		SpaceReserve: engine.DefaultSpaceReserve,
	}
}

// HungBackupAfter is how long a primary's stream waits for a backup whose
// outstanding commands or log WRITEs complete nothing before it drops the
// backup as hung (replication.ShipperConfig.HungAfter): twice
// ZKSessionTimeout, 4 s by default. A stopped backup costs its region's
// writes no more than about twice what its ZooKeeper session would: its
// session expires after one timeout and the master redoes the group, and
// one more is the slack a live but slow backup gets (a command is disk
// I/O on a loaded machine, which a session's heartbeat is not). Zero (a
// zero or negative timeout) or 30 s and more: no hang detection, the 30 s
// command timeout alone.
func (c *Config) HungBackupAfter() time.Duration {
	return max(2*time.Duration(c.ZKSessionTimeout), 0)
}

// LoadConfig reads a YAML configuration over the defaults. Unknown keys
// are errors.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("%w: %s: %w", ErrConfig, path, err)
	}
	return cfg, cfg.Validate()
}

// Validate checks every field.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.Name == "":
		return bad("name is empty")
	case c.DataDir == "":
		return bad("data_dir is empty")
	case c.Shm == "" && c.TCP == "":
		return bad("neither shm nor tcp is set: the server would not listen")
	case c.SyncMode != "sync" && c.SyncMode != "async":
		return bad("sync_mode %q: want sync or async", c.SyncMode)
	case c.SegmentSize < 64<<10 || c.SegmentSize > 1<<30 || c.SegmentSize&(c.SegmentSize-1) != 0:
		return bad("segment_size %v: want a power of two from 64KiB to 1GiB", c.SegmentSize)
	case c.L0Pairs < 16:
		return bad("l0_pairs %d: want at least 16", c.L0Pairs)
	case c.GrowthFactor < 2:
		return bad("growth_factor %d: want at least 2", c.GrowthFactor)
	case c.CacheSize < 0:
		return bad("cache_size %v is negative", c.CacheSize)
	case c.MaxKeySize < 1 || c.MaxKeySize > engine.MaxKeySize:
		return bad("max_key_size %v: want 1B to %v", c.MaxKeySize, ByteSize(engine.MaxKeySize))
	case c.MaxValueSize < 0 || c.MaxValueSize > engine.MaxValueSize:
		return bad("max_value_size %v: want 0B to %v", c.MaxValueSize, ByteSize(engine.MaxValueSize))
	case c.Spinners < 1 || c.Spinners > 64:
		return bad("spinners %d: want 1 to 64", c.Spinners)
	case c.Workers < 1 || c.Workers > 1024:
		return bad("workers %d: want 1 to 1024", c.Workers)
	case c.SpinTime < 0 || time.Duration(c.SpinTime) > time.Second:
		return bad("spin_time %v: want 0 to 1s", c.SpinTime)
	case c.MaxInflight < 1:
		return bad("max_inflight %d: want at least 1", c.MaxInflight)
	case c.ReplicationTransport != "" && c.ReplicationTransport != "shm" && c.ReplicationTransport != "tcp":
		return bad("replication_transport %q: want shm, tcp or empty", c.ReplicationTransport)
	case c.ReplicationConnect <= 0:
		return bad("replication_connect %v: want more than 0", c.ReplicationConnect)
	case c.Zookeeper != "" && c.MapFile != "":
		return bad("zookeeper and map_file are both set: a server takes its map from one")
	case c.ZKAuthFile != "" && c.Zookeeper == "":
		return bad("zk_auth_file is set without zookeeper")
	case c.Zookeeper != "" && (c.ZKRoot == "" || c.ZKRoot[0] != '/'):
		return bad("zk_root %q: want an absolute znode path", c.ZKRoot)
	case c.Zookeeper != "" && (c.ZKSessionTimeout < Duration(100*time.Millisecond) || c.ZKSessionTimeout > Duration(time.Minute)):
		return bad("zk_session_timeout %v: want 100ms to 1m", c.ZKSessionTimeout)
	case c.ReplicationCredits < 1:
		return bad("replication_credits %d: want at least 1", c.ReplicationCredits)
	case c.GrowStep < 64<<10 || c.GrowStep > 4<<30:
		return bad("grow_step %v: want 64KiB to 4GiB", c.GrowStep)
	case c.SpaceReserve < 0:
		return bad("space_reserve %v is negative", c.SpaceReserve)
	}
	if err := c.tlsFiles().Check(); err != nil {
		return bad("tls_cert, tls_key and tls_ca: %v", err)
	}
	return nil
}

// tlsFiles are the TLS keys' files.
func (c *Config) tlsFiles() pki.Files {
	return pki.Files{Cert: c.TLSCert, Key: c.TLSKey, CA: c.TLSCA}
}

// shmPeerUIDs are the uids the shm listener admits: this process's,
// root's and ShmAllowUIDs.
func (c *Config) shmPeerUIDs(self uint32) []uint32 {
	uids := append([]uint32{self, 0}, c.ShmAllowUIDs...)
	slices.Sort(uids)
	return slices.Compact(uids)
}

// plaintextExposed says whether a tcp listen address without TLS may be
// reached from other hosts: it is not a loopback address or "localhost".
func plaintextExposed(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}
