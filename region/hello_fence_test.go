package region

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/zap/zaptest"

	"github.com/tebis-go/tebis/client/regionmap"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/rdma"
	"github.com/tebis-go/tebis/replication"
)

// helloReq is a primary's connection request carrying a replication hello.
type helloReq struct {
	hello    []byte
	rejected bool
}

func (r *helloReq) Private() []byte              { return r.hello }
func (r *helloReq) PeerRegions() []rdma.RemoteMR { return nil }
func (r *helloReq) Reject() error                { r.rejected = true; return nil }
func (r *helloReq) Accept(rdma.ConnConfig) (rdma.QP, error) {
	return &closeQP{}, nil
}

// closeQP is an accepted connection that only records its Close.
type closeQP struct {
	rdma.QP
	closed bool
}

func (q *closeQP) Close() error { q.closed = true; return nil }

// TestHelloFromSamePrimaryKeepsBuffer: a backup's primary re-attaches at a
// new epoch (its group changed): the backup keeps its buffer, which holds
// records the primary acknowledged and no log holds yet (were it replaced,
// and the primary died before re-sending its tail, a promotion of this
// backup would lose them), and its copy stays complete. A hello from
// another primary fences: a fresh buffer, the copy incomplete. A hello the
// backup's map cannot name (it lags) fences too.
// helloBackup is an in-process backup of region 1 (segments of seg
// bytes) whose acceptReplication the tests call directly.
type helloBackup struct {
	t   *testing.T
	s   *Server
	b   *backupRegion
	rep *replication.Replica
	buf *rdma.MR
}

const helloSeg = 64 << 10

func newHelloBackup(t *testing.T) *helloBackup {
	vol, err := engine.Open(engine.Options{FS: vfs.NewMem(), Dir: "b", SegmentSize: helloSeg, SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vol.Close() })
	br, err := vol.CreateBackupRegion(engine.RegionDesc{ID: 1, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	buf, err := rdma.Register(2 * helloSeg)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replication.NewSendIndexReplica(vol, br, 1, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	b := &backupRegion{rep: rep, buf: buf}
	s := &Server{log: zaptest.NewLogger(t), vol: vol, regions: map[uint64]*regionState{1: {id: 1, role: roleBackup, backup: b}}, replCQ: rdma.NewCQ()}
	t.Cleanup(func() { b.buf.Deregister() })
	return &helloBackup{t: t, s: s, b: b, rep: rep, buf: buf}
}

// setMap installs a map with region 1 at epoch, primary (run started)
// and this backup.
func (h *helloBackup) setMap(epoch uint64, primary string, started int64) {
	h.s.state.Store(newRouting(&regionmap.Map{Version: epoch, Replication: "send-index",
		Servers: []regionmap.Server{{Name: "b", Started: 7}, {Name: primary, Started: started}},
		Regions: []regionmap.Assignment{{ID: 1, Primary: primary, Backups: []string{"b"}, Epoch: epoch}}}, nil))
}

// hello offers a primary's replication hello at epoch; it returns the
// accepted connection, or nil and the error when it was rejected.
func (h *helloBackup) hello(epoch uint64) (*closeQP, error) {
	req := &helloReq{hello: replwire.Hello{Region: 1, Epoch: epoch, SegSize: helloSeg}.Encode()}
	if err := h.s.acceptReplication(req); err != nil || req.rejected {
		if err == nil {
			err = errors.New("rejected")
		}
		return nil, err
	}
	return h.b.qps[len(h.b.qps)-1].(*closeQP), nil
}

func TestHelloFromSamePrimaryKeepsBuffer(t *testing.T) {
	hb := newHelloBackup(t)
	b, rep, buf, setMap := hb.b, hb.rep, hb.buf, hb.setMap
	hello := func(epoch uint64) *closeQP {
		t.Helper()
		qp, err := hb.hello(epoch)
		if err != nil {
			t.Fatalf("hello at epoch %d: %v", epoch, err)
		}
		return qp
	}
	setMap(1, "p", 100)
	first := hello(1)
	// The primary's stream: records in the buffer, then its attach ended.
	acked := bytes.Repeat([]byte("acknowledged"), 100)
	copy(buf.Bytes()[engine.SegmentHeaderSize:], acked)
	if err := rep.Handle(&replication.Command{Kind: replication.CmdInSync, Region: 1, Epoch: 1}); err != nil {
		t.Fatal(err)
	}
	// The same primary (name and run) re-attaches at epoch 2.
	setMap(2, "p", 100)
	hello(2)
	if b.buf != buf || !first.closed {
		t.Fatalf("a hello from the same primary at a new epoch: buffer replaced %v, old connection closed %v", b.buf != buf, first.closed)
	}
	if !bytes.Equal(b.buf.Bytes()[engine.SegmentHeaderSize:engine.SegmentHeaderSize+len(acked)], acked) || !rep.Complete() {
		t.Fatalf("the kept buffer lost its records, or the copy became incomplete (%v)", rep.Complete())
	}
	// The same name, another run (it restarted): a new primary.
	setMap(3, "p", 200)
	hello(3)
	if b.buf == buf || rep.Complete() {
		t.Fatalf("a restarted primary's hello: buffer kept %v, complete %v", b.buf == buf, rep.Complete())
	}
	// Another primary whose epoch the backup's map does not have yet.
	kept := b.buf
	if err := rep.Handle(&replication.Command{Kind: replication.CmdInSync, Region: 1, Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	hello(4)
	if b.buf == kept || rep.Complete() {
		t.Fatalf("a hello the map cannot name: buffer kept %v, complete %v", b.buf == kept, rep.Complete())
	}
}

// TestHelloAtReportedEpochRefused: a backup reported its copy complete for
// a failover at epoch 2 (its primary's registration went); the master may
// promote it on that report. A hello of epoch 2 (the old primary, only
// paused, resuming its attach; or another server the master named at that
// epoch) is refused: a fresh buffer would make the promised copy
// incomplete. A hello of a newer epoch is taken.
func TestHelloAtReportedEpochRefused(t *testing.T) {
	hb := newHelloBackup(t)
	hb.setMap(2, "p", 100)
	if _, err := hb.hello(2); err != nil {
		t.Fatal(err)
	}
	if err := hb.rep.Handle(&replication.Command{Kind: replication.CmdInSync, Region: 1, Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	if _, complete := hb.rep.Report(2); !complete {
		t.Fatal("the attached backup reports an incomplete copy")
	}
	for _, primary := range []struct {
		name    string
		started int64
	}{{"p", 100}, {"q", 300}} {
		hb.setMap(2, primary.name, primary.started)
		if _, err := hb.hello(2); !errors.Is(err, replication.ErrReported) {
			t.Fatalf("hello of %s at the reported epoch: %v, want ErrReported", primary.name, err)
		}
		if hb.b.buf != hb.buf || !hb.rep.Complete() {
			t.Fatalf("a refused hello of %s: buffer replaced %v, complete %v", primary.name, hb.b.buf != hb.buf, hb.rep.Complete())
		}
	}
	hb.setMap(3, "q", 300)
	if _, err := hb.hello(3); err != nil {
		t.Fatalf("hello of the primary of the next epoch: %v", err)
	}
	if hb.b.buf == hb.buf || hb.rep.Complete() {
		t.Fatalf("the new primary's hello: buffer kept %v, complete %v", hb.b.buf == hb.buf, hb.rep.Complete())
	}
}
