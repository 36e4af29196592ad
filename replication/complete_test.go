package replication

import (
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"

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
