package region

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/coord"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/internal/wire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/rdma/ring"
	"github.com/tebis-go/tebis/replication"
)

// foldGate is the replicator of a Build-Index backup's region whose
// writes wait, from the first one on, until release is closed: it holds a
// buffer fold (the replica's lock) at its first record.
type foldGate struct {
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func (g *foldGate) WaitReplicated(uint64) error {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	return nil
}

// exposeReq is a primary's replication hello that records the buffer its
// acceptance exposed.
type exposeReq struct {
	hello    []byte
	rejected bool
	exposed  *rdma.MR
}

func (r *exposeReq) Private() []byte              { return r.hello }
func (r *exposeReq) PeerRegions() []rdma.RemoteMR { return nil }
func (r *exposeReq) Reject() error                { r.rejected = true; return nil }
func (r *exposeReq) Accept(c rdma.ConnConfig) (rdma.QP, error) {
	r.exposed = c.Expose[0]
	return &closeQP{}, nil
}

// blockedIn waits until n goroutines are stopped inside fn (a function
// name as a goroutine dump prints it).
func blockedIn(t *testing.T, fn string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<22)
		dump := string(buf[:runtime.Stack(buf, true)])
		got := 0
		for _, g := range strings.Split(dump, "\n\n") {
			if strings.Contains(g, fn) {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines in %s after 10 s, want %d", got, fn, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// async runs f in a goroutine and returns a channel that yields its
// result.
func async[T any](f func() T) <-chan T {
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	return ch
}

// TestBuildIndexFoldStallsNoOtherRegion: a Build-Index backup of regions 1
// and 2 gets a hello from a new primary of region 1, which folds the old
// buffer's records into region 1 (Replica.SetBuffer) before it takes the
// new one. The fold is held at its first record. Meanwhile:
//
//   - region 2's commands are served, and a log position report round
//     (which reads region 1's replica, busy) holds up none of them: the
//     fold ran under replMu, which every command of every region takes,
//     and the report read the copies under it; other primaries' hang
//     watchdogs dropped this healthy server from their regions;
//   - region 1's commands wait for the fold (none is applied before it):
//     the old primary's is then refused (stale epoch), a new stream's
//     CHECK answers the point after the folded records;
//   - a second hello of region 1 (another listener) waits for the first,
//     and both expose the buffer the replica ends up with, not the one
//     the fold revoked or one a concurrent replacement discarded.
func TestBuildIndexFoldStallsNoOtherRegion(t *testing.T) {
	vol, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "b", SegmentSize: helloSeg, SyncMode: engine.SyncModeSync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vol.Close() })
	cfg := DefaultConfig()
	cfg.Name = "b"
	s := &Server{cfg: cfg, log: zaptest.NewLogger(t), vol: vol, replCQ: rdma.NewCQ(),
		cluster: &clusterLink{logs: newLogReporter()}}
	s.cluster.started.Store(7)
	m := &regionmap.Map{Version: 1, Replication: "build-index",
		Servers: []regionmap.Server{{Name: "b", Started: 7}, {Name: "p", Started: 100}},
		Regions: []regionmap.Assignment{
			{ID: 1, Primary: "p", Backups: []string{"b"}, Epoch: 1, End: "m"},
			{ID: 2, Primary: "p", Backups: []string{"b"}, Epoch: 1, Start: "m"}}}
	s.state.Store(newRouting(m, nil))
	regions := map[uint64]*engine.Region{}
	for _, r := range m.Regions {
		desc := engine.RegionDesc{ID: r.ID, Epoch: 1}
		if r.Start != "" {
			desc.Start = []byte(r.Start)
		}
		if r.End != "" {
			desc.End = []byte(r.End)
		}
		er, err := vol.CreateRegion(desc)
		if err != nil {
			t.Fatal(err)
		}
		er.SetReplicator(replication.Follow{})
		buf, err := rdma.Register(2 * helloSeg)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := replication.NewBuildIndexReplica(vol, er, 1, buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		b := &backupRegion{rep: rep, buf: buf}
		rs := s.region(r.ID)
		rs.backup, rs.role = b, roleBackup
		t.Cleanup(func() { b.buf.Deregister() })
		regions[r.ID] = er
	}
	b1 := s.backupOf(1)
	hello := func(epoch uint64) *exposeReq {
		req := &exposeReq{hello: replwire.Hello{Region: 1, Epoch: epoch, SegSize: helloSeg}.Encode()}
		if err := s.acceptReplication(req); err != nil || req.rejected {
			t.Errorf("hello of region 1 at epoch %d: %v (rejected %v)", epoch, err, req.rejected)
		}
		return req
	}
	command := func(c *replication.Command) ring.Reply {
		return s.handleReplicate(&ring.ServerRequest{Payload: c.Encode(nil)})
	}
	if hello(1); t.Failed() {
		t.FailNow()
	}

	// The primary's records of region 1, acknowledged and in the backup's
	// buffer (half 0, behind its tail marker), after the backup's point.
	pvol, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "p", SegmentSize: helloSeg, SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer pvol.Close()
	pr, err := pvol.CreateRegion(engine.RegionDesc{ID: 1, End: []byte("m")})
	if err != nil {
		t.Fatal(err)
	}
	model := map[string][]byte{}
	for i := range 200 {
		k, v := fmt.Sprintf("k%05d", i), bytes.Repeat([]byte{byte('a' + i%26)}, 80)
		if err := pr.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	tail, err := pr.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	point := replication.Position{Log: 1, Index: tail.Index, Segment: tail.Segment, Seq: tail.Seq, Off: engine.SegmentHeaderSize}
	for _, c := range []*replication.Command{
		{Kind: replication.CmdCheck, Region: 1, Epoch: 1},
		{Kind: replication.CmdApplyFrom, Region: 1, Epoch: 1, Data: replwire.Applied{Position: point}.Encode()},
		{Kind: replication.CmdInSync, Region: 1, Epoch: 1},
	} {
		if err := b1.rep.Handle(c); err != nil {
			t.Fatal(err)
		}
	}
	half := b1.buf.Bytes()[:helloSeg]
	copy(half[engine.SegmentHeaderSize:], tail.Image[engine.SegmentHeaderSize:tail.Offset])
	// The tail marker (docs/protocol.md): "TBMT", u32 0, region, segment,
	// seq, index.
	le := binary.LittleEndian
	copy(half, "TBMT")
	le.PutUint64(half[8:], 1)
	le.PutUint64(half[16:], tail.Segment)
	le.PutUint64(half[24:], tail.Seq)
	le.PutUint64(half[32:], tail.Index)
	oldBuf := b1.buf

	// A new primary's hello (the map cannot name it yet): fence, fold.
	gate := &foldGate{entered: make(chan struct{}), release: make(chan struct{})}
	regions[1].SetReplicator(gate)
	released := false
	release := func() {
		if !released {
			released = true
			close(gate.release)
		}
	}
	t.Cleanup(release)
	first := async(func() *exposeReq { return hello(2) })
	select {
	case <-gate.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the new primary's hello did not fold the old buffer")
	}

	wait := func(what string, ch <-chan ring.Reply) ring.Reply {
		t.Helper()
		select {
		case rep := <-ch:
			return rep
		case <-time.After(10 * time.Second):
			release()
			t.Fatalf("%s: blocked for 10 s while region 1's buffer fold runs", what)
			return ring.Reply{}
		}
	}
	check2 := func() ring.Reply {
		return command(&replication.Command{Kind: replication.CmdCheck, Region: 2, Epoch: 1})
	}
	if rep := wait("region 2's command", async(check2)); rep.Status != 0 {
		t.Fatalf("region 2's command during region 1's fold: status %d: %s", rep.Status, rep.Payload)
	}

	// A report round: region 1's copy is read after the fold (its
	// replica's lock), region 2's commands go on meanwhile.
	reports := async(func() []logDue {
		out, _ := s.dueLogReports(m, map[string]coord.ServerInfo{})
		return out
	})
	blockedIn(t, "replication.(*Replica).Report", 1)
	if rep := wait("region 2's command during a report round", async(check2)); rep.Status != 0 {
		t.Fatalf("region 2's command during a report round: status %d: %s", rep.Status, rep.Payload)
	}

	// Region 1's commands wait for the fold: the old primary's, and a
	// new stream's CHECK.
	stale := async(func() ring.Reply {
		return command(&replication.Command{Kind: replication.CmdCheck, Region: 1, Epoch: 1})
	})
	fresh := async(func() ring.Reply {
		return command(&replication.Command{Kind: replication.CmdCheck, Region: 1, Epoch: 2})
	})
	// A second hello of the new primary (another listener).
	second := async(func() *exposeReq { return hello(2) })
	blockedIn(t, "replication.(*Replica).Handle", 2)
	blockedIn(t, "region.(*Server).acceptReplication", 2)
	select {
	case <-stale:
		t.Fatal("the old primary's command was answered before the fold ended")
	case <-fresh:
		t.Fatal("the new stream's CHECK was answered before the fold ended")
	case <-second:
		t.Fatal("a second hello was answered before the first one's fold ended")
	default:
	}

	release()
	if rep := wait("the old primary's command", stale); rep.Status != wire.StatusStaleEpoch {
		t.Fatalf("the old primary's command after the fold: status %d (%s), want stale epoch", rep.Status, rep.Payload)
	}
	rep := wait("the new stream's CHECK", fresh)
	a, ok, err := replwire.DecodeApplied(rep.Payload)
	if rep.Status != 0 || err != nil || !ok || a.Position.Off != tail.Offset || a.Position.Segment != tail.Segment {
		t.Fatalf("the new stream's CHECK after the fold: status %d, %+v %v %v; want the point after the folded records (offset %d)", rep.Status, a, ok, err, tail.Offset)
	}
	var f, sec *exposeReq
	select {
	case f = <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the first hello did not end after the fold")
	}
	select {
	case sec = <-second:
	case <-time.After(10 * time.Second):
		t.Fatal("the second hello did not end")
	}
	if t.Failed() {
		t.FailNow()
	}
	s.replMu.Lock()
	cur := b1.buf
	s.replMu.Unlock()
	if cur == oldBuf || f.exposed != cur || sec.exposed != cur {
		t.Fatalf("after the hellos: buffer replaced %v; the first hello exposed the current one %v, the second %v",
			cur != oldBuf, f.exposed == cur, sec.exposed == cur)
	}
	for k, v := range model {
		if got, err := regions[1].Get([]byte(k)); err != nil || !bytes.Equal(got, v) {
			t.Fatalf("region 1 after the fold: %s = %q, %v", k, got, err)
		}
	}
	select {
	case out := <-reports:
		if len(out) != 2 {
			t.Fatalf("the report round reported %v, want both regions", out)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the report round did not end after the fold")
	}
}
