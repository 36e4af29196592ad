package torture

import (
	"fmt"
	"io"
	"time"
)

// Totals sums the results of runs with different seeds.
type Totals struct {
	sum     summary
	runs    int
	invalid []uint64 // the seeds of runs with violations
}

// Add counts one run's result.
func (t *Totals) Add(r *Result) {
	if t.runs == 0 {
		t.sum = summary{Network: r.Network, Ops: map[string]int{}, Failed: map[string]int{}, Faults: map[string]int{},
			Unavail: map[string]time.Duration{}, Checked: map[string]int{}, Violations: map[string]int{}}
	}
	t.runs++
	t.sum.Duration += r.Duration
	for _, m := range [][2]map[string]int{{t.sum.Ops, r.Ops}, {t.sum.Failed, r.Failed}, {t.sum.Faults, r.Faults},
		{t.sum.Checked, r.Checked}, {t.sum.Violations, r.Violations}} {
		for k, v := range m[1] {
			m[0][k] += v
		}
	}
	for k, v := range r.Unavail {
		t.sum.Unavail[k] = max(t.sum.Unavail[k], v)
	}
	if !r.Valid() {
		t.invalid = append(t.invalid, r.Seed)
	}
}

// Valid reports whether no run had a violation.
func (t *Totals) Valid() bool { return len(t.invalid) == 0 }

// Runs is the number of runs added.
func (t *Totals) Runs() int { return t.runs }

// WriteTable writes the runs' summed table: the seed line lists the runs'
// count and the seeds with violations.
func (t *Totals) WriteTable(w io.Writer) error {
	if _, err := fmt.Fprintf(w, "%d runs; seeds with violations: %v\n", t.runs, t.invalid); err != nil {
		return err
	}
	s := t.sum
	s.Seed = 0
	return s.writeTable(w)
}
