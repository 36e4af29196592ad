package region

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/replication"
)

// restartedManaged is a managed server "b" (run 7) just restarted on vol:
// no map installed yet, not listening (install attaches nothing).
func restartedManaged(t *testing.T, vol *engine.Volume) *Server {
	cfg := DefaultConfig()
	cfg.Name = "b"
	s := &Server{cfg: cfg, log: zaptest.NewLogger(t), vol: vol,
		peers: map[string]*ring.Client{}, replCQ: rdma.NewCQ(), cluster: &clusterLink{logs: newLogReporter()}}
	s.cluster.started.Store(7)
	s.state.Store(newRouting(&regionmap.Map{}, nil))
	s.startController()
	t.Cleanup(s.stopController)
	return s
}

// serverVolumeOpts are the options of an in-memory volume in fs as a
// server opens its own (background work held until a region is attached),
// with helloSeg segments and an L0 of l0 pairs (0: the default).
func serverVolumeOpts(fs vfs.FS, l0 int) engine.Options {
	return engine.Options{FS: fs, Dir: "b", SegmentSize: helloSeg, L0Pairs: l0, SyncMode: engine.SyncModeAsync, GCInterval: -1, HoldBackground: true}
}

// serverVolume opens a new volume with serverVolumeOpts, closed at the
// test's end.
func serverVolume(t *testing.T, l0 int) *engine.Volume {
	t.Helper()
	vol, err := engine.Open(serverVolumeOpts(vfs.NewMem(), l0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vol.Close() })
	return vol
}

// namedPrimaryMap names b (run 7) primary of regions 1 and 2, alone, at
// epoch 5.
func namedPrimaryMap(replication string) *regionmap.Map {
	return &regionmap.Map{Version: 9, Replication: replication, Replicas: 2,
		Servers: []regionmap.Server{{Name: "b", Started: 7}},
		Regions: []regionmap.Assignment{
			{ID: 1, Primary: "b", Epoch: 5, End: "m"},
			{ID: 2, Primary: "b", Epoch: 5, Start: "m"}}}
}

// TestNamedPrimaryWithCopyNotServed: the master named this server primary
// of region 1 while it was down, and its disk holds region 1 as a backup's
// copy (the promotion was never installed). The copy lacks what its
// replication buffer held (the primary's newest acknowledged writes), so a
// managed server does not serve it: requests get UNAVAILABLE naming the
// incomplete copy. Serving it (as the server did, promoting the backup
// region without its buffer) lost those writes in the fault test's double
// failovers. Region 2, its own, serves. Both replication modes: a
// Send-Index backup region says so by its role, a Build-Index backup's
// ordinary region by the follower mark its backup role set (openBackup).
func TestNamedPrimaryWithCopyNotServed(t *testing.T) {
	for _, mode := range []string{"send-index", "build-index"} {
		t.Run(mode, func(t *testing.T) {
			// The server backs region 1 up (its backup role opens the
			// region as a copy) and is primary of region 2.
			fs := vfs.NewMem()
			opts := serverVolumeOpts(fs, 0)
			vol, err := engine.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			before := &regionmap.Map{Version: 8, Replication: mode, Replicas: 2,
				Servers: []regionmap.Server{{Name: "b", Started: 7}, {Name: "p", Started: 3}},
				Regions: []regionmap.Assignment{
					{ID: 1, Primary: "p", Backups: []string{"b"}, Epoch: 3, End: "m"},
					{ID: 2, Primary: "b", Epoch: 3, Start: "m"}}}
			s0 := restartedManaged(t, vol)
			if err := s0.install(before); err != nil {
				t.Fatal(err)
			}
			if err := s0.state.Load().hosted(2).Put([]byte("n1"), []byte("v")); err != nil {
				t.Fatal(err)
			}
			// Restarted: the replication buffer is gone with the process.
			for _, rs := range s0.regions {
				b := rs.backup
				if b == nil {
					continue
				}
				b.rep.Close()
				b.buf.Deregister()
			}
			if err := vol.Close(); err != nil {
				t.Fatal(err)
			}
			if vol, err = engine.Open(opts); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { vol.Close() })
			s := restartedManaged(t, vol)
			if err := s.install(namedPrimaryMap(mode)); err != nil {
				t.Fatal(err)
			}
			st := s.state.Load()
			if st.hosted(1) != nil {
				t.Fatal("region 1 served from a copy without its replication buffer")
			}
			if copied, err := vol.IsCopy(1); err != nil || !copied {
				t.Fatalf("region 1 no longer marked a copy (%v, %v): a later restart would serve it", copied, err)
			}
			_, _, reply := s.route(&ring.ServerRequest{Header: ring.Header{Region: 1}}, 9)
			if reply == nil || reply.Status != wire.StatusUnavailable || !strings.Contains(string(reply.Payload), "incomplete copy") {
				t.Fatalf("request to region 1: %+v, want UNAVAILABLE naming the incomplete copy", reply)
			}
			if st.hosted(2) == nil {
				t.Fatal("region 2, the server's own, not served")
			}
			// Deposing another region keeps the refusal (not WRONG_REGION
			// at the same version, which makes a client give up).
			if st.without([]uint64{2}).routes[1].how != routeIncomplete {
				t.Fatal("a depose of region 2 forgot region 1's incomplete copy")
			}
			if _, _, reply := s.route(&ring.ServerRequest{Header: ring.Header{Region: 2}}, 9); reply != nil {
				t.Fatalf("request to region 2: %s", reply.Payload)
			}
		})
	}
}

