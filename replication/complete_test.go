package replication

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/internal/testseed"
)

// TestReseededBackupIncompleteUntilInSync: a backup in the group is
// complete once its stream's attach settled. Its primary re-attaches it at
// a new epoch and, the check failing, re-seeds it (RESET first); the
// primary dies before the attach finished. The backup must say its copy
// is incomplete (the master must not promote it: its log position after
// the reset says little of what it lacks), and a fresh buffer alone makes
// it incomplete too.
func TestReseededBackupIncompleteUntilInSync(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 17))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	g.write(rng, 2, 400, 600)
	g.settle()
	for i, rep := range g.reps {
		if !rep.Complete() {
			t.Fatalf("backup %d incomplete after its attach settled", i)
		}
	}
	// Re-attach at epoch 4: backup 0's check fails (it is re-seeded), and
	// the primary dies before backup 0 got IN_SYNC.
	var checks atomic.Int32
	died := errors.New("the primary died")
	g.linkFail = map[int]func(*Command) error{0: func(c *Command) error {
		switch {
		case c.Kind == CmdCheck && checks.Add(1) == 1:
			return errors.New("check lost")
		case c.Kind == CmdInSync:
			return died
		}
		return nil
	}}
	g.shipper.Close()
	g.mirror.Close()
	for _, e := range g.ends {
		e.buf.Revoke()
	}
	g.follow(g.pr, 4, g.reps, nil)
	if checks.Load() < 2 {
		t.Fatalf("backup 0 was not re-seeded (%d checks)", checks.Load())
	}
	if g.reps[0].Complete() {
		t.Fatal("a backup re-seeded without the attach's end reports its copy complete")
	}
	if !g.reps[1].Complete() {
		t.Fatal("backup 1, attached in full, reports its copy incomplete")
	}
	if err := g.reps[1].SetBuffer(make([]byte, 2*mirrorSeg)); err != nil {
		t.Fatal(err)
	}
	if g.reps[1].Complete() {
		t.Fatal("a backup handed a fresh buffer reports its copy complete")
	}
}

// TestReportedCopyRefusesReseedAtItsEpoch: a backup reports its copy
// complete for a failover (its primary's registration is gone); the master
// may promote it on that report. Its primary, only paused, resumes an
// attach at the same epoch and re-seeds (CmdReset) or rebases it: had the
// backup accepted, the master would promote a copy that lacks
// acknowledged writes. The backup refuses (ErrReported) and stays
// complete and promotable; a primary of a newer epoch may still re-seed it.
// A copy made incomplete is never promoted (ErrIncompleteCopy).
func TestReportedCopyRefusesReseedAtItsEpoch(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 19))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	model := g.write(rng, 2, 400, 600)
	g.settle()
	g.shipper.Close()
	g.mirror.Close()
	for _, e := range g.ends {
		e.buf.Revoke()
	}
	epoch := g.reps[0].Epoch()
	if _, complete := g.reps[0].Report(epoch); !complete {
		t.Fatal("backup 0 reports an incomplete copy after its attach settled")
	}
	for _, c := range []*Command{
		{Kind: CmdReset, Region: 7, Epoch: epoch},
		{Kind: CmdRebase, Region: 7, Epoch: epoch, Data: replwire.EncodeRebase(nil)},
		{Kind: CmdCheck, Region: 7, Epoch: epoch},
		{Kind: CmdFlush, Region: 7, Epoch: epoch, Segment: 1, Seq: 1, End: 2 * mirrorSeg},
	} {
		if err := g.reps[0].Handle(c); !errors.Is(err, ErrReported) {
			t.Fatalf("%s at the reported epoch %d: %v, want ErrReported", c.Kind, epoch, err)
		}
	}
	if !g.reps[0].Complete() {
		t.Fatal("a refused re-seed left the reported copy incomplete")
	}
	// Backup 1 did not report: the same re-seed is taken, and its copy is
	// then not promotable.
	if err := g.reps[1].Handle(&Command{Kind: CmdReset, Region: 7, Epoch: epoch}); err != nil {
		t.Fatalf("reset of a backup that did not report: %v", err)
	}
	if _, err := g.reps[1].Promote(epoch + 1); !errors.Is(err, ErrIncompleteCopy) {
		t.Fatalf("promoting a re-seeded backup before IN_SYNC: %v, want ErrIncompleteCopy", err)
	}
	np, err := g.reps[0].Promote(epoch + 1)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "the reported backup promoted", np, model)
}

// TestFailedCommandMakesCopyIncomplete: a backup that fails a command of
// its stream (here a malformed flush; likewise a refused check or a failed
// install) may lack what its primary holds: its copy is incomplete, not
// promotable, until a stream's IN_SYNC. A command of an older epoch is
// refused without touching the copy.
func TestFailedCommandMakesCopyIncomplete(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 23))
	for i, mode := range []Mode{SendIndex, BuildIndex} {
		g := newReplGroup(t, 64, []Mode{mode}, nil)
		g.write(rng, 2, 200, 300)
		g.settle()
		rep := g.reps[0]
		if !rep.Complete() {
			t.Fatalf("backup %d incomplete after its attach settled", i)
		}
		epoch := rep.Epoch()
		if err := rep.Handle(&Command{Kind: CmdFlush, Region: 7, Epoch: epoch - 1, Segment: 1, Seq: 1, End: 100}); !errors.Is(err, ErrStaleEpoch) {
			t.Fatalf("backup %d: a flush of an older epoch: %v, want ErrStaleEpoch", i, err)
		}
		if !rep.Complete() {
			t.Fatalf("backup %d: a stale command made the copy incomplete", i)
		}
		if err := rep.Handle(&Command{Kind: CmdFlush, Region: 7, Epoch: epoch, Segment: 1, Seq: 1, End: 2 * mirrorSeg}); err == nil {
			t.Fatalf("backup %d took a flush past its segment's end", i)
		}
		if rep.Complete() {
			t.Fatalf("backup %d: its copy is complete after a command of its stream failed", i)
		}
		if _, complete := rep.Report(epoch); complete {
			t.Fatalf("backup %d reports a complete copy after a failed command", i)
		}
		if err := rep.Handle(&Command{Kind: CmdInSync, Region: 7, Epoch: epoch}); err != nil || !rep.Complete() {
			t.Fatalf("backup %d: IN_SYNC after the failure: %v, complete %v", i, err, rep.Complete())
		}
	}
}
