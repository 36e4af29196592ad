package replication

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/tebis-go/tebis/engine"
	"github.com/tebis-go/tebis/internal/testseed"
)

// TestRetryToPromotedBackupNotApplied: client 1's put is replicated, then
// another client overwrites the key, then the primary fails. Client 1
// never got its reply and retries on the promoted backup: the retry must
// not apply again, whether the original lies behind the recovery point
// (compacted and shipped: a checkpoint record carries its outcome) or in
// the tail the promotion replays (only in the backups' buffers). Send-Index
// promotes by replaying the log; Build-Index applied the records itself.
// The group's small L0 (64 pairs) flushes the tail partially every 64
// writes; what is tested does not depend on it: the early write is behind
// the recovery point after many compactions (only a checkpoint can carry
// it), the late one is in the buffered tail. engine's
// TestPutOnceLargeTableSurvivesRestart covers checkpoints that fill and
// cross log segments.
func TestRetryToPromotedBackupNotApplied(t *testing.T) {
	for _, mode := range []Mode{SendIndex, BuildIndex} {
		t.Run(mode.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(testseed.Seed(t), 17))
			g := newReplGroup(t, 64, []Mode{mode, mode}, nil)
			early, late := []byte("early"), []byte("late")
			put := func(r *engine.Region, k []byte, v string, id engine.RequestID) bool {
				t.Helper()
				applied, err := r.PutOnce(k, []byte(v), id)
				if err != nil {
					t.Fatalf("put %s=%s %+v: %v", k, v, id, err)
				}
				return applied
			}
			put(g.pr, early, "A", engine.RequestID{Client: 1, Seq: 1, Ack: 1})
			put(g.pr, early, "B", engine.RequestID{Client: 2, Seq: 1, Ack: 1})
			g.write(rng, 4, 1500, 2400) // many L0 compactions: early is behind the recovery point
			if err := g.pr.Compact(); err != nil {
				t.Fatal(err)
			}
			g.settle()
			put(g.pr, late, "A", engine.RequestID{Client: 3, Seq: 1, Ack: 1})
			if _, err := g.pr.DeleteOnce(late, engine.RequestID{Client: 2, Seq: 2, Ack: 2}); err != nil {
				t.Fatal(err)
			}
			g.failPrimary()
			np, err := g.reps[0].Promote(4)
			if err != nil {
				t.Fatal(err)
			}
			if put(np, early, "A", engine.RequestID{Client: 1, Seq: 1, Ack: 1}) {
				t.Fatal("the retry of the compacted write was applied again on the promoted backup")
			}
			if got, err := np.Get(early); err != nil || string(got) != "B" {
				t.Fatalf("early key on the promoted backup: %q, %v; want B", got, err)
			}
			if put(np, late, "A", engine.RequestID{Client: 3, Seq: 1, Ack: 1}) {
				t.Fatal("the retry of the tail write was applied again on the promoted backup")
			}
			if got, err := np.Get(late); !errors.Is(err, engine.ErrNotFound) {
				t.Fatalf("late key on the promoted backup: %q, %v; want deleted", got, err)
			}
			// A new write of client 1 still applies.
			if !put(np, early, "D", engine.RequestID{Client: 1, Seq: 2, Ack: 2}) {
				t.Fatal("client 1's next write was taken for a duplicate")
			}
		})
	}
}
