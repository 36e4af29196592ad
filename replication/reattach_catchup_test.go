package replication

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tebis-go/tebis/internal/replwire"
)

// errPrimaryDied is the link failure of a primary that died (test).
var errPrimaryDied = errors.New("test: the primary died")

// overwriteWait bounds how long a held catch-up flush looks for the new
// stream's tail WRITE in the buffer half it catches up: without the
// ordering the WRITE lands at once (the attach posts it while the flush is
// held), with it the full bound passes.
const overwriteWait = time.Second

// A same-primary re-attach keeps the backup's buffer and its complete
// copy. The old stream's flush of sealed segment X (buffer half 0) never
// reached the backup (held, then the retire's bound ran out); the new
// stream's check finds X missing and queues its catch-up, and the new
// mirror starts its tail in half 0. The primary dies before the catch-up
// flush lands. The backup must still hold X: the tail may not overwrite
// half 0 before the backup applied the catch-up (else it reports complete
// without X's acknowledged writes and is promoted). Build-Index catches up
// synchronously before the mirror posts: checked the same way.
//
// Sizes: an L0 of 100000 pairs never flushes partially (no compaction), so
// X fills and is sealed whole, as with the default engine sizes; what is
// exercised is the order of the attach's catch-up and first WRITE, which
// the segment size does not change.
func TestReattachCatchUpLandsBeforeTailOverwritesHalf(t *testing.T) {
	for _, mode := range []Mode{SendIndex, BuildIndex} {
		t.Run(mode.String(), func(t *testing.T) {
			var hold, held atomic.Bool
			release := make(chan struct{})
			g := newReplGroup(t, 100000, []Mode{mode}, map[int]func(*Command) error{0: func(c *Command) error {
				if hold.Load() && c.Kind == CmdFlush && c.Sealed && len(c.Data) == 0 {
					held.Store(true)
					<-release
					return errors.New("test: the old stream ended before this flush reached the backup")
				}
				return nil
			}})
			start, err := g.pr.LogTail()
			if err != nil {
				t.Fatal(err)
			}
			hold.Store(true)
			model := g.fillUntilSwitch("a", 1, 30) // X = start's segment in half 0 (its flush held), 30 writes in half 1
			tail, err := g.pr.LogTail()
			if err != nil {
				t.Fatal(err)
			}
			if start.Segment == tail.Segment {
				t.Fatalf("setup: the tail did not move off segment %d", start.Segment)
			}

			// The region server's re-attach: the old stream is retired,
			// and its bound runs out with X's flush still held (the flush
			// then fails: it never reaches the backup).
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			stop := context.AfterFunc(ctx, func() { close(release) })
			defer stop()
			err = g.shipper.Retire(ctx)
			cancel()
			if !held.Load() {
				t.Fatalf("setup: segment %d's flush was not held when the stream was retired (retire: %v)", start.Segment, err)
			}

			var died, overwritten atomic.Bool
			g.linkFail = map[int]func(*Command) error{0: func(c *Command) error {
				if died.Load() {
					return errPrimaryDied
				}
				if c.Kind == CmdFlush && c.Segment == start.Segment && len(c.Data) > 0 {
					// X's catch-up: the primary dies before it lands.
					for deadline := time.Now().Add(overwriteWait); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
						var m replwire.Marker
						g.ends[0].buf.View(func(b []byte) { m, _ = replwire.DecodeMarker(b[:mirrorSeg]) })
						if m.Segment == tail.Segment {
							overwritten.Store(true)
							break
						}
					}
					died.Store(true)
					return errPrimaryDied
				}
				return nil
			}}
			g.reattachAllowingFailure(4)
			if !died.Load() {
				t.Fatal("setup: the re-attach sent no catch-up of the segment whose flush was held")
			}
			g.failPrimary()
			if overwritten.Load() {
				t.Errorf("the re-attach mirrored segment %d's tail over half 0 before the backup applied the catch-up of segment %d it held", tail.Segment, start.Segment)
			}
			if _, complete := g.reps[0].Report(4); !complete {
				t.Fatal("a same-primary re-attach left the backup's copy incomplete: it cannot be promoted")
			}
			np, err := g.reps[0].Promote(5)
			if err != nil {
				t.Fatal(err)
			}
			checkContent(t, "promoted after the primary died during the re-attach's catch-up", np, model)
		})
	}
}

// reattachAllowingFailure is reattachKeepingBuffers for a re-attach that
// may fail (its primary dies during it): the new stream is kept only if
// NewShipper returned one.
func (g *replGroup) reattachAllowingFailure(epoch uint64) {
	g.t.Helper()
	g.reattach(epoch, false)
}
