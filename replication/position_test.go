package replication

import (
	"math/rand/v2"
	"testing"

	"github.com/tebis-go/tebis/internal/testseed"
)

// TestLogPosition: each backup's position is the primary's log tail
// (index, offset) as its buffer mirrors it; it grows with writes, also
// across a tail segment switch, and a fresh buffer holds none.
func TestLogPosition(t *testing.T) {
	rng := rand.New(rand.NewPCG(testseed.Seed(t), 12))
	g := newReplGroup(t, 64, []Mode{SendIndex, SendIndex}, nil)
	check := func(what string) uint64 {
		t.Helper()
		g.settle()
		tail, err := g.pr.LogTail()
		if err != nil {
			t.Fatal(err)
		}
		want := tail.Index<<32 | uint64(tail.Offset)
		for i, rep := range g.reps {
			if got := rep.LogPosition(); got != want {
				t.Fatalf("%s: backup %d at position %d:%d, the primary's tail is %d:%d", what, i, got>>32, got&(1<<32-1), tail.Index, tail.Offset)
			}
		}
		return want
	}
	g.write(rng, 2, 10, 100)
	p1 := check("10 writes")
	g.write(rng, 2, 1500, 2400) // several segment switches (64 KiB log segments)
	p2 := check("1 500 writes")
	if p2>>32 <= p1>>32 {
		t.Fatalf("position %#x after %#x: the tail segment did not advance", p2, p1)
	}
	g.failPrimary()
	if err := g.reps[0].SetBuffer(make([]byte, 2*mirrorSeg)); err != nil {
		t.Fatal(err)
	}
	if got := g.reps[0].LogPosition(); got != 0 {
		t.Fatalf("an empty buffer's position is %#x", got)
	}
}
