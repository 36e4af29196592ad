package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/tools/ycsb"
)

func testSeed(t *testing.T) uint64 { return testseed.Seed(t) }

func TestCountingFS(t *testing.T) {
	fs := NewCountingFS(vfs.NewMem())
	f, err := fs.Create("a", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = fs.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ReadAt(make([]byte, 30), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Read(make([]byte, 200)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if got := fs.Bytes(); got != (IOBytes{Read: 130, Written: 100}) {
		t.Errorf("counted %+v, want 130 read, 100 written", got)
	}
	if n, err := dirSize(fs, ""); err != nil || n != 100 {
		t.Errorf("dirSize = %d, %v; want 100", n, err)
	}
}

func TestRunPebble(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{
		Engines: []string{"pebble"}, RecordCount: 3000, OperationCount: 2000,
		Threads: 3, Sync: false, Dir: dir, Seed: testSeed(t), Sizes: ycsb.MixSD,
		DiskBWBytes: 4 << 20, Phases: []string{"load", "a", "c", "d", "e", "f"},
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 6 || res.DiskWriteBps <= 0 || res.DiskWriteBpsAfter <= 0 || res.DiskSyncedWriteBpsAfter <= 0 {
		t.Fatalf("%d phases, disk bw %v", len(res.Phases), res.DiskWriteBps)
	}
	for _, p := range res.Phases {
		if p.OpsPerSec <= 0 || p.UserBytes == 0 || p.Device.Written == 0 && p.Phase == "Load A" ||
			p.SpaceBytes == 0 || p.Latency.Count != p.Ops || p.NotFound != 0 {
			t.Errorf("implausible %s: %+v", p.Phase, p)
		}
	}
	if last := res.Phases[len(res.Phases)-1]; last.Records < 3000+100 {
		t.Errorf("after D and E: %d records, want > 3100", last.Records)
	}
	if res.LoadFraction("pebble") <= 0 || res.SyncedLoadFraction("pebble") <= 0 || res.DiskSyncChunk != 2<<20 {
		t.Errorf("no Load A bandwidth fractions (synced chunk %d)", res.DiskSyncChunk)
	}
	var buf bytes.Buffer
	if err := res.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Load A", "Run F", "ops/s", "p99 µs", "pebble counters", "fdatasync every 2097152 bytes"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	path := filepath.Join(dir, "r.json")
	if err := res.WriteJSONFile(path); err != nil {
		t.Fatal(err)
	}
	var back Result
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &back) != nil || len(back.Phases) != 6 {
		t.Errorf("JSON round trip: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 1 { // only r.json
		t.Errorf("scratch directory left behind: %v", left)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, cfg := range []Config{
		{Engines: []string{"rocksdb"}, RecordCount: 10},
		{Engines: []string{"pebble"}, RecordCount: 0},
		{Engines: []string{"pebble"}, RecordCount: 10, Phases: []string{"a"}},
		{Engines: []string{"pebble"}, RecordCount: 10, Rounds: -1},
		{Engines: []string{"pebble"}, RecordCount: 10, Rounds: MaxRounds + 1},
	} {
		_, err := Run(context.Background(), cfg)
		if !errors.Is(err, ErrBadConfig) && !errors.Is(err, ErrUnknownEngine) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestSyncedSeqWrite: the synced sequential write fdatasyncs after every
// chunk (the last one's sync is the final one), the plain one once.
func TestSyncedSeqWrite(t *testing.T) {
	for _, c := range []struct {
		synced bool
		want   int64
	}{{false, 1}, {true, 4}} {
		var syncs atomic.Int64
		fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind == errorfs.OpFileSyncData {
				syncs.Add(1)
			}
			return nil
		}))
		f := SeqWriteBandwidth
		if c.synced {
			f = SyncedSeqWriteBandwidth
		}
		if bw, err := f(fs, "", 4<<20, 1<<20); err != nil || bw <= 0 {
			t.Fatalf("synced %v: %v, %v", c.synced, bw, err)
		}
		if got := syncs.Load(); got != c.want {
			t.Errorf("synced %v: %d fdatasyncs, want %d", c.synced, got, c.want)
		}
	}
}
