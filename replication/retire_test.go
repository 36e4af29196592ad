package replication

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/testseed"
)

// TestRetireHandsQueuedCompactionToBackup: after a failover the promoted
// primary's first stream passes the remaining backup (rebase, check, log
// catch-up). The promoted region then compacts L0 (its replayed L0 is
// full) while that backup is slow: the compaction's commands are still
// queued for it when the region re-attaches (its group changed: the
// failed primary's server came back and joins). Retiring the stream hands
// them over before it closes, so the next stream's check passes the
// backup with no seed (no reset) and its levels are the primary's.
// Closing the stream instead discards them: the backup keeps the old L1
// and recovery point, and every re-attach after a failover seeded it
// whole (seen end to end: "recovery point ... the primary's ..." on the
// re-attach's check, in nearly every failover).
//
// Sizes: what is exercised is the order of a stream's queued commands
// and its end, which no segment or L0 size changes; 64 KiB segments and
// an L0 of 64 pairs give levels and a compaction every few dozen writes.
func TestRetireHandsQueuedCompactionToBackup(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 41))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	model, np := g.promoteWithTail(rng)

	var sent kindCounter
	var hold atomic.Bool // the next compaction start waits for gate
	gate := make(chan struct{})
	g.linkFail = map[int]func(*Command) error{0: func(c *Command) error {
		if c.Kind == CmdCompactionStart && hold.CompareAndSwap(true, false) {
			<-gate
		}
		return sent.fail(c)
	}}
	g.credits = 1 << 10 // the slow backup's queue takes a whole compaction
	g.follow(np, 4, g.reps[1:], PromotedPairs(np))
	if n := sent.get(CmdReset); n != 0 || len(g.shipper.Dropped()) != 0 {
		t.Fatalf("setup: the promoted primary's first stream seeded (%d resets) or dropped (%v) the remaining backup", n, g.shipper.Dropped())
	}

	hold.Store(true)
	for i := range 100 {
		k, v := fmt.Sprintf("r%04d", i), fmt.Appendf(nil, "after-promotion-%04d", i)
		if err := np.Put([]byte(k), v); err != nil {
			t.Fatal(err)
		}
		model[k] = v
	}
	if err := np.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := np.WaitIdle(); err != nil { // the region is still, as a re-attach's quiesce leaves it
		t.Fatal(err)
	}
	// The compaction's start is queued; the backup's sender hands it to
	// the link on its own goroutine (late under load).
	for deadline := time.Now().Add(10 * time.Second); hold.Load() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if hold.Load() {
		t.Fatal("setup: no compaction started after the promotion")
	}
	// The backup is still applying the compaction's start when the stream
	// is retired; it goes on once the retire has begun.
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(gate)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.shipper.Retire(ctx); err != nil {
		t.Fatalf("retire: %v", err)
	}
	if err := checkState(g.reps[0].Backup(), mirrorSeg, primaryState(np)); err != nil {
		t.Fatalf("after the retired stream the backup fails the next stream's check: %v", err)
	}

	// The re-attach: the backup passes the check; nothing is reset.
	resets := sent.get(CmdReset)
	g.reattachKeepingBuffers(5)
	if n := sent.get(CmdReset) - resets; n != 0 || len(g.shipper.Dropped()) != 0 {
		t.Fatalf("the re-attach seeded (%d resets) or dropped (%v) the backup", n, g.shipper.Dropped())
	}
	checkLevels(t, "backup after the re-attach", np, copyOf(g.reps[0]))
	for k, v := range g.write(rng, 2, 400, 2400) {
		model[k] = v
	}
	if err := np.Compact(); err != nil {
		t.Fatal(err)
	}
	g.settle()
	checkLevels(t, "backup", np, copyOf(g.reps[0]))
	checkContent(t, "backup", copyOf(g.reps[0]), model)
}
