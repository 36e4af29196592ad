package replication

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
	"go.uber.org/zap/zaptest"
)

// kindCounter counts the commands a link carries, by kind.
type kindCounter struct {
	mu sync.Mutex
	n  map[CmdKind]int
}

func (k *kindCounter) fail(c *Command) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.n == nil {
		k.n = map[CmdKind]int{}
	}
	k.n[c.Kind]++
	return nil
}

func (k *kindCounter) get(kind CmdKind) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n[kind]
}

// TestPreSeedWhileServing: a new backup is pre-seeded while writers,
// compactions and GC go on at the primary (replicating to its backup);
// the attach that adds it (region quiesced) ships only what changed: no
// reset, not every level. The new backup then holds the primary's levels
// and content, also after more writes and compactions.
func TestPreSeedWhileServing(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 17))
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil, autoGC)
	model := g.write(rng, 4, 1500, 2400)
	g.settle()

	nv, rep := g.newBackup("new")
	var pre *Preseeded
	var preErr error
	var preCount kindCounter
	done := make(chan struct{})
	go func() {
		defer close(done)
		pre, preErr = PreSeed(context.Background(), g.pr, &LocalLink{Replica: rep, Fail: preCount.fail}, 3, 30*time.Second, zaptest.NewLogger(t))
	}()
	// The region serves meanwhile: enough writes for compactions and GC.
	for k, v := range g.write(rng, 4, 1500, 2400) {
		model[k] = v
	}
	<-done
	if preErr != nil {
		t.Fatal(preErr)
	}
	if preCount.get(CmdReset) != 1 || preCount.get(CmdIndexSegment) == 0 {
		t.Fatalf("the pre-seed sent %v", preCount.n)
	}
	for k, v := range g.write(rng, 4, 600, 2400) { // more changes after it
		model[k] = v
	}

	attachCount := g.attachPreseeded(rep, pre)
	t.Logf("pre-seed sent %v; the attach %v", preCount.n, attachCount.n)
	for k, v := range g.write(rng, 4, 800, 2400) {
		model[k] = v
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	g.stopAndCompare(model, []*engine.Volume{nv, g.bvs[0]}, "b0", "new")
}

// TestPreSeedThenAllDeleted: after the pre-seed every key is deleted and
// compacted while GC frees the log the copy held: the attach brings the
// backup's levels and recovery point to the primary's, so its content —
// levels plus the log from its recovery point, as a promotion replays
// it — is the primary's (every key gone).
func TestPreSeedThenAllDeleted(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 19))
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil, autoGC)
	model := g.write(rng, 2, 800, 400)
	g.settle()
	nv, rep := g.newBackup("new")
	pre, err := PreSeed(context.Background(), g.pr, &LocalLink{Replica: rep}, 3, 30*time.Second, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(pre.Levels, func(l engine.LevelInfo) bool { return l.Root != 0 }) {
		t.Fatal("the pre-seed shipped no level: the test shows nothing")
	}
	for k := range model {
		if err := g.pr.Delete([]byte(k)); err != nil {
			t.Fatal(err)
		}
		model[k] = nil
	}
	for range 6 {
		if err := g.pr.Compact(); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.pr.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	t.Logf("levels after the deletes: %+v", g.pr.Levels())
	attachCount := g.attachPreseeded(rep, pre)
	t.Logf("the attach sent %v", attachCount.n)
	g.stopAndCompare(model, []*engine.Volume{nv, g.bvs[0]}, "b0", "new")
}

// attachPreseeded quiesces the primary, ends its stream and attaches a
// new one with backup 0 and rep (pre-seeded with pre, as "b1"); the
// attach must bring rep up to date without seeding it whole. It returns
// what the attach sent rep.
func (g *replGroup) attachPreseeded(rep *Replica, pre *Preseeded) *kindCounter {
	t := g.t
	t.Helper()
	quiesced, err := g.pr.Quiesce()
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(quiesced)
	t.Cleanup(release) // a failure while quiesced must not hang the cleanup
	g.shipper.Close()
	g.mirror.Close()
	var sent kindCounter
	g.preseeded = map[string]*Preseeded{"b1": pre}
	g.linkFail = map[int]func(*Command) error{1: sent.fail}
	g.follow(g.pr, 3, []*Replica{g.reps[0], rep}, nil)
	release()
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("dropped: %v", d)
	}
	if n := sent.get(CmdReset); n != 0 {
		t.Fatalf("the attach seeded the pre-seeded backup whole (sent %v)", sent.n)
	}
	if n := sent.get(CmdCheck); n != 1 {
		t.Fatalf("the attach checked the pre-seeded backup %d times (sent %v): it is brought up to date first, then checked once", n, sent.n)
	}
	return &sent
}

// TestPreSeedPromotedPrimary: a promoted primary that served alone (its
// group emptied at the failover) pre-seeds a joining backup; the attach
// that adds it still carries the promotion's rebase pairs. The pre-seeded
// backup names its log by the new primary's segments already: the rebase
// must not touch it, and the attach brings it up to date without seeding
// it whole.
func TestPreSeedPromotedPrimary(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 23))
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil)
	model, np := g.promoteWithTail(rng)
	pairs := PromotedPairs(np)
	if len(pairs) == 0 {
		t.Fatal("the promoted region lists no adopted segments: the test shows nothing")
	}
	np.SetReplicator(nil) // it serves alone
	g.pr = np
	_, rep := g.newBackup("new")
	rep.RaiseEpoch(5)
	pre, err := PreSeed(context.Background(), np, &LocalLink{Replica: rep}, 5, 30*time.Second, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	// Nothing changes before the attach: the pre-seed is the primary's
	// state as it is, and the attach needs no delta at all.
	quiesced, err := np.Quiesce()
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(quiesced)
	t.Cleanup(release)
	var sent kindCounter
	g.preseeded = map[string]*Preseeded{"b0": pre}
	g.linkFail = map[int]func(*Command) error{0: sent.fail}
	g.follow(np, 5, []*Replica{rep}, pairs)
	release()
	if d := g.shipper.Dropped(); len(d) != 0 {
		t.Fatalf("dropped: %v", d)
	}
	if n := sent.get(CmdReset); n != 0 {
		t.Fatalf("the attach seeded the pre-seeded backup whole (sent %v)", sent.n)
	}
	if n := sent.get(CmdCheck); n != 1 {
		t.Fatalf("the attach checked the pre-seeded backup %d times (sent %v), want once", n, sent.n)
	}
	t.Logf("the attach sent %v", sent.n)
	for k, v := range g.write(rng, 4, 400, 2400) {
		model[k] = v
	}
	if err := np.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	checkLevels(t, "pre-seeded backup", np, copyOf(rep))
	checkContent(t, "pre-seeded backup", copyOf(rep), model)
}
