package ring

import "time"

// spinPolicy decides how long a poller (a server's spinner, a client's
// reply poller) spins after its last progress, or after a wake-up that
// announces a message (woke), before it arms its doorbell and parks: at
// least minSpin (bounded by max), and longer, up to max, while messages
// come within half of it (twice the recent gap between progress events,
// the lesser of an average over the last few and the latest, so the
// first message of a burst after a long gap does not cut the spin short).
//
// The floor is what keeps a closed loop fast. The gaps a poller sees
// include the doorbell wake-ups of a parked peer, so a poller that parks
// at once when gaps exceed max makes its peer's gaps long too: one call
// at a time then pays two wake-ups per round trip for good (75-80 µs
// against 2-3 µs on the machine of docs/benchmarks.md, "tebis bench
// rdma"), and 16 callers get a fifth of the messages through. With a max
// at or under minSpin (the default) the gaps change nothing: the poller
// spins max. Used by one goroutine only.
type spinPolicy struct {
	max     time.Duration
	floor   time.Duration // min(minSpin, max)
	gap     time.Duration // moving average of the gaps between progress
	lastGap time.Duration // the latest gap
	last    time.Time     // the last progress
	since   time.Time     // the last progress or wake-up (woke)
}

// minSpin is how long a poller spins after progress or a wake-up however
// slowly messages came before (bounded by its SpinTime).
const minSpin = DefaultSpin

func newSpinPolicy(max time.Duration, now time.Time) spinPolicy {
	return spinPolicy{max: max, floor: min(minSpin, max), last: now, since: now}
}

// progress records progress at now.
func (p *spinPolicy) progress(now time.Time) {
	gap := now.Sub(p.last)
	p.last, p.lastGap, p.since = now, gap, now
	p.gap += (gap - p.gap) / 4
}

// woke records that the poller woke at now for a message it expects
// soon (a client's new call): it spins at least the floor from now, and
// the gaps between progress are unchanged.
func (p *spinPolicy) woke(now time.Time) {
	if now.After(p.since) {
		p.since = now
	}
}

// spinning reports whether the poller should still spin at now.
func (p *spinPolicy) spinning(now time.Time) bool {
	budget := 2 * min(p.gap, p.lastGap)
	if budget > p.max {
		budget = 0
	}
	return now.Sub(p.since) < max(budget, p.floor)
}

// clockEvery is how many rounds of a spinning poller share one clock
// reading (coarseClock): reading the clock was a tenth of a spinning
// poller's round, and a spin that ends a few rounds late costs
// nanoseconds against a budget of microseconds.
const clockEvery = 8

// coarseClock is a poller's clock for deciding whether to go on spinning:
// read returns a reading taken at most clockEvery-1 reads before (never
// later than now, but as old as the time since those reads: forget it
// after a park), fresh a new one. Used by one goroutine only.
type coarseClock struct {
	left int
	now  time.Time
}

// read returns the current reading, taking a new one every clockEvery
// calls.
func (c *coarseClock) read() time.Time {
	if c.left <= 0 {
		return c.fresh()
	}
	c.left--
	return c.now
}

// forget makes the next read take a new reading (after a park).
func (c *coarseClock) forget() { c.left = 0 }

// fresh takes a new reading and returns it.
func (c *coarseClock) fresh() time.Time {
	c.now, c.left = time.Now(), clockEvery-1
	return c.now
}
