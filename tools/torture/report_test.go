package torture

import (
	"bytes"
	"maps"
	"strings"
	"testing"
	"time"
)

// sec is s seconds.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// okAt is a successful operation returning at ret (called 1 ms before).
func okAt(ret float64) opSample {
	return opSample{At: sec(ret) - time.Millisecond, Latency: time.Millisecond, OK: true, Kind: "get"}
}

// failAt is a failed operation returning at ret (called 1 s before, or at
// 0 if ret < 1).
func failAt(ret float64) opSample {
	at := max(sec(ret)-time.Second, 0)
	return opSample{At: at, Latency: sec(ret) - at, Kind: "put"}
}

func TestLongestUnavailable(t *testing.T) {
	tests := []struct {
		name       string
		ops        []opSample
		start, end float64
		want       float64
	}{
		{"no ops", nil, 1, 2, 0},
		{"no success: start to the end of the samples", []opSample{failAt(2), failAt(8)}, 3, 4, 5},
		{"no success, samples end before start", []opSample{failAt(2), failAt(8)}, 10, 12, 0},
		{"no success, samples end at start", []opSample{failAt(2), failAt(8)}, 8, 12, 0},
		{"success exactly at start ends the gap before it",
			[]opSample{okAt(1), okAt(10), okAt(14), failAt(16)}, 10, 12, 4},
		{"the gap before a success just after start counts",
			[]opSample{okAt(1), okAt(10), okAt(14), failAt(16)}, 9.9, 12, 9},
		{"no success before start: the gap begins at start",
			[]opSample{failAt(0.5), okAt(5), okAt(6)}, 1, 2, 4},
		{"no success after the last one: runs to the end of the samples",
			[]opSample{okAt(1), okAt(2), failAt(10)}, 3, 4, 8},
		{"the end of the samples is the latest return, failed or not",
			[]opSample{okAt(1), okAt(2), failAt(10), failAt(6)}, 3, 4, 8},
		{"last success is the end of the samples", []opSample{okAt(1), okAt(2)}, 3, 4, 0},
		{"success exactly at end: the gap after it starts after the window",
			[]opSample{okAt(1), okAt(5), okAt(20)}, 2, 5, 4},
		{"a gap holding the whole window counts whole",
			[]opSample{okAt(1), okAt(2), okAt(10), okAt(11)}, 3, 4, 8},
		{"the longest of the gaps in the window",
			[]opSample{okAt(0.5), okAt(1), okAt(3), okAt(3.5), okAt(7), okAt(8), okAt(30)}, 2, 6, 3.5},
		{"gaps outside the window do not count",
			[]opSample{okAt(0.5), okAt(1), okAt(3), okAt(3.5), okAt(7), okAt(8), okAt(30)}, 3.2, 3.4, 0.5},
		{"instantaneous window", []opSample{okAt(1), okAt(5)}, 3, 3, 4},
		{"instantaneous window at a success", []opSample{okAt(1), okAt(5), okAt(6)}, 5, 5, 0},
		{"end before start is start", []opSample{okAt(1), okAt(5)}, 3, 2, 4},
		{"order of the samples does not matter",
			[]opSample{okAt(7), okAt(3), okAt(30), okAt(1), okAt(3.5), okAt(8), okAt(0.5)}, 2, 6, 3.5},
		{"a success counts at its return, not its call",
			[]opSample{okAt(1), {At: sec(2), Latency: sec(8), OK: true}, okAt(12)}, 3, 4, 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := longestUnavailable(tc.ops, sec(tc.start), sec(tc.end))
			if want := sec(tc.want); got != want {
				t.Errorf("longestUnavailable([%g, %g]) = %v, want %v", tc.start, tc.end, got, want)
			}
		})
	}
}

