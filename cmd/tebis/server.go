package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tebis-go/tebis/region"
	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
)

// serverFlags mirror region.Config: every option of the file is a flag,
// and a flag given on the command line wins over the file.
func serverFlags() []cli.Flag {
	d := region.DefaultConfig()
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "YAML configuration file (flags given explicitly win)"},
		&cli.StringFlag{Name: "cpuprofile", Usage: "write a Go CPU profile of the server's life to this file"},
		&cli.StringFlag{Name: "name", Value: d.Name, Usage: "this server's name in the region map"},
		&cli.StringFlag{Name: "data-dir", Value: d.DataDir, Usage: "the volume's directory"},
		&cli.StringFlag{Name: "shm", Value: d.Shm, Usage: "unix socket path for the shm transport (empty: off)"},
		&cli.StringFlag{Name: "tcp", Value: d.TCP, Usage: "host:port for the tcp transport (empty: off)"},
		&cli.StringFlag{Name: "http", Value: d.HTTP, Usage: "host:port of the /healthz and /readyz endpoints (empty: off; they need no credentials: keep them on loopback or a private network)"},
		&cli.StringFlag{Name: "map-file", Usage: "standalone region map (YAML); empty: one region over all keys"},
		&cli.StringFlag{Name: "zookeeper", Usage: "ZooKeeper ensemble host:port[,host:port] of a managed cluster (instead of --map-file)"},
		&cli.StringFlag{Name: "zk-root", Value: d.ZKRoot, Usage: "the cluster's znode"},
		&cli.StringFlag{Name: "zk-auth-file", Usage: zkAuthFileUsage},
		&cli.DurationFlag{Name: "zk-session-timeout", Value: time.Duration(d.ZKSessionTimeout), Usage: "ZooKeeper session timeout: a server silent longer is failed over; twice it, a primary drops a hung backup (also standalone; 0: after the 30 s command timeout only)"},
		&cli.StringFlag{Name: "sync-mode", Value: d.SyncMode, Usage: "sync (durable before the reply) or async"},
		&cli.StringFlag{Name: "segment-size", Value: d.SegmentSize.String(), Usage: "segment size, with unit"},
		&cli.IntFlag{Name: "l0-pairs", Value: d.L0Pairs, Usage: "L0 capacity in pairs"},
		&cli.IntFlag{Name: "growth-factor", Value: d.GrowthFactor, Usage: "level growth factor"},
		&cli.BoolFlag{Name: "compaction-bypass-cache", Usage: "keep compaction I/O out of the OS page cache (as Kreon's direct I/O)"},
		&cli.BoolFlag{Name: "buffered-replica-writes", Usage: "write backup regions' data through the OS page cache (default: O_DIRECT, with segments of 2 MiB or more and 4 KiB pages, where the file system allows it)"},
		&cli.StringFlag{Name: "cache-size", Value: d.CacheSize.String(), Usage: "node cache budget, with unit"},
		&cli.StringFlag{Name: "max-key-size", Value: d.MaxKeySize.String(), Usage: "largest key, with unit"},
		&cli.StringFlag{Name: "max-value-size", Value: d.MaxValueSize.String(), Usage: "largest value, with unit"},
		&cli.IntFlag{Name: "spinners", Value: d.Spinners, Usage: "ring polling goroutines per transport"},
		&cli.IntFlag{Name: "workers", Value: d.Workers, Usage: "request workers per transport (sync puts hold one until their group commit)"},
		&cli.DurationFlag{Name: "spin-time", Value: time.Duration(d.SpinTime), Usage: "poller spin before parking"},
		&cli.IntFlag{Name: "max-inflight", Value: d.MaxInflight, Usage: "unanswered requests per connection"},
		&cli.StringFlag{Name: "replication-transport", Value: d.ReplicationTransport, Usage: "transport to backup servers: shm, tcp, or empty (shm when the backup has an address)"},
		&cli.DurationFlag{Name: "replication-connect", Value: time.Duration(d.ReplicationConnect), Usage: "how long a primary waits for a backup at start"},
		&cli.IntFlag{Name: "replication-credits", Value: d.ReplicationCredits, Usage: "index segments queued per backup (Send-Index flow control)"},
		&cli.StringFlag{Name: "grow-step", Value: d.GrowStep.String(), Usage: "how far the segment file grows at a time, with unit"},
		&cli.StringFlag{Name: "space-reserve", Value: d.SpaceReserve.String(), Usage: "free space the segment file leaves the metadata store (0B: none), with unit"},
		&cli.StringFlag{Name: "tls-cert", Usage: "PEM certificate of this server: with --tls-key and --tls-ca, mutual TLS on tcp for clients and replication (`tebis certs` makes a dev set)"},
		&cli.StringFlag{Name: "tls-key", Usage: "PEM private key of --tls-cert"},
		&cli.StringFlag{Name: "tls-ca", Usage: "PEM CA certificate that signs the clients and servers allowed on tcp"},
		&cli.StringFlag{Name: "shm-allow-uids", Usage: "comma-separated uids allowed to connect over shm besides this server's own and root"},
		// Benchmarking only (docs/operations.md, "Benchmarking: --unsafe-lone-ack").
		&cli.BoolFlag{Name: "unsafe-lone-ack", Hidden: true, Usage: "UNSAFE: a primary without backups acknowledges async writes from memory (a crash loses them); for measuring No-Replication"},
		// Testing only (docs/operations.md, "Fault injection").
		&cli.BoolFlag{Name: "fault-fs", Hidden: true, Usage: "fail the volume's I/O as the file FAULT in the data dir says (eio, eio-segments, eio-all, off)"},
	}
}

