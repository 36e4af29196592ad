package ring

import (
	"testing"
	"time"
)

// TestSpinPolicy: a poller spins about twice the recent gap between
// messages (the latest one, inside a burst), never longer than its
// maximum, and never shorter than the floor (minSpin).
func TestSpinPolicy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const max = 4 * minSpin
	p := newSpinPolicy(max, t0)
	now := t0
	gap := minSpin // twice the gap: above the floor, under max
	for range 20 {
		now = now.Add(gap)
		p.progress(now)
	}
	if !p.spinning(now.Add(2*gap - time.Microsecond)) {
		t.Fatalf("%v gaps: not spinning just under twice the gap", gap)
	}
	if p.spinning(now.Add(2*gap + time.Microsecond)) {
		t.Fatalf("%v gaps: still spinning just over twice the gap", gap)
	}
	for range 20 { // gaps slower than max: the floor only
		now = now.Add(10 * max)
		p.progress(now)
	}
	if !p.spinning(now.Add(minSpin-time.Microsecond)) || p.spinning(now.Add(minSpin+time.Microsecond)) {
		t.Fatalf("gaps over max: want to spin the floor, %v", minSpin)
	}
	// A burst: the second message 1.5 floors after the first.
	now = now.Add(minSpin * 3 / 2)
	p.progress(now)
	if !p.spinning(now.Add(3*minSpin-time.Microsecond)) || p.spinning(now.Add(3*minSpin+time.Microsecond)) {
		t.Fatal("a short gap after slow ones: want to spin twice it")
	}
	for range 20 { // tiny gaps: the floor
		now = now.Add(time.Microsecond)
		p.progress(now)
	}
	if !p.spinning(now.Add(minSpin-time.Microsecond)) || p.spinning(now.Add(minSpin+time.Microsecond)) {
		t.Fatal("1 µs gaps: want to spin the floor")
	}
}

// TestSpinPolicySlowClosedLoop: at the default maximum, messages that
// come slower than it (a closed loop whose peer parked: two doorbell
// wake-ups per round trip) still get a spin of SpinTime after each, so
// the next one can find the poller spinning. A policy that parks at once
// once gaps exceed the maximum keeps such a loop parked for good.
func TestSpinPolicySlowClosedLoop(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newSpinPolicy(DefaultSpin, t0)
	now := t0
	for range 20 {
		now = now.Add(65 * time.Microsecond)
		p.progress(now)
	}
	if !p.spinning(now.Add(DefaultSpin - time.Microsecond)) {
		t.Fatal("65 µs gaps: parked before SpinTime after a message")
	}
	if p.spinning(now.Add(DefaultSpin + time.Microsecond)) {
		t.Fatal("65 µs gaps: spinning past SpinTime")
	}
	q := newSpinPolicy(time.Microsecond, t0) // a SpinTime under the floor bounds it
	if q.spinning(t0.Add(2 * time.Microsecond)) {
		t.Fatal("SpinTime 1 µs: spinning 2 µs after progress")
	}
}

// TestSpinPolicyWoke: a wake-up that announces a message (a client's new
// call) makes the poller spin the floor from then, however long ago its
// last progress, and leaves the gaps alone.
func TestSpinPolicyWoke(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := newSpinPolicy(DefaultSpin, t0)
	now := t0.Add(time.Second)
	if p.spinning(now) {
		t.Fatal("spinning a second after the last progress")
	}
	p.woke(now)
	if !p.spinning(now.Add(DefaultSpin - time.Microsecond)) {
		t.Fatal("woke: not spinning just under the floor after it")
	}
	if p.spinning(now.Add(DefaultSpin + time.Microsecond)) {
		t.Fatal("woke: spinning past the floor")
	}
	p.woke(now.Add(-time.Millisecond)) // an earlier wake-up changes nothing
	if !p.spinning(now.Add(time.Microsecond)) {
		t.Fatal("an earlier woke moved the spin back")
	}
	if p.lastGap != 0 || p.gap != 0 {
		t.Fatalf("woke changed the gaps: %v, %v", p.lastGap, p.gap)
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
