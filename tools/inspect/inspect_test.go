package inspect

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/tebis-go/tebis/engine"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// makeVolume builds a small deterministic volume: 400 keys compacted into
// L1, then 40 more in the log tail (one of them a delete). The log stays
// under half a segment, so no next segment is prepared concurrently and
// segment numbers are the same every run.
func makeVolume(t *testing.T, fs vfs.FS, dir string, extra string) {
	t.Helper()
	v, err := engine.Open(engine.Options{FS: fs, Dir: dir, SegmentSize: 64 << 10, NodeSize: 4096, L0Pairs: 100000,
		SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := v.OpenRegion(engine.RegionDesc{ID: 1, Epoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		if err := r.Put(fmt.Appendf(nil, "user%05d", i), bytes.Repeat([]byte{byte('a' + i%26)}, 10+i%20)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Compact(); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitIdle(); err != nil {
		t.Fatal(err)
	}
	for i := 400; i < 440; i++ {
		if err := r.Put(fmt.Appendf(nil, "user%05d", i), []byte("tail"+extra)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Delete([]byte("user00007")); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if got != string(want) {
		t.Fatalf("%s output changed:\n%s\nwant:\n%s", name, got, want)
	}
}

func TestGoldenText(t *testing.T) {
	fs := vfs.NewMem()
	makeVolume(t, fs, "vol", "")
	in, err := engine.OpenInspector(fs, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	run := func(name string, fn func(o Output) error) {
		var b bytes.Buffer
		if err := fn(Output{W: &b}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden(t, name, b.String())
	}
	sum := in.Summary()
	lvl := sum.Regions[0].Levels[0]
	run("summary", func(o Output) error { return Summary(in, o) })
	run("tree", func(o Output) error { return Tree(in, 1, 1, o) })
	run("node", func(o Output) error { return Node(in, lvl.Root, o) })
	run("segment", func(o Output) error { return Segment(in, lvl.Segments[0], o) })
	run("log", func(o Output) error {
		return Log(in, 1, sum.Regions[0].RecoveryPoint, 5, o)
	})
	run("check", func(o Output) error { return Check(in, o) })
	var js bytes.Buffer
	if err := Summary(in, Output{W: &js, JSON: true}); err != nil || !strings.Contains(js.String(), `"recovery_point"`) {
		t.Fatalf("json summary: %v %s", err, js.String())
	}
}

func TestCheckNamesCorruption(t *testing.T) {
	fs := vfs.NewMem()
	makeVolume(t, fs, "vol", "")
	in, err := engine.OpenInspector(fs, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	root := in.Summary().Regions[0].Levels[0].Root
	seg, off := root>>16, int64(root&0xffff)
	in.Close()
	f, err := fs.OpenReadWrite("vol/segments", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	at := int64(seg)*(64<<10) + off + 200
	f.ReadAt(b, at)
	b[0] ^= 1
	f.WriteAt(b, at)
	f.Close()
	in, err = engine.OpenInspector(fs, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	err = Check(in, Output{W: &out})
	want := fmt.Sprintf("segment %d offset %d: node checksum mismatch", seg, off)
	if !errors.Is(err, ErrProblems) || !strings.Contains(out.String(), want) {
		t.Fatalf("check: %v\n%s\nwant a line naming %q", err, out.String(), want)
	}
}

func TestDiff(t *testing.T) {
	fs := vfs.NewMem()
	makeVolume(t, fs, "a", "")
	makeVolume(t, fs, "b", "")
	makeVolume(t, fs, "c", "-changed")
	open := func(dir string) *engine.Inspector {
		in, err := engine.OpenInspector(fs, dir, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { in.Close() })
		return in
	}
	a := open("a")
	var out bytes.Buffer
	if err := Diff(a, open("b"), 1, Output{W: &out}); err != nil || !strings.Contains(out.String(), "equivalent") {
		t.Fatalf("identical volumes: %v\n%s", err, out.String())
	}
	out.Reset()
	err := Diff(a, open("c"), 1, Output{W: &out})
	if !errors.Is(err, ErrProblems) || !strings.Contains(out.String(), "40 with different values") {
		t.Fatalf("changed volume: %v\n%s", err, out.String())
	}
}

// TestSummaryRanges: summary shows each region's key range as its
// descriptor stores it, -inf and +inf only for open ends, in text and in
// JSON.
func TestSummaryRanges(t *testing.T) {
	fs := vfs.NewMem()
	v, err := engine.Open(engine.Options{FS: fs, Dir: "vol", SegmentSize: 64 << 10, NodeSize: 4096,
		SyncMode: engine.SyncModeAsync, GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []engine.RegionDesc{
		{ID: 1, Epoch: 1, End: []byte("m")},
		{ID: 2, Epoch: 3, Start: []byte("m"), End: []byte("t")},
		{ID: 3, Epoch: 1, Start: []byte("t"), End: []byte{0xff, 0x01}},
		{ID: 4, Epoch: 2, Start: []byte{0xff, 0x01}},
	} {
		if _, err := v.CreateRegion(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	in, err := engine.OpenInspector(fs, "vol", false)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()

	var text bytes.Buffer
	if err := Summary(in, Output{W: &text}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`region 1: role primary, epoch 1, keys [-inf, "m")`,
		`region 2: role primary, epoch 3, keys ["m", "t")`,
		`region 3: role primary, epoch 1, keys ["t", 0xff01)`,
		`region 4: role primary, epoch 2, keys [0xff01, +inf)`,
	} {
		if !strings.Contains(text.String(), want+"\n") {
			t.Errorf("text summary lacks %q:\n%s", want, text.String())
		}
	}

	var js bytes.Buffer
	if err := Summary(in, Output{W: &js, JSON: true}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Regions []struct {
			ID                uint64
			Start, End, Range string
		}
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("JSON summary: %v\n%s", err, js.String())
	}
	want := [][3]string{
		{"-inf", "m", `[-inf, "m")`},
		{"m", "t", `["m", "t")`},
		{"t", "0xff01", `["t", 0xff01)`},
		{"0xff01", "+inf", `[0xff01, +inf)`},
	}
	if len(got.Regions) != len(want) {
		t.Fatalf("JSON summary has %d regions, want %d:\n%s", len(got.Regions), len(want), js.String())
	}
	for i, r := range got.Regions {
		if [3]string{r.Start, r.End, r.Range} != want[i] {
			t.Errorf("JSON region %d: start %q end %q range %q, want %q", r.ID, r.Start, r.End, r.Range, want[i])
		}
	}
}
