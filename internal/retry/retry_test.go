package retry

import (
	"testing"
	"time"
)

func TestUntilStopsAtFirstDone(t *testing.T) {
	calls := 0
	if !Until(10, time.Microsecond, func() bool { calls++; return calls == 3 }) {
		t.Fatal("Until reported false though the third try was done")
	}
	if calls != 3 {
		t.Fatalf("try called %d times, want 3 (stop at the first done)", calls)
	}
}

func TestUntilFirstTryDone(t *testing.T) {
	calls := 0
	start := time.Now()
	if !Until(5, time.Hour, func() bool { calls++; return true }) {
		t.Fatal("Until reported false though the first try was done")
	}
	if calls != 1 {
		t.Fatalf("try called %d times, want 1", calls)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("Until slept %v before or after a first try that was done", d)
	}
}

func TestUntilGivesUp(t *testing.T) {
	const n, gap = 5, 2 * time.Millisecond
	calls := 0
	start := time.Now()
	if Until(n, gap, func() bool { calls++; return false }) {
		t.Fatal("Until reported true though no try was done")
	}
	if calls != n {
		t.Fatalf("try called %d times, want %d", calls, n)
	}
	if d := time.Since(start); d < (n-1)*gap {
		t.Fatalf("Until took %v for %d tries, want at least %v of gaps", d, n, (n-1)*gap)
	}
}

func TestUntilNoTries(t *testing.T) {
	for _, n := range []int{0, -1} {
		calls := 0
		if Until(n, time.Millisecond, func() bool { calls++; return true }) {
			t.Fatalf("Until(%d, …) reported true", n)
		}
		if calls != 0 {
			t.Fatalf("Until(%d, …) called try %d times, want 0", n, calls)
		}
	}
}
