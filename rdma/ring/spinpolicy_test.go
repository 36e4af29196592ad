package ring

import (
	"testing"
	"time"
)

// TestSpinPolicy: a poller spins about twice the recent gap between
// messages (the latest one, inside a burst), never longer than its
// maximum, and not at all once messages come slower than the maximum.
func TestSpinPolicy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newSpinPolicy(50*time.Microsecond, t0)
	now := t0
	for range 20 { // a message every 5 µs
		now = now.Add(5 * time.Microsecond)
		p.progress(now)
	}
	if !p.spinning(now.Add(8 * time.Microsecond)) {
		t.Fatal("5 µs gaps: not spinning 8 µs after the last message")
	}
	if p.spinning(now.Add(12 * time.Microsecond)) {
		t.Fatal("5 µs gaps: still spinning 12 µs after the last message")
	}
	for range 20 { // then one every 200 µs: slower than the 50 µs cap
		now = now.Add(200 * time.Microsecond)
		p.progress(now)
	}
	if p.spinning(now.Add(time.Microsecond)) {
		t.Fatal("200 µs gaps: spinning, want to park at once")
	}
	// A burst: the second message 3 µs after the first.
	now = now.Add(3 * time.Microsecond)
	p.progress(now)
	if !p.spinning(now.Add(5*time.Microsecond)) || p.spinning(now.Add(7*time.Microsecond)) {
		t.Fatal("a 3 µs gap after slow ones: want to spin about 6 µs")
	}
	for range 20 { // fast again
		now = now.Add(2 * time.Microsecond)
		p.progress(now)
	}
	if !p.spinning(now.Add(time.Microsecond)) {
		t.Fatal("2 µs gaps again: not spinning")
	}
	q := newSpinPolicy(50*time.Microsecond, t0)
	for range 20 { // 20 µs gaps: a 40 µs budget, under the cap
		now = now.Add(20 * time.Microsecond)
		q.progress(now)
	}
	if !q.spinning(now.Add(39*time.Microsecond)) || q.spinning(now.Add(51*time.Microsecond)) {
		t.Fatal("20 µs gaps: want to spin about 40 µs")
	}
}

// TestCoarseClock: read repeats a reading for clockEvery-1 calls after
// it was taken and then takes a new one; forget makes the next read take
// a new one at once.
func TestCoarseClock(t *testing.T) {
	var c coarseClock
	t0 := c.fresh()
	time.Sleep(time.Millisecond) // the clock moves on
	for i := range clockEvery - 1 {
		if got := c.read(); !got.Equal(t0) {
			t.Fatalf("read %d after fresh: %v, want the reading %v", i+1, got, t0)
		}
	}
	t1 := c.read()
	if !t1.After(t0) {
		t.Fatalf("read %d after fresh: %v, want a new reading after %v", clockEvery, t1, t0)
	}
	if got := c.read(); !got.Equal(t1) {
		t.Fatalf("read after a new reading: %v, want it (%v) again", got, t1)
	}
	time.Sleep(time.Millisecond)
	c.forget()
	if got := c.read(); !got.After(t1) {
		t.Fatalf("read after forget: %v, want a new reading after %v", got, t1)
	}
	var zero coarseClock
	if got := zero.read(); got.IsZero() {
		t.Fatal("a zero coarseClock's first read returned the zero time")
	}
}
