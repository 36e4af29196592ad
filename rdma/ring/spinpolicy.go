package ring

import "time"

// spinPolicy decides how long a poller (a server's spinner, a client's
// reply poller) spins after its last progress before it arms its
// doorbell and parks. Spinning pays only while the next message comes
// sooner than a doorbell would wake the poller; otherwise it takes a core
// from the goroutines (and processes) that produce the messages. So a
// poller spins for twice the recent gap between its progress events (an
// average over the last few), at most max, and not at all while that
// exceeds max (messages come slower than spinning can catch: park at
// once, the doorbell wakes it). Messages often come in bursts (the
// replies of one group commit, the requests that follow them): the gap
// that counts is the lesser of the average and the latest, so the first
// message of a burst, after a long gap, makes the poller spin for the
// rest. Used by one goroutine only.
type spinPolicy struct {
	max     time.Duration
	gap     time.Duration // moving average of the gaps between progress
	lastGap time.Duration // the latest gap
	last    time.Time     // the last progress
}

func newSpinPolicy(max time.Duration, now time.Time) spinPolicy {
	return spinPolicy{max: max, last: now}
}

// progress records progress at now.
func (p *spinPolicy) progress(now time.Time) {
	gap := now.Sub(p.last)
	p.last, p.lastGap = now, gap
	p.gap += (gap - p.gap) / 4
}

// spinning reports whether the poller should still spin at now.
func (p *spinPolicy) spinning(now time.Time) bool {
	budget := 2 * min(p.gap, p.lastGap)
	if budget > p.max {
		return false
	}
	return now.Sub(p.last) < budget
}

// clockEvery is how many rounds of a spinning poller share one clock
// reading (coarseClock): reading the clock was a tenth of a spinning
// poller's round, and a spin that ends a few rounds late costs
// nanoseconds against a budget of microseconds.
const clockEvery = 8

// coarseClock is a poller's clock for deciding whether to go on spinning:
// read returns a reading at most clockEvery-1 rounds old (never later
// than now; forget it after a park), fresh a new one. Used by one goroutine only.
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
