package region

import (
	"testing"
	"time"
)

func TestOpsMeterRate(t *testing.T) {
	var m opsMeter
	t0 := time.Unix(1000, 0)
	if r := m.rate(1, t0); r != 0 {
		t.Fatalf("first rate = %v, want 0", r)
	}
	for range 50 {
		m.add(1)
	}
	m.add(2)
	steps := []struct {
		at   time.Duration
		add  int
		want float64
	}{
		{at: 500 * time.Millisecond, want: 100},             // 50 in 0.5 s since the first sample
		{at: time.Second, add: 50, want: 100},               // the first full window: 100 in 1 s
		{at: 1500 * time.Millisecond, add: 1000, want: 100}, // within the window: the last one's rate
		{at: 3 * time.Second, want: 1000.0 / 2},             // the next window: 1000 in 2 s
		{at: 5 * time.Second, want: 0},                      // idle
	}
	for _, s := range steps {
		for range s.add {
			m.add(1)
		}
		if r := m.rate(1, t0.Add(s.at)); r != s.want {
			t.Fatalf("rate at %v = %v, want %v", s.at, r, s.want)
		}
	}
	if r := m.rate(3, t0); r != 0 {
		t.Fatalf("rate of a region never counted = %v", r)
	}
}
