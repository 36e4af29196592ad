package replication

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

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
	model, np := g.promoteWithTail(rng)
	if np.Desc().Epoch != 4 {
		t.Fatalf("promoted region: epoch %d", np.Desc().Epoch)
	}

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
	g.shipper, err = startShipper(ShipperConfig{Region: np, Epoch: 4, Mode: SendIndex, SegSize: mirrorSeg, Mirror: g.mirror,
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
	checkLevels(t, "backup 1", np, copyOf(g.reps[0]))
	checkContent(t, "backup 1", copyOf(g.reps[0]), model)
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
// levels differ from the new primary's: the stream check refuses it, the
// new primary seeds it (reset, its sealed log, every level) and it then
// follows the new primary like any backup.
func TestPromoteDivergedBackup(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 12))
	var stop atomic.Bool
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, map[int]func(*Command) error{1: func(c *Command) error {
		if stop.Load() && c.Kind != CmdFlush {
			return fmt.Errorf("backup 1 unreachable")
		}
		return nil
	}})
	model := g.write(rng, 4, 600, 2400)
	g.settle()
	stop.Store(true)
	for k, v := range g.write(rng, 4, 600, 2400) {
		model[k] = v
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	g.failPrimary()
	np, err := g.reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted", np, model)
	stop.Store(false)
	g.follow(np, 4, g.reps[1:], PromotedPairs(np))
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("the diverged backup was dropped instead of seeded: %v", d)
	}
	checkLevels(t, "seeded backup", np, copyOf(g.reps[0]))
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
	checkLevels(t, "seeded backup", np, copyOf(g.reps[0]))
	checkContent(t, "seeded backup", copyOf(g.reps[0]), model)
}

// newBackup opens volume dir with an empty Send-Index backup of the
// group's region and its replica (on a buffer of its own).
func (g *replGroup) newBackup(dir string) (*engine.Volume, *Replica) {
	t := g.t
	t.Helper()
	nv, err := engine.Open(g.opts(dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nv.Close() })
	br, err := nv.CreateBackupRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	buf, err := rdma.Register(2 * mirrorSeg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Deregister() })
	rep, err := NewSendIndexReplica(nv, br, 3, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return nv, rep
}

// promoteWithTail writes to the group (levels, then a tail too short for
// an L0 compaction: it lives only in the buffers), fails the primary and
// promotes backup 0 at epoch 4, which must hold every acknowledged write.
func (g *replGroup) promoteWithTail(rng *rand.Rand) (map[string][]byte, *engine.Region) {
	t := g.t
	t.Helper()
	model := g.write(rng, 4, 1500, 2400)
	if err := g.pr.Compact(); err != nil { // L0 empty: the writes below start no compaction
		t.Fatal(err)
	}
	g.settle()
	for k, v := range g.write(rng, 2, 20, 2400) {
		model[k] = v
	}
	// The primary fails: nothing more reaches the backups.
	g.failPrimary()
	np, err := g.reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted", np, model)
	return model, np
}

// failPrimary stops the group's primary as a crash would (no flush, its
// last commands lost) and revokes every backup's buffer, the fence a
// promotion starts with.
func (g *replGroup) failPrimary() {
	g.t.Helper()
	g.shipper.Close()
	g.mirror.Close()
	if err := g.pv.Close(); err != nil {
		g.t.Fatal(err)
	}
	for _, e := range g.ends {
		e.buf.Revoke()
	}
}

// follow makes region np (epoch) the group's primary, replicating to reps
// over fresh buffers, with a rebase when given.
func (g *replGroup) follow(np *engine.Region, epoch uint64, reps []*Replica, rebase []RebasePair) {
	t := g.t
	bs, ends, cq := connectBackups(t, rdma.NewLoopback(), func() string { loopAddrs++; return fmt.Sprintf("fo%d", loopAddrs) }, len(reps))
	links := map[string]Link{}
	for i, rep := range reps {
		if err := rep.SetBuffer(ends[i].buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		links[bs[i].Name] = &LocalLink{Replica: rep, Fail: g.linkFail[i]}
	}
	m := newTailMirror(t, np, cq, bs)
	if np != g.pr {
		g.logID++ // a new primaryship
	}
	sh, err := startShipper(ShipperConfig{Region: np, Epoch: epoch, Mode: g.modes[0], SegSize: mirrorSeg, Mirror: m,
		Links: links, Credits: g.creditsOr2(), Rebase: rebase, Log: zaptest.NewLogger(t), Strict: g.strict, OnDrop: g.onDrop, Preseeded: g.preseeded,
		LogID: g.logID, Handover: g.handover, MinCopies: g.minCopies, Joining: g.joining})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sh.Close)
	g.pr, g.mirror, g.shipper, g.reps, g.ends = np, m, sh, reps, ends
}

