package replication

import (
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
)

// TestPromotionDurable: an async backup promoted after its primary died
// holds the old primary's acknowledged writes (in its log, from earlier
// flushes, and in its buffer, persisted or, under Build-Index, replayed at
// the promotion). The new primary's first attach then discards the other
// backups' copies (fresh buffers, a seed), so from the promotion on it may
// be the only copy: a crash of it right after (a crash clone of its disk,
// unsynced data dropped) must keep every acknowledged write, and the
// region must be the server's own (no longer a follower's copy, which a
// restart would not serve).
func TestPromotionDurable(t *testing.T) {
	seed := testseed.Seed(t)
	for _, mode := range []Mode{BuildIndex, SendIndex} {
		t.Run(mode.String(), func(t *testing.T) { promotionDurable(t, rand.New(rand.NewPCG(seed, 43)), mode) })
	}
}

func promotionDurable(t *testing.T, rng *rand.Rand, mode Mode) {
	g := newReplGroup(t, 1000, []Mode{mode, mode}, nil)
	model := g.write(rng, 4, 1500, 2400)
	g.settle() // flushed: applied to the backups' own logs
	// Acknowledged, not flushed: in the backups' buffers only.
	for k, v := range g.write(rng, 2, 300, 2400) {
		model[k] = v
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	g.failPrimary()
	if mode == BuildIndex {
		// As a region server's backup role marks it: a copy.
		if err := g.bvs[0].SetFollower(7, true); err != nil {
			t.Fatal(err)
		}
	}
	np, err := g.reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted", np, model)
	mem, ok := g.fs.(*vfs.MemFS)
	if !ok {
		t.Fatalf("the group's file system is a %T, not a crashable MemFS", g.fs)
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	cv, err := engine.Open(replOpts(clone, 1000)("b0"))
	if err != nil {
		t.Fatal(err)
	}
	defer cv.Close()
	cr, ok := cv.Region(7)
	if !ok {
		t.Fatal("the promoted region is gone after a crash")
	}
	checkContent(t, "the promoted backup after a crash", cr, model)
	// The promoted region is its own: a restart serves it as primary.
	if copied, err := cv.IsCopy(7); err != nil || copied {
		t.Fatalf("the promoted region is still a copy after a crash (%v, %v)", copied, err)
	}
}
