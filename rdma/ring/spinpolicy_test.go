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
