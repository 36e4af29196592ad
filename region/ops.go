package region

import (
	"sync"
	"sync/atomic"
	"time"
)

// opsMeter counts the requests routed to each region and derives their
// rate. Counting is lock-free; rates are read rarely (status pages).
type opsMeter struct {
	counts sync.Map // region id -> *atomic.Uint64

	mu      sync.Mutex
	samples map[uint64]opsSamples
}

// opsSample is a region's count at a time.
type opsSample struct {
	at time.Time
	n  uint64
}

// opsSamples are the two latest samples of a region, at least
// opsWindow apart (prev zero: only one taken so far).
type opsSamples struct{ prev, last opsSample }

// opsWindow is the shortest span a rate is measured over.
const opsWindow = time.Second

// add counts one request of region id.
func (m *opsMeter) add(id uint64) {
	c, ok := m.counts.Load(id)
	if !ok {
		c, _ = m.counts.LoadOrStore(id, new(atomic.Uint64))
	}
	c.(*atomic.Uint64).Add(1)
}

// rate returns region id's requests per second over its latest window of
// at least opsWindow ending at most opsWindow before now (over the time
// since its first sample while no such window exists yet; 0 before that).
func (m *opsMeter) rate(id uint64, now time.Time) float64 {
	var n uint64
	if c, ok := m.counts.Load(id); ok {
		n = c.(*atomic.Uint64).Load()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.samples == nil {
		m.samples = map[uint64]opsSamples{}
	}
	s, ok := m.samples[id]
	switch {
	case !ok:
		m.samples[id] = opsSamples{last: opsSample{now, n}}
		return 0
	case now.Sub(s.last.at) >= opsWindow:
		s.prev, s.last = s.last, opsSample{now, n}
		m.samples[id] = s
	case s.prev.at.IsZero():
		return perSecond(s.last, opsSample{now, n})
	}
	return perSecond(s.prev, s.last)
}

func perSecond(a, b opsSample) float64 {
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 || b.n < a.n {
		return 0
	}
	return float64(b.n-a.n) / d
}