// TestStaticMapPromotesCopy: a static map is the operator's word: a copy
// it names primary is served (promoted without its buffer), and is the
// server's own from then on.
func TestStaticMapPromotesCopy(t *testing.T) {
	vol := serverVolume(t, 0)
	if _, err := vol.CreateRegion(engine.RegionDesc{ID: 1, Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	if err := vol.SetFollower(1, true); err != nil {
		t.Fatal(err)
	}
	s := restartedManaged(t, vol)
	s.cluster = nil
	m := &regionmap.Map{Version: 9, Replication: "build-index", Servers: []regionmap.Server{{Name: "b"}}, Regions: []regionmap.Assignment{{ID: 1, Primary: "b", Epoch: 5}}}
	if err := s.install(m); err != nil {
		t.Fatal(err)
	}
	if s.state.Load().hosted(1) == nil {
		t.Fatal("a static map's primary not served")
	}
	if copied, err := vol.IsCopy(1); err != nil || copied {
		t.Fatalf("served region still marked a copy (%v, %v)", copied, err)
	}
}

// TestDeposedBuildIndexPrimaryFollowsWithoutStall: this server was
// region 1's Build-Index primary, its stream refused (its session
// expired: deposed) with a frozen L0 held for replication and the next L0
// full. The map makes it the region's backup: its region's own writes
// (the new primary's seed deletes every key, then puts its pairs) must go
// on. With no replicator the held L0 stayed held and the seed's first
// write stalled, until the seed's 30 s command timeout dropped the backup
// (seen in the fault test: a 2-way Build-Index group not whole 30 s after
// a kill).
func TestDeposedBuildIndexPrimaryFollowsWithoutStall(t *testing.T) {
	const l0 = 64
	vol := serverVolume(t, l0)
	s := restartedManaged(t, vol)
	primary := &regionmap.Map{Version: 8, Replication: "build-index", Replicas: 2,
		Servers: []regionmap.Server{{Name: "b", Started: 7}, {Name: "p", Started: 3}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "b", Epoch: 3}}}
	if err := s.install(primary); err != nil {
		t.Fatal(err)
	}
	er := s.state.Load().hosted(1)
	if er == nil {
		t.Fatal("setup: region 1 not served")
	}
	er.SetReplicator(replication.Refuse{}) // its stream closed: deposed
	for i := range 2 * l0 {                // refused, appended: the first L0 is held, the second fills
		if err := er.Put(fmt.Appendf(nil, "k%04d", i), []byte("v")); err == nil {
			t.Fatalf("setup: put %d acknowledged by a refusing replicator", i)
		}
	}
	backup := &regionmap.Map{Version: 9, Replication: "build-index", Replicas: 2,
		Servers: []regionmap.Server{{Name: "b", Started: 7}, {Name: "p", Started: 3}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: "p", Backups: []string{"b"}, Epoch: 4}}}
	if err := s.install(backup); err != nil {
		t.Fatal(err)
	}
	b := s.backupOf(1)
	if b == nil {
		t.Fatal("region 1 not backed up")
	}
	done := make(chan error, 1)
	go func() { done <- b.rep.Region().Put([]byte("seeded"), []byte("v")) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the backup region's own write: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the backup region's own write stalled behind the L0 its primaryship's stream refused")
	}
}
