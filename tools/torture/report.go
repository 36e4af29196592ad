package torture

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// opSample is one client operation, for the timeline and unavailability.
type opSample struct {
	At      time.Duration // call time since the run's start
	Latency time.Duration // return - call
	OK      bool          // it succeeded (a value, not found, or an acknowledged write)
	Kind    string        // "put", "get", "delete", "multi-get", "scan", "insert"
	Region  int           // the region (1-based, in key order) of its key; 0: several or unknown
}

// faultSpan is one injected fault: from its first disruptive action to the
// moment it was healed and the cluster whole again.
type faultSpan struct {
	Kind       string // nemesis kind, e.g. "kill-primary", "partition-primary-zk"
	Start, End time.Duration
	Note       string
	Region     int // the region (1-based, in key order) whose group it hit; 0: the whole cluster
}

// summary is what a run found.
type summary struct {
	Seed       uint64
	Duration   time.Duration
	Network    string                   // how faults reached the network, e.g. "netns (partitions: ip rule blackhole; shaping: tbf)" or "loopback (no partitions)"
	Ops        map[string]int           // succeeded operations by kind
	Failed     map[string]int           // failed operations by error class ("unavailable", "timeout", ...)
	Faults     map[string]int           // injected faults by kind
	Unavail    map[string]time.Duration // longest unavailability per fault kind (see unavailabilityByKind)
	Checked    map[string]int           // operations checked per checker ("register", "set", "deletes")
	Violations map[string]int           // per checker: register (keys not linearizable), set lost, set unexpected, deletes resurrected, liveness
	Artifacts  string                   // directory of a violation's artifacts, "" if none
}

// successHistory is the successful returns of a history, sorted, and the
// end of the history (the latest return of any operation, successful or
// not): what longestUnavailable needs, computed once for many windows.
type successHistory struct {
	rets []time.Duration // At+Latency of the successful operations, ascending
	end  time.Duration   // max At+Latency over all operations; 0 if none
}

func newSuccessHistory(ops []opSample) successHistory {
	var h successHistory
	for i, op := range ops {
		r := op.At + op.Latency
		if i == 0 || r > h.end {
			h.end = r
		}
		if op.OK {
			h.rets = append(h.rets, r)
		}
	}
	sort.Slice(h.rets, func(i, j int) bool { return h.rets[i] < h.rets[j] })
	return h
}

// longest is longestUnavailable over the history h.
func (h successHistory) longest(start, end time.Duration) time.Duration {
	if end < start {
		end = start
	}
	rets := h.rets
	// rets[:i] returned at or before start; rets[i:] after it.
	i := sort.Search(len(rets), func(k int) bool { return rets[k] > start })
	// The gap running at start begins at the last success at or before
	// start (a success bounds a gap without belonging to it), or at start
	// itself when there was none (then the gap holds start).
	lo, loIsSuccess := start, false
	if i > 0 {
		lo, loIsSuccess = rets[i-1], true
	}
	var best time.Duration
	for j := i; ; j++ {
		last := j == len(rets)
		hi := h.end // no success after lo: the gap runs to the end of the samples
		if !last {
			hi = rets[j]
		}
		// The gap starts after the window: so do all later ones.
		if lo > end || (lo == end && loIsSuccess) {
			break
		}
		// A success-bounded gap here ends after start (rets[j] > start);
		// the final gap must still reach start.
		if hi >= start && hi-lo > best {
			best = hi - lo
		}
		if last {
			break
		}
		lo, loIsSuccess = hi, true
	}
	return best
}

// longestUnavailable returns the length of the longest interval in which no
// operation of ops succeeded, among the intervals that intersect the window
// [start, end] (an end before start is taken as start). The intervals are
// the gaps between consecutive successful returns (At+Latency); the gap
// holding start begins at the last success at or before start, or at start
// itself if none; after the last success the gap runs to the end of the
// samples, the latest return of any operation. A gap is bounded by its
// successes, which do not belong to it: a success exactly at start ends the
// gap before it, which then does not count. The whole gap's length counts,
// also the part outside the window. It returns 0 for no operations, and
// for no success the length from start to the end of the samples (0 if they
// end before start).
func longestUnavailable(ops []opSample, start, end time.Duration) time.Duration {
	return newSuccessHistory(ops).longest(start, end)
}

// unavailabilityByKind returns, for every fault kind in faults, the longest
// unavailability (longestUnavailable over the fault's [Start, End]) among
// that kind's faults. A fault that hit one region's group is measured on
// that region's operations only (the other regions' successes would hide
// its outage); one that hit the whole cluster, on every operation. Every
// kind present has an entry, possibly 0; it is nil for no faults.
func unavailabilityByKind(ops []opSample, faults []faultSpan) map[string]time.Duration {
	if len(faults) == 0 {
		return nil
	}
	byRegion := map[int][]opSample{}
	for _, op := range ops {
		if op.Region != 0 {
			byRegion[op.Region] = append(byRegion[op.Region], op)
		}
	}
	hists := map[int]successHistory{0: newSuccessHistory(ops)}
	out := make(map[string]time.Duration)
	for _, f := range faults {
		h, ok := hists[f.Region]
		if !ok {
			h = newSuccessHistory(byRegion[f.Region])
			hists[f.Region] = h
		}
		u := h.longest(f.Start, f.End)
		if cur, ok := out[f.Kind]; !ok || u > cur {
			out[f.Kind] = u
		}
	}
	return out
}