// serverConfig builds the configuration: defaults, then the file, then
// the flags set explicitly.
func serverConfig(c *cli.Context) (region.Config, error) {
	cfg := region.DefaultConfig()
	if path := c.String("config"); path != "" {
		var err error
		if cfg, err = region.LoadConfig(path); err != nil {
			return cfg, err
		}
	}
	str := map[string]*string{"name": &cfg.Name, "data-dir": &cfg.DataDir, "shm": &cfg.Shm, "tcp": &cfg.TCP, "http": &cfg.HTTP, "map-file": &cfg.MapFile, "zookeeper": &cfg.Zookeeper, "zk-root": &cfg.ZKRoot, "zk-auth-file": &cfg.ZKAuthFile, "sync-mode": &cfg.SyncMode, "replication-transport": &cfg.ReplicationTransport,
		"tls-cert": &cfg.TLSCert, "tls-key": &cfg.TLSKey, "tls-ca": &cfg.TLSCA}
	for name, p := range str {
		if c.IsSet(name) || c.String("config") == "" {
			*p = c.String(name)
		}
	}
	ints := map[string]*int{"l0-pairs": &cfg.L0Pairs, "growth-factor": &cfg.GrowthFactor, "spinners": &cfg.Spinners, "workers": &cfg.Workers, "max-inflight": &cfg.MaxInflight, "replication-credits": &cfg.ReplicationCredits}
	for name, p := range ints {
		if c.IsSet(name) || c.String("config") == "" {
			*p = c.Int(name)
		}
	}
	sizes := map[string]*region.ByteSize{"segment-size": &cfg.SegmentSize, "cache-size": &cfg.CacheSize, "max-key-size": &cfg.MaxKeySize, "max-value-size": &cfg.MaxValueSize,
		"grow-step": &cfg.GrowStep, "space-reserve": &cfg.SpaceReserve}
	for name, p := range sizes {
		if c.IsSet(name) || c.String("config") == "" {
			if err := p.Set(c.String(name)); err != nil {
				return cfg, fmt.Errorf("--%s: %w", name, err)
			}
		}
	}
	if c.IsSet("compaction-bypass-cache") || c.String("config") == "" {
		cfg.CompactionBypassCache = c.Bool("compaction-bypass-cache")
	}
	if c.IsSet("buffered-replica-writes") || c.String("config") == "" {
		cfg.BufferedReplicaWrites = c.Bool("buffered-replica-writes")
	}
	if c.IsSet("spin-time") || c.String("config") == "" {
		cfg.SpinTime = region.Duration(c.Duration("spin-time"))
	}
	if c.IsSet("zk-session-timeout") || c.String("config") == "" {
		cfg.ZKSessionTimeout = region.Duration(c.Duration("zk-session-timeout"))
	}
	if c.IsSet("replication-connect") || c.String("config") == "" {
		cfg.ReplicationConnect = region.Duration(c.Duration("replication-connect"))
	}
	if c.IsSet("shm-allow-uids") || c.String("config") == "" {
		uids, err := parseUIDs(c.String("shm-allow-uids"))
		if err != nil {
			return cfg, fmt.Errorf("--shm-allow-uids: %w", err)
		}
		cfg.ShmAllowUIDs = uids
	}
	cfg.FaultFS = c.Bool("fault-fs")
	cfg.UnsafeLoneAck = c.Bool("unsafe-lone-ack")
	return cfg, cfg.Validate()
}

// parseUIDs reads a comma-separated list of uids ("": none).
func parseUIDs(s string) ([]uint32, error) {
	var out []uint32
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		u, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%q is not a uid", f)
		}
		out = append(out, uint32(u))
	}
	return out, nil
}

func serverCommand() *cli.Command {
	return &cli.Command{
		Name:  "server",
		Usage: "run a region server (standalone: regions from --map-file, or one region over all keys)",
		Flags: serverFlags(),
		Action: func(c *cli.Context) error {
			log, err := newLogger(c)
			if err != nil {
				return err
			}
			defer func() { _ = log.Sync() }()
			cfg, err := serverConfig(c)
			if err != nil {
				return err
			}
			stopProfile, err := startCPUProfile(c.String("cpuprofile"))
			if err != nil {
				return err
			}
			defer stopProfile()
			// Before Start: a SIGHUP during recovery must not kill us.
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			s, err := region.Start(cfg, log)
			if err != nil {
				return err
			}
			for {
				select {
				case <-hup:
					if err := s.Reload(); err != nil {
						log.Error("reloading the region map failed; keeping the old one", zap.Error(err))
					}
				case <-c.Context.Done():
					log.Info("shutting down: stop serving, sync, close")
					return s.Close()
				}
			}
		},
	}
}

func configCommand() *cli.Command {
	return &cli.Command{
		Name:  "config",
		Usage: "configuration files",
		Subcommands: []*cli.Command{{
			Name:      "check",
			Usage:     "validate a server configuration file (and its region map)",
			ArgsUsage: "FILE",
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fmt.Errorf("usage: tebis config check FILE")
				}
				cfg, err := region.LoadConfig(c.Args().First())
				if err != nil {
					return err
				}
				if err := region.CheckMap(cfg); err != nil {
					return err
				}
				fmt.Printf("%s: ok (server %s, data %s, shm %q, tcp %q, tls %v)\n", c.Args().First(), cfg.Name, cfg.DataDir, cfg.Shm, cfg.TCP, cfg.TLSCert != "")
				return nil
			},
		}},
	}
}
