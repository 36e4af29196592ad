package coord

import "testing"

// TestReportZnodeNames: the report types read and write the znode names
// of the encoding before them (a kind told by its prefix, fields joined
// by dashes), byte for byte: servers and masters of different builds read
// each other's reports.
func TestReportZnodeNames(t *testing.T) {
	for _, c := range []struct {
		znode string
		r     Report
	}{
		{"1-2-rs-a", JoinReport{Region: 1, Epoch: 2, Server: "rs-a"}},
		{"3-4-rs-b-2", JoinReport{Region: 3, Epoch: 4, Server: "rs-b-2"}},
		{"drop-3-4-rs-b-2", DropReport{Region: 3, Epoch: 4, Server: "rs-b-2"}},
		{"log-5-6-38654771200-rs-c", LogReport{Region: 5, Epoch: 6, Server: "rs-c", Pos: 9<<32 | 65536, Complete: true}},
		{"log-7-8-0-x", LogReport{Region: 7, Epoch: 8, Server: "x", Complete: true}},
		{"logi-9-10-12884901988-rs-d", LogReport{Region: 9, Epoch: 10, Server: "rs-d", Pos: 3<<32 | 100}},
		{"release-3-4-rs-b-2", ReleaseReport{Region: 3, Epoch: 4, Server: "rs-b-2"}},
		{"lost-3-4-rs-b-2", LostReport{Region: 3, Epoch: 4, Server: "rs-b-2"}},
		{"18446744073709551615-1-s", JoinReport{Region: 1<<64 - 1, Epoch: 1, Server: "s"}},
	} {
		got, ok := parseReport(c.znode)
		if !ok || got != c.r {
			t.Errorf("%q parsed as %#v, %v; want %#v", c.znode, got, ok, c.r)
		}
		if name := c.r.znode(); name != c.znode {
			t.Errorf("%#v: znode %q, want %q", c.r, name, c.znode)
		}
	}
	for _, bad := range []string{"", "1-2-", "1-x-rs", "drop-1-2", "drop-1-2-", "log-1-2-rs", "log-1-2-x-rs", "log--2-3-rs",
		"logi-1-2-rs", "release-1-2", "lost-1-2", "lost-1-x-rs", "release-x-2-rs", "nope", "-1-2-rs", "1--2-rs"} {
		if r, ok := parseReport(bad); ok {
			t.Errorf("%q parsed as %#v", bad, r)
		}
	}
}

// TestReportKeyAndStale: a report's key names its backup, and
// ForgetReports deletes exactly the reports older than their region's
// epoch to keep.
func TestReportKeyAndStale(t *testing.T) {
	keep := map[uint64]uint64{1: 3}
	for _, c := range []struct {
		r     Report
		stale bool
	}{
		{JoinReport{Region: 1, Epoch: 2, Server: "a"}, true},
		{DropReport{Region: 1, Epoch: 3, Server: "a"}, false},
		{LogReport{Region: 1, Epoch: 2, Server: "a", Pos: 5}, true},
		{LogReport{Region: 2, Epoch: 1, Server: "a", Complete: true}, false}, // a region keep lacks
		{ReleaseReport{Region: 1, Epoch: 2, Server: "a"}, true},
	} {
		k := c.r.Key()
		if want := (ReportKey{Region: k.Region, Epoch: k.Epoch, Server: "a"}); k != want || k.Region == 0 {
			t.Errorf("%#v: key %+v", c.r, k)
		}
		if got := Stale(c.r, keep); got != c.stale {
			t.Errorf("%#v: Stale = %v, want %v", c.r, got, c.stale)
		}
	}
}
