package replication

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/rdma"
	"go.uber.org/zap/zaptest"
)

// TestPromoteBackup: the primary dies with its last writes only in the
// backups' buffers (its shipper and volume stop without a flush). Backup 0
// revokes its buffer and is promoted: it holds every acknowledged write,
// its tail included.
// It then replicates to backup 1, which rebases its log map onto the new
// primary's segments and passes the stream check; after more writes and
// compactions backup 1's levels are the new primary's and its content
// matches, and every volume checks clean.
func TestPromoteBackup(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 11))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	model := g.write(rng, 4, 1500, 2400)
	if err := g.pr.Compact(); err != nil { // L0 empty: the writes below start no compaction
		t.Fatal(err)
	}
	g.settle()
	// Too few for an L0 compaction: these live only in the buffers.
	for k, v := range g.write(rng, 2, 20, 2400) {
		model[k] = v
	}
	// The primary fails: nothing more reaches the backups.
	g.shipper.Close()
	g.mirror.Close()
	if err := g.pv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range g.ends {
		e.buf.Revoke()
	}
	np, err := g.reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	if np.IsBackup() || np.Desc().Epoch != 4 {
		t.Fatalf("promoted region: backup %v epoch %d", np.IsBackup(), np.Desc().Epoch)
	}
	checkContent(t, "promoted", np, model)

	// The new primary replicates to the other backup, on a fresh buffer.
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("pr%d", loopAddrs) }, 1)
	if err := g.reps[1].SetBuffer(ends[0].buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	tail, err := np.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	if g.mirror, err = NewMirror(mirrorSeg, tail.Segment, cq, bs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.mirror.Close() })
	pairs := PromotedPairs(np)
	if len(pairs) == 0 {
		t.Fatal("the promoted region lists no adopted segments to rebase")
	}
	g.pr, g.pv = np, g.bvs[0]
	g.reps, g.ends = g.reps[1:], ends
	g.shipper, err = NewShipper(ShipperConfig{Region: np, Epoch: 4, Mode: SendIndex, SegSize: mirrorSeg, Mirror: g.mirror,
		Links: map[string]Link{bs[0].Name: &LocalLink{Replica: g.reps[0]}}, Credits: 2, Rebase: pairs, Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.shipper.Close)
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("the remaining backup failed the check after the rebase: %v", d)
	}
	for k, v := range g.write(rng, 4, 800, 2400) {
		model[k] = v
	}
	if err := np.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("backups dropped: %v", d)
	}
	checkContent(t, "new primary", np, model)
	checkLevels(t, "backup 1", np, g.reps[0].Region())
	checkContent(t, "backup 1", g.reps[0].Region(), model)
	for _, dir := range []string{"b0", "b1"} {
		in, err := engine.OpenInspector(g.fs, dir, true)
		if err != nil {
			t.Fatal(err)
		}
		rep := in.Check()
		in.Close()
		if len(rep.Problems) != 0 {
			t.Fatalf("volume %s: %d problems, first: %+v", dir, len(rep.Problems), rep.Problems[0])
		}
	}
}

// TestPromoteDivergedBackup: the primary dies with compactions shipped to
// one backup and not the other. After the promotion the other backup's
// levels differ from the new primary's: the stream check refuses it (it
// needs reseeding) and the new primary goes on without it.
func TestPromoteDivergedBackup(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 12))
	stop := false
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, map[int]func(*Command) error{1: func(c *Command) error {
		if stop && c.Kind != CmdFlush {
			return fmt.Errorf("backup 1 unreachable")
		}
		return nil
	}})
	model := g.write(rng, 4, 600, 2400)
	g.settle()
	stop = true
	for k, v := range g.write(rng, 4, 600, 2400) {
		model[k] = v
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	g.shipper.Close()
	g.mirror.Close()
	if err := g.pv.Close(); err != nil {
		t.Fatal(err)
	}
	for _, e := range g.ends {
		e.buf.Revoke()
	}
	np, err := g.reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted", np, model)
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("pd%d", loopAddrs) }, 1)
	if err := g.reps[1].SetBuffer(ends[0].buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	tail, err := np.LogTail()
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMirror(mirrorSeg, tail.Segment, cq, bs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	sh, err := NewShipper(ShipperConfig{Region: np, Epoch: 4, Mode: SendIndex, SegSize: mirrorSeg, Mirror: m,
		Links: map[string]Link{bs[0].Name: &LocalLink{Replica: g.reps[1]}}, Credits: 2, Rebase: PromotedPairs(np), Log: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.Close)
	if d := sh.Dropped(); len(d) != 1 {
		t.Fatalf("a backup that missed compactions passed the check: dropped %v", d)
	}
	if err := np.Put([]byte("after"), []byte("v")); !errors.Is(err, ErrNoBackups) {
		t.Fatalf("a put with every backup dropped: %v, want ErrNoBackups", err)
	}
}