func TestUnavailabilityByKind(t *testing.T) {
	ops := []opSample{okAt(1), okAt(2), okAt(10), okAt(11), okAt(12), okAt(20), okAt(21), failAt(25)}
	tests := []struct {
		name   string
		faults []faultSpan
		want   map[string]time.Duration
	}{
		{"no faults", nil, nil},
		{"max over the faults of a kind", []faultSpan{
			{Kind: "kill-primary", Start: sec(3), End: sec(4)},     // gap 2..10
			{Kind: "kill-primary", Start: sec(10.5), End: sec(11)}, // gap 10..11
			{Kind: "partition-primary-zk", Start: sec(13), End: sec(14)},
			{Kind: "partition-primary-zk", Start: sec(22), End: sec(23)}, // 21..25
		}, map[string]time.Duration{"kill-primary": sec(8), "partition-primary-zk": sec(8)}},
		{"a kind with no unavailability has 0", []faultSpan{
			{Kind: "pause", Start: sec(30), End: sec(31)},
			{Kind: "kill-backup", Start: sec(11.2), End: sec(11.5)},
		}, map[string]time.Duration{"pause": 0, "kill-backup": sec(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := unavailabilityByKind(ops, tc.faults)
			if !maps.Equal(got, tc.want) {
				t.Errorf("unavailabilityByKind = %v, want %v", got, tc.want)
			}
		})
	}
	if got := unavailabilityByKind(nil, []faultSpan{{Kind: "k", Start: sec(1), End: sec(2)}}); !maps.Equal(got, map[string]time.Duration{"k": 0}) {
		t.Errorf("unavailabilityByKind(no ops) = %v", got)
	}
}

func testSummary() summary {
	return summary{
		Seed:     42,
		Duration: sec(300.0004),
		Network:  "netns (partitions: ip rule blackhole; shaping: tbf)",
		Ops:      map[string]int{"put": 1200, "get": 5000, "delete": 30, "scan": 7},
		Failed:   map[string]int{"unavailable": 12, "timeout": 3},
		Faults:   map[string]int{"kill-primary": 3, "partition-primary-zk": 2},
		Unavail: map[string]time.Duration{
			"kill-primary":         sec(2.3456),
			"partition-primary-zk": sec(11.0001),
		},
		Checked:    map[string]int{"register": 4000, "set": 900, "deletes": 30},
		Violations: map[string]int{"register": 0, "set lost": 0, "set unexpected": 0, "deletes resurrected": 0, "liveness": 0},
	}
}

func TestWriteTableGolden(t *testing.T) {
	var b bytes.Buffer
	if err := testSummary().writeTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `seed      42
duration  5m0s
network   netns (partitions: ip rule blackhole; shaping: tbf)

operations    ok
  delete      30
  get       5000
  put       1200
  scan         7
  total     6237

failures       count
  timeout          3
  unavailable     12
  total           15

faults                  count  longest unavailable
  kill-primary              3               2.346s
  partition-primary-zk      2                  11s
  total                     5

checker                checked  violations
  deletes                   30           -
  deletes resurrected        -           0
  liveness                   -           0
  register                4000           0
  set                      900           -
  set lost                   -           0
  set unexpected             -           0

VALID
`
	if got := b.String(); got != want {
		t.Errorf("writeTable:\n%s\nwant:\n%s", got, want)
	}
}

func TestWriteTableInvalid(t *testing.T) {
	s := testSummary()
	s.Violations = maps.Clone(s.Violations)
	s.Violations["register"] = 2
	s.Violations["set lost"] = 1
	s.Artifacts = "runs/seed-42"
	if s.valid() {
		t.Fatal("valid() with violations")
	}
	var b bytes.Buffer
	if err := s.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if n := len(lines); lines[n-2] != "INVALID (3 violations)" || lines[n-1] != "artifacts runs/seed-42" {
		t.Errorf("last lines %q, want the verdict and the artifacts", lines[n-2:])
	}
	for _, want := range []string{"  register                4000           2", "  set lost                   -           1"} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("no line %q in\n%s", want, b.String())
		}
	}

	// Deterministic: the same summary gives the same text.
	var again bytes.Buffer
	if err := s.writeTable(&again); err != nil {
		t.Fatal(err)
	}
	if again.String() != b.String() {
		t.Error("writeTable is not deterministic")
	}
}

func TestWriteTableEmpty(t *testing.T) {
	var s summary
	if !s.valid() {
		t.Fatal("empty summary not valid")
	}
	var b bytes.Buffer
	if err := s.writeTable(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"seed      0\n", "network   -\n", "  total       0\n", "\nVALID\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "artifacts") {
		t.Errorf("artifacts line without artifacts:\n%s", out)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errTest }

var errTest = &testError{}

type testError struct{}

func (*testError) Error() string { return "test write error" }

func TestWriteTableWriteError(t *testing.T) {
	if err := testSummary().writeTable(failingWriter{}); err != errTest {
		t.Errorf("writeTable to a failing writer = %v, want %v", err, errTest)
	}
}