// violationCount is the total of s.Violations.
func (s summary) violationCount() int {
	n := 0
	for _, v := range s.Violations {
		n += v
	}
	return n
}

// valid reports whether the run found no violation at all: every entry of
// s.Violations is 0.
func (s summary) valid() bool {
	for _, v := range s.Violations {
		if v != 0 {
			return false
		}
	}
	return true
}

// writeTable writes s to w as a plain-text table: a header (seed,
// duration, network); the succeeded operations by kind and the failed
// ones by error class, each with its total; the faults by kind with their
// count and longest unavailability ("-" where Unavail has no entry); per
// checker (the keys of Checked and Violations) the operations checked and
// the violations found ("-" where the checker has no entry); then a last
// line "VALID" or "INVALID (n violations)", n the total of Violations,
// followed by a line "artifacts <dir>" if s.Artifacts is set. Keys are
// listed in sorted order, so equal summaries give equal text. It returns
// the first write error.
func (s summary) writeTable(w io.Writer) error {
	network := s.Network
	if network == "" {
		network = "-"
	}
	var t textTable
	t.row("seed", strconv.FormatUint(s.Seed, 10))
	t.row("duration", s.Duration.Round(time.Millisecond).String())
	t.row("network", network)
	if err := t.write(w, false); err != nil {
		return err
	}

	t = textTable{}
	t.row("")
	t.row("operations", "ok")
	for _, k := range sortedKeys(s.Ops) {
		t.row("  "+k, strconv.Itoa(s.Ops[k]))
	}
	t.row("  total", strconv.Itoa(sum(s.Ops)))
	t.row("")
	t.row("failures", "count")
	for _, k := range sortedKeys(s.Failed) {
		t.row("  "+k, strconv.Itoa(s.Failed[k]))
	}
	t.row("  total", strconv.Itoa(sum(s.Failed)))
	t.row("")
	t.row("faults", "count", "longest unavailable")
	for _, k := range union(sortedKeys(s.Faults), sortedKeys(s.Unavail)) {
		u := "-"
		if d, ok := s.Unavail[k]; ok {
			u = d.Round(time.Millisecond).String()
		}
		t.row("  "+k, strconv.Itoa(s.Faults[k]), u)
	}
	t.row("  total", strconv.Itoa(sum(s.Faults)))
	t.row("")
	t.row("checker", "checked", "violations")
	for _, k := range union(sortedKeys(s.Checked), sortedKeys(s.Violations)) {
		checked, violations := "-", "-"
		if n, ok := s.Checked[k]; ok {
			checked = strconv.Itoa(n)
		}
		if n, ok := s.Violations[k]; ok {
			violations = strconv.Itoa(n)
		}
		t.row("  "+k, checked, violations)
	}
	t.row("")
	if s.valid() {
		t.row("VALID")
	} else {
		t.row(fmt.Sprintf("INVALID (%d violations)", s.violationCount()))
	}
	if s.Artifacts != "" {
		t.row("artifacts " + s.Artifacts)
	}
	return t.write(w, true)
}

// textTable is rows of cells written with aligned columns. A row of one
// cell takes no part in the alignment (a heading, a verdict, an empty
// separator line).
type textTable struct {
	rows [][]string
}

func (t *textTable) row(cells ...string) { t.rows = append(t.rows, cells) }

// write writes the rows to w, the columns separated by two spaces and
// padded to the widest cell of their block (the rows between two rows of
// one cell): the first column aligned left, the others right if
// rightAlign (for numbers), else left. Lines carry no trailing spaces.
func (t *textTable) write(w io.Writer, rightAlign bool) error {
	var b strings.Builder
	for i := 0; i < len(t.rows); {
		if len(t.rows[i]) < 2 {
			b.WriteString(strings.Join(t.rows[i], ""))
			b.WriteByte('\n')
			i++
			continue
		}
		j := i
		var widths []int
		for ; j < len(t.rows) && len(t.rows[j]) >= 2; j++ {
			for k, c := range t.rows[j] {
				if k == len(widths) {
					widths = append(widths, 0)
				}
				widths[k] = max(widths[k], utf8.RuneCountInString(c))
			}
		}
		for _, r := range t.rows[i:j] {
			var line strings.Builder
			for k, c := range r {
				pad := strings.Repeat(" ", widths[k]-utf8.RuneCountInString(c))
				if k > 0 {
					line.WriteString("  ")
				}
				if k > 0 && rightAlign {
					line.WriteString(pad + c)
				} else {
					line.WriteString(c + pad)
				}
			}
			b.WriteString(strings.TrimRight(line.String(), " "))
			b.WriteByte('\n')
		}
		i = j
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// union merges two sorted lists of keys into one sorted list without
// duplicates.
func union(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