// TestSeedNewBackup: a primary with levels and a long log gets a new,
// empty backup: the check fails, the backup is seeded, and it then holds
// the primary's levels and content, through more writes and compactions.
func TestSeedNewBackup(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 13))
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil)
	model := g.write(rng, 4, 1500, 2400)
	g.settle()
	for k, v := range g.write(rng, 2, 20, 2400) { // some in L0 and the tail only
		model[k] = v
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	g.shipper.Close()
	g.mirror.Close()
	_, rep := g.newBackup("new")
	g.follow(g.pr, 3, []*Replica{g.reps[0], rep}, nil)
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("dropped: %v", d)
	}
	checkLevels(t, "new backup", g.pr, copyOf(rep))
	for k, v := range g.write(rng, 4, 800, 2400) {
		model[k] = v
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("dropped: %v", d)
	}
	for i, r := range g.reps {
		checkLevels(t, fmt.Sprintf("backup %d", i), g.pr, copyOf(r))
		checkContent(t, fmt.Sprintf("backup %d", i), copyOf(r), model)
	}
	in, err := engine.OpenInspector(g.fs, "new", true)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if rep := in.Check(); len(rep.Problems) != 0 {
		t.Fatalf("seeded volume: %d problems, first %+v", len(rep.Problems), rep.Problems[0])
	}
}

// TestClosedShipperReportsNoDrop: the backups a stream's mirror drops
// once the stream is closed (the writes in flight at a depose fail as its
// connections close) are not reported through OnDrop: a deposed primary
// reporting its whole group dropped had the master empty the group of a
// region being moved, and cancel the move.
func TestClosedShipperReportsNoDrop(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 15))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	g.write(rng, 2, 50, 2400)
	g.settle()
	g.shipper.Close()
	g.mirror.Close()
	dropped := make(chan string, 4)
	g.strict, g.onDrop = true, func(name string, _ error) { dropped <- name }
	g.follow(g.pr, 3, g.reps, nil)
	g.write(rng, 2, 20, 2400)
	g.shipper.Close()
	g.mirror.Drop("b1", fmt.Errorf("test: a WRITE failed as the connections closed"))
	select {
	case name := <-dropped:
		t.Fatalf("OnDrop reported %s after the stream closed", name)
	case <-time.After(200 * time.Millisecond):
	}
	// Before the close, a drop is reported (the same path).
	g.mirror.Close()
	g.follow(g.pr, 4, g.reps, nil)
	g.mirror.Drop("b1", fmt.Errorf("test: backup 1 late"))
	select {
	case <-dropped:
	case <-time.After(10 * time.Second):
		t.Fatal("OnDrop not called for a drop of an open stream")
	}
}

// TestStrictShipperRefusesAfterDrop: with Strict, a write is acknowledged
// only while every backup of the stream holds it: once a backup is dropped
// (as after a late WRITE or a failed command) OnDrop reports it and later writes fail with
// ErrBackupDropped, while a final flush still reaches the other backup
// (promoted, it holds every acknowledged write) and the L0 compaction waits.
func TestStrictShipperRefusesAfterDrop(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 14))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	model := g.write(rng, 2, 200, 2400)
	g.settle()
	g.shipper.Close()
	g.mirror.Close()
	dropped := make(chan string, 4)
	g.strict, g.onDrop = true, func(name string, _ error) { dropped <- name }
	reps := g.reps
	g.follow(g.pr, 3, reps, nil)
	for k, v := range g.write(rng, 2, 50, 2400) {
		model[k] = v
	}
	// The mirror gives up on backup 1 (as a WRITE timeout or a failed
	// command does).
	g.mirror.Drop("b1", fmt.Errorf("test: backup 1 late"))
	select {
	case name := <-dropped:
		if name != "b1" {
			t.Fatalf("OnDrop reported %s", name)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnDrop not called")
	}
	if err := g.pr.Put([]byte("after"), []byte("v")); !errors.Is(err, ErrBackupDropped) {
		t.Fatalf("a put after the drop: %v, want ErrBackupDropped", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.shipper.Flush(ctx); err != nil {
		t.Fatalf("flush to the backup left: %v", err)
	}
	// The L0 (the refused write's record among its acknowledged ones) does
	// not enter a level while the group lacks a backup. (A compaction whose
	// records were replicated before the drop may still be installing:
	// it is let finish first.)
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	levels := g.pr.Levels()
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := g.shipper.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	for i, l := range g.pr.Levels() {
		if i >= len(levels) || l.Pairs != levels[i].Pairs {
			t.Fatalf("L%d changed after the drop: %d pairs", l.Level, l.Pairs)
		}
	}
	// The backup left holds every acknowledged write (flushed to its log).
	g.failPrimary()
	np, err := reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "backup 0 promoted", np, model)
}
