package replication

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/replwire"
	"github.com/tebis-go/tebis/internal/testseed"
	"go.uber.org/zap/zaptest"
)

// seedOnceClients is how many clients write once each before the seed:
// their rows (28 bytes each) make a completion table of ~84 KiB, more
// than one checkpoint chunk of the 64 KiB segments the group uses (the
// engine's checkpoints and the seed's REQUESTS both split it), so the
// test covers a table that crosses chunks as the default 2 MiB segments'
// tables do at ~75 000 clients.
const seedOnceClients = 3000

// TestSeededBackupPromotedRetryNotApplied: a new backup joins a primary
// whose completion table holds writes of many clients and is seeded
// whole, the primary fails, and the seeded backup is promoted. A retry of
// a write the primary applied before the seed must be a duplicate there:
// client 1's put of A, then client 2's put of B on the same key, then
// client 1's retry must leave B (whether the write lies behind the
// recovery point, compacted, or in L0 and the tail). A Build-Index seed
// copies pairs, so it must ship the table too; a Send-Index seed ships
// the log, whose checkpoint at the recovery point the promotion replays.
// A Build-Index backup that was the region's primary once must also lose
// its own old outcomes with its old keys: the primary never applied them.
func TestSeededBackupPromotedRetryNotApplied(t *testing.T) {
	for _, tc := range []struct {
		name    string
		mode    Mode
		preseed bool // Send-Index: pre-seeded halfway through the writes, brought up to date at the attach
	}{{"send-index", SendIndex, false}, {"send-index-preseeded", SendIndex, true}, {"build-index", BuildIndex, false}} {
		t.Run(tc.name, func(t *testing.T) {
			mode := tc.mode
			rng := rand.New(rand.NewPCG(testseed.Seed(t), 41))
			g := newReplGroup(t, 1000, []Mode{mode}, nil)
			put := func(r *engine.Region, k []byte, v string, id engine.RequestID) bool {
				t.Helper()
				applied, err := r.PutOnce(k, []byte(v), id)
				if err != nil {
					t.Fatalf("put %s=%s %+v: %v", k, v, id, err)
				}
				return applied
			}
			early, late := []byte("early"), []byte("late")
			put(g.pr, early, "A", engine.RequestID{Client: 1, Seq: 1, Ack: 1})
			put(g.pr, early, "B", engine.RequestID{Client: 2, Seq: 1, Ack: 1})
			client := func(i int) (key []byte, id engine.RequestID) {
				return fmt.Appendf(nil, "c%05d", i), engine.RequestID{Client: 100 + uint64(i), Seq: 1, Ack: 1}
			}
			var rep *Replica
			var pre *Preseeded
			for i := range seedOnceClients { // 3 L0 freezes: early is behind the recovery point
				if tc.preseed && i == seedOnceClients/2 {
					if err := g.pr.WaitIdle(); err != nil {
						t.Fatal(err)
					}
					_, rep = g.newBackup("new")
					var err error
					if pre, err = PreSeed(context.Background(), g.pr, &LocalLink{Replica: rep}, 3, 30*time.Second, zaptest.NewLogger(t)); err != nil {
						t.Fatal(err)
					}
				}
				k, id := client(i)
				put(g.pr, k, fmt.Sprintf("v%d", i), id)
			}
			g.write(rng, 4, 300, 2400)
			if err := g.pr.WaitIdle(); err != nil {
				t.Fatal(err)
			}
			put(g.pr, late, "A", engine.RequestID{Client: 3, Seq: 1, Ack: 1}) // in L0 and the tail
			if _, err := g.pr.DeleteOnce(late, engine.RequestID{Client: 2, Seq: 2, Ack: 2}); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(g.pr.Levels(), func(l engine.LevelInfo) bool { return l.Root != 0 }) {
				t.Fatal("no level on the primary: the early write is not behind the recovery point")
			}
			if err := g.pr.WaitIdle(); err != nil {
				t.Fatal(err)
			}
			stale := engine.RequestID{Client: 9, Seq: 1, Ack: 1}
			switch {
			case tc.preseed:
				sent := g.attachPreseeded(rep, pre)
				t.Logf("the attach after the pre-seed sent %v", sent.n)
			case mode == SendIndex:
				g.shipper.Close()
				g.mirror.Close()
				_, rep = g.newBackup("new")
			default:
				g.shipper.Close()
				g.mirror.Close()
				nv, err := engine.Open(g.opts("new"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { nv.Close() })
				nr, err := nv.CreateRegion(engine.RegionDesc{ID: 7})
				if err != nil {
					t.Fatal(err)
				}
				// An outcome of this server's own past primaryship, which
				// the current primary never applied.
				put(nr, []byte("stale"), "x", stale)
				nr.Resume()
				if rep, err = NewBuildIndexReplica(nv, nr, 3, make([]byte, 2*mirrorSeg)); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.preseed {
				var joined kindCounter
				g.linkFail = map[int]func(*Command) error{1: joined.fail}
				g.follow(g.pr, 4, []*Replica{g.reps[0], rep}, nil)
				if d := g.shipper.Dropped(); len(d) != 0 {
					t.Fatalf("dropped: %v", d)
				}
				if joined.get(CmdReset) != 1 {
					t.Fatalf("the joining backup was not seeded whole: %v", joined.n)
				}
				t.Logf("seed commands: %v", joined.n)
			}
			g.failPrimary()
			np, err := rep.Promote(5)
			if err != nil {
				t.Fatal(err)
			}
			if put(np, early, "A", engine.RequestID{Client: 1, Seq: 1, Ack: 1}) {
				t.Fatal("the retry of a compacted write was applied again on the promoted seeded backup")
			}
			if got, err := np.Get(early); err != nil || string(got) != "B" {
				t.Fatalf("early key on the promoted backup: %q, %v; want B", got, err)
			}
			if put(np, late, "A", engine.RequestID{Client: 3, Seq: 1, Ack: 1}) {
				t.Fatal("the retry of a write in L0 was applied again on the promoted seeded backup")
			}
			if got, err := np.Get(late); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("late key on the promoted backup: %q, %v; want deleted", got, err)
			}
			again := 0
			for i := range seedOnceClients {
				k, id := client(i)
				if put(np, k, "retry", id) {
					again++
				}
			}
			if again != 0 {
				t.Fatalf("%d of %d clients' retries applied again on the promoted seeded backup", again, seedOnceClients)
			}
			if mode == BuildIndex && !put(np, []byte("stale"), "y", stale) {
				t.Fatal("a write the primary never applied was taken for a duplicate (the seeded backup kept its own old outcomes)")
			}
			if !put(np, early, "D", engine.RequestID{Client: 1, Seq: 2, Ack: 2}) {
				t.Fatal("client 1's next write was taken for a duplicate")
			}
		})
	}
}

// TestBuildIndexRequestsOnlyInSeed: a Build-Index backup merges a
// completion-table chunk only between its stream's RESET and APPLY_FROM,
// like PAIRS: after the stream agreed its point, or from another stream,
// it is refused and the table is unchanged.
func TestBuildIndexRequestsOnlyInSeed(t *testing.T) {
	v, err := engine.Open(replOpts(vfs.NewMem(), 1000)("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	br, err := v.CreateRegion(engine.RegionDesc{ID: 7})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := NewBuildIndexReplica(v, br, 3, make([]byte, 2*mirrorSeg))
	if err != nil {
		t.Fatal(err)
	}
	// A chunk from a real table: client 9's seq 1.
	src, err := v.CreateRegion(engine.RegionDesc{ID: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := src.PutOnce([]byte("k"), []byte("v"), engine.RequestID{Client: 9, Seq: 1, Ack: 1}); err != nil {
		t.Fatal(err)
	}
	chunks, err := src.RequestTableChunks(1 << 10)
	if err != nil || len(chunks) != 1 {
		t.Fatalf("chunks %d, %v", len(chunks), err)
	}
	handle := func(c *Command) error {
		c.Region = 7
		_, err := rep.Reply(c)
		return err
	}
	from := replwire.Applied{Position: Position{Log: 1, Index: 1, Segment: 3, Seq: 3, Off: engine.SegmentHeaderSize}}.Encode()
	for _, step := range []struct {
		c       *Command
		refused bool
	}{
		{&Command{Kind: CmdCheck, Epoch: 3}, false},
		{&Command{Kind: CmdApplyFrom, Epoch: 3, Data: from}, false},
		{&Command{Kind: CmdRequests, Epoch: 3, Data: chunks[0]}, true}, // the point is agreed: no seed
		{&Command{Kind: CmdCheck, Epoch: 4}, false},
		{&Command{Kind: CmdReset, Epoch: 4}, false},
		{&Command{Kind: CmdRequests, Epoch: 5, Data: chunks[0]}, true}, // not the seed's stream
	} {
		err := handle(step.c)
		if step.refused && !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("%s at epoch %d: %v, want ErrOutOfOrder", step.c.Kind, step.c.Epoch, err)
		}
		if !step.refused && err != nil {
			t.Fatalf("%s at epoch %d: %v", step.c.Kind, step.c.Epoch, err)
		}
	}
	if n := br.RequestTableLen(); n != 0 {
		t.Fatalf("%d outcomes merged from refused commands", n)
	}
	// Within a seed (its own stream, before APPLY_FROM) it is merged.
	for _, c := range []*Command{{Kind: CmdCheck, Epoch: 6}, {Kind: CmdReset, Epoch: 6}, {Kind: CmdRequests, Epoch: 6, Data: chunks[0]}} {
		if err := handle(c); err != nil {
			t.Fatalf("%s: %v", c.Kind, err)
		}
	}
	if applied, err := br.PutOnce([]byte("k"), []byte("again"), engine.RequestID{Client: 9, Seq: 1, Ack: 1}); err != nil || applied {
		t.Fatalf("retry after the seed's table: applied %v, %v", applied, err)
	}
}
