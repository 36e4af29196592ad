package replication

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tebis-go/tebis/internal/testseed"
)

// TestRefusedWriteNeverReadableFromLevels: a strict stream's only backup
// fails (its buffer is revoked: the next WRITE fails) while a write is
// being replicated: the write's record is in the primary's log and L0, its
// client is refused. An L0 compaction must not carry it into L1 (read
// without the replication wait) while the group lacks it: the backup,
// promoted next, does not have it. A read of it on the old primary either
// fails or finds what the promoted backup has.
func TestRefusedWriteNeverReadableFromLevels(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 18))
	g := newReplGroup(t, 64, []Mode{SendIndex}, nil)
	model := g.write(rng, 2, 300, 2400)
	g.settle()
	g.shipper.Close()
	g.mirror.Close()
	g.strict = true
	g.follow(g.pr, 3, g.reps, nil)
	for k, v := range g.write(rng, 2, 40, 2400) {
		model[k] = v
	}
	g.ends[0].buf.Revoke() // the backup fails: its WRITEs fail from now on
	err := g.pr.Put([]byte("refused"), []byte("indeterminate"))
	if err == nil {
		t.Fatal("a write acknowledged with its only backup failed")
	}
	// The L0 compaction (the L0 holds the refused record) runs now.
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	got, readErr := g.pr.Get([]byte("refused"))
	g.failPrimary()
	np, err := g.reps[0].Promote(4)
	if err != nil {
		t.Fatal(err)
	}
	checkContent(t, "promoted", np, model)
	after, afterErr := np.Get([]byte("refused"))
	if readErr == nil && (afterErr != nil || string(after) != string(got)) {
		t.Fatalf("the refused write was read (%q) on the old primary, and after the failover it is %q, %v", got, after, afterErr)
	}
}

// TestStrictPreStartPositionsNeedTheGroup: a strict stream that drops a
// backup at its attach (its check and its seed fail) holds the log from
// before its start on the other backup only: reads of L0 records written
// before the start, and the L0 compaction of them, must fail like those of
// records written since, instead of counting them as held by the group.
func TestStrictPreStartPositionsNeedTheGroup(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 19))
	g := newReplGroup(t, 1<<20, []Mode{SendIndex, SendIndex}, nil) // no L0 compaction by itself
	model := g.write(rng, 2, 100, 2400)
	// A key in L0, in a sealed log segment: before the next stream's start.
	for i := 0; ; i++ {
		tail, _ := g.pr.LogTail()
		if err := g.pr.Put(fmt.Appendf(nil, "fill%05d", i), make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
		if now, _ := g.pr.LogTail(); now.Segment != tail.Segment && i > 0 {
			break
		}
	}
	g.shipper.Close()
	g.mirror.Close()
	g.strict = true
	g.linkFail = map[int]func(*Command) error{1: func(c *Command) error {
		if c.Kind == CmdCheck || c.Kind == CmdReset {
			return errors.New("test: backup 1 unreachable")
		}
		return nil
	}}
	g.follow(g.pr, 3, g.reps, nil)
	if d := g.shipper.Dropped(); len(d) != 1 {
		t.Fatalf("dropped at attach: %v, want backup 1", d)
	}
	var k string
	for k = range model {
		if model[k] != nil {
			break
		}
	}
	if v, err := g.pr.Get([]byte(k)); !errors.Is(err, ErrBackupDropped) {
		t.Fatalf("a read of an L0 record from before the strict stream's start, a backup dropped: %q, %v, want ErrBackupDropped", v, err)
	}
	if err := g.pr.Compact(); err != nil {
		t.Fatal(err)
	}
	for _, l := range g.pr.Levels() {
		if l.Pairs > 0 {
			t.Fatalf("the L0 entered L%d (%d pairs) with a backup of the strict stream dropped", l.Level, l.Pairs)
		}
	}
}
