package region

import (
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
)

// pairMap is a static map of region 1 with primary p and backup b, over
// shm sockets in dir.
func pairMap(dir string) *regionmap.Map {
	return &regionmap.Map{Version: 1, Replication: "send-index",
		Servers: []regionmap.Server{{Name: "p", Shm: filepath.Join(dir, "p.sock")}, {Name: "b", Shm: filepath.Join(dir, "b.sock")}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Backups: []string{"b"}, Epoch: 1}}}
}

// staticServers writes m as the map file of in-process servers in dir and
// returns a function starting the server of a name (64 KiB segments, an
// L0 of 64 pairs, async, connect as ReplicationConnect); each is closed
// at the test's end (closing it earlier is fine).
func staticServers(t *testing.T, dir string, m *regionmap.Map, connect time.Duration) func(name string) *Server {
	t.Helper()
	return staticServersWith(t, dir, m, connect, nil, nil)
}

// staticServersWith is staticServers whose servers also log to core (nil:
// only the test's log) and get their config through edit (nil: as is).
func staticServersWith(t *testing.T, dir string, m *regionmap.Map, connect time.Duration, core zapcore.Core, edit func(*Config)) func(name string) *Server {
	t.Helper()
	mapFile := filepath.Join(dir, "map.yaml")
	if err := regionmap.WriteFile(mapFile, m); err != nil {
		t.Fatal(err)
	}
	return func(name string) *Server {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Name, cfg.DataDir, cfg.TCP, cfg.Shm, cfg.MapFile = name, filepath.Join(dir, name), "", filepath.Join(dir, name+".sock"), mapFile
		cfg.SegmentSize, cfg.L0Pairs, cfg.SyncMode = 64<<10, 64, "async"
		cfg.ReplicationConnect = Duration(connect)
		if edit != nil {
			edit(&cfg)
		}
		log := zaptest.NewLogger(t)
		if core != nil {
			log = zap.New(zapcore.NewTee(log.Core(), core))
		}
		s, err := Start(cfg, log.Named(name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}
