package region

import (
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
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

// TestFailedStaticInstallLeavesNoRole: a static map's install stops at its
// first failing step and publishes nothing; the regions it had already
// carried out (region 2: open, serve alone) must not be left primaries
// that routing does not serve, or the next map that keeps them would
// find no handle and leave them unserved at its version.
func TestFailedStaticInstallLeavesNoRole(t *testing.T) {
	dir := t.TempDir()
	s, _ := loneServer(t, dir, nil)
	// Region 3 sits in the volume as a Send-Index backup: a Build-Index
	// map naming this server its backup cannot open it.
	if _, err := s.vol.CreateBackupRegion(engine.RegionDesc{ID: 3, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	servers := []regionmap.Server{{Name: "p", Shm: filepath.Join(dir, "p.sock")}, {Name: "x", Shm: filepath.Join(dir, "x.sock")}}
	m2 := &regionmap.Map{Version: 2, Replication: "build-index", Servers: servers,
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Epoch: 1}, {ID: 2, Primary: "p", Epoch: 1}, {ID: 3, Primary: "x", Backups: []string{"p"}, Epoch: 1}}}
	if err := s.install(m2); err == nil {
		t.Fatal("install of a map whose region 3 cannot open succeeded")
	}
	if err := s.CheckRoles(); err != nil {
		t.Errorf("after the failed install: %v", err)
	}
	m3 := &regionmap.Map{Version: 3, Replication: "build-index", Servers: servers,
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Epoch: 1}, {ID: 2, Primary: "p", Epoch: 1}}}
	if err := s.install(m3); err != nil {
		t.Fatalf("install of m3: %v", err)
	}
	if s.state.Load().hosted(2) == nil {
		t.Fatal("region 2 not served under the map after the failed one")
	}
	if err := s.CheckRoles(); err != nil {
		t.Error(err)
	}
}
