package zkserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Timing of every server: tickTime is ZooKeeper's time unit; sessions
// may last from minSessionTimeout (2 ticks) to Config.MaxSessionTimeout.
const (
	tickTime                 = 200 * time.Millisecond
	minSessionTimeout        = 2 * tickTime
	defaultMaxSessionTimeout = 20 * time.Second
	initLimit                = 50 // ticks (10 s) for a follower to sync at start, generous for slow CI
	syncLimit                = 10 // ticks (2 s) a follower may lag before the leader drops it
)

// Config describes one standalone server.
type Config struct {
	// Dir holds zoo.cfg, the data directory (data/) and the JVM's output
	// (zk.log); it is created if missing. Starting again with the Dir (and
	// Port) of a stopped server restarts it with its data.
	Dir string
	// Port is the client port on 127.0.0.1; 0 picks a free one (and picks
	// again if the JVM then fails to bind it).
	Port int
	// MaxSessionTimeout caps the session timeout clients may negotiate;
	// 0 means 20 s. It must be at least 400 ms (the minimum, 2 ticks).
	MaxSessionTimeout time.Duration
	// Log, if set, receives start and stop events.
	Log *zap.Logger
}

// peer is a server's place in an ensemble: its myid and the server.N
// lines shared by all members.
type peer struct {
	id      int
	servers []string
}

// loopback is where Start's servers, and ensemble members without a
// Host, listen.
const loopback = "127.0.0.1"

// launch is everything spawn needs to start (or start again) one JVM.
type launch struct {
	dir        string
	host       string // the client address; a peer's server.N line names it too
	port       int    // the client port
	wrap       []string
	maxSession time.Duration
	peer       *peer // nil for a standalone server
	log        *zap.Logger
}

func (c Config) logger() *zap.Logger {
	if c.Log == nil {
		return zap.NewNop()
	}
	return c.Log
}

func (c Config) maxSession() time.Duration {
	if c.MaxSessionTimeout == 0 {
		return defaultMaxSessionTimeout
	}
	return c.MaxSessionTimeout
}

func (c Config) validate() error {
	if c.Dir == "" {
		return fmt.Errorf("zkserver: config has no Dir")
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("zkserver: bad port %d", c.Port)
	}
	if c.maxSession() < minSessionTimeout {
		return fmt.Errorf("zkserver: max session timeout %v below the minimum %v", c.MaxSessionTimeout, minSessionTimeout)
	}
	return nil
}

// writeConfig writes l.dir/zoo.cfg (and for a peer, data/myid) and
// returns the zoo.cfg path. Keys ZooKeeper does not know
// (4lw.commands.whitelist, admin.enableServer, forceSync) become
// zookeeper.* system properties.
func writeConfig(l launch) (string, error) {
	data := filepath.Join(l.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", fmt.Errorf("zkserver: %w", err)
	}
	lines := []string{
		"tickTime=" + ms(tickTime),
		"initLimit=" + fmt.Sprint(initLimit),
		"syncLimit=" + fmt.Sprint(syncLimit),
		"dataDir=" + data,
		"clientPortAddress=" + l.host,
		"clientPort=" + fmt.Sprint(l.port),
		"minSessionTimeout=" + ms(minSessionTimeout),
		"maxSessionTimeout=" + ms(l.maxSession),
		"4lw.commands.whitelist=*",
		"admin.enableServer=false",
		// No fsync per write: tests and demos need speed, and a killed
		// JVM's writes survive in the page cache anyway.
		"forceSync=no",
	}
	if p := l.peer; p != nil {
		lines = append(lines, p.servers...)
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(fmt.Sprintln(p.id)), 0o644); err != nil {
			return "", fmt.Errorf("zkserver: %w", err)
		}
	}
	cfg := filepath.Join(l.dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("zkserver: %w", err)
	}
	return cfg, nil
}

func ms(d time.Duration) string { return fmt.Sprint(d.Milliseconds()) }

// freePorts returns n distinct ports free on 127.0.0.1 right now: all n
// listeners are held open until the last is picked so none repeats. A
// port may still be taken before the JVM binds it; callers retry then.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", loopback+":0")
		if err != nil {
			return nil, fmt.Errorf("zkserver: pick a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
