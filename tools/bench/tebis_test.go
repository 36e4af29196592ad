package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/tebis-go/tebis/tools/ycsb"
)

func TestRunTebisAndPebble(t *testing.T) {
	cfg := Config{
		Engines: []string{"tebis", "pebble"}, RecordCount: 3000, OperationCount: 2000,
		Threads: 3, Sync: true, Dir: t.TempDir(), Seed: testSeed(t), Sizes: ycsb.MixMD,
		L0Pairs: 500, GrowthFactor: 4, Phases: []string{"load", "a", "c", "e"},
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Phases) != 8 {
		t.Fatalf("%d phase results, want 8", len(res.Phases))
	}
	for _, p := range res.Phases {
		if p.NotFound != 0 || p.Latency.Count != p.Ops || p.SpaceBytes == 0 {
			t.Errorf("implausible %s %s: %+v", p.Engine, p.Phase, p)
		}
	}
	for _, e := range []string{"tebis", "pebble"} {
		if p, ok := res.phase(e, "Load A"); !ok || p.Device.Written == 0 || p.IOAmp == 0 {
			t.Errorf("%s Load A: no device bytes counted: %+v", e, p)
		}
	}
}

// TestRunTebisValueSizeAndSegmentSize: 4 KiB values (vN) and a segment
// size reach the engine: every loaded pair carries exactly a 4096-byte
// value, and the log fills segments of the size asked for.
func TestRunTebisValueSizeAndSegmentSize(t *testing.T) {
	sizes, err := ycsb.ParseSizeMix("v4096")
	if err != nil {
		t.Fatal(err)
	}
	const records = 400
	cfg := Config{
		Engines: []string{"tebis"}, RecordCount: records, Threads: 2, Dir: t.TempDir(),
		Seed: testSeed(t), Sizes: sizes, SegmentSize: 256 << 10, Phases: []string{"load"},
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := res.phase("tebis", "Load A")
	if !ok {
		t.Fatal("no Load A")
	}
	// Keys are "user" and up to 20 digits.
	if lo, hi := uint64(records*(4096+5)), uint64(records*(4096+24)); p.UserBytes < lo || p.UserBytes > hi {
		t.Errorf("Load A user bytes %d, want %d..%d (4096-byte values)", p.UserBytes, lo, hi)
	}
	// 400 records of ~4.1 KB fill six 256 KiB segments (2 MiB ones: none).
	if seals := p.Breakdown["segments_used"]; seals < 6 {
		t.Errorf("segments used %v, want >= 6 with 256 KiB segments", seals)
	}
	if res.SegmentSize != 256<<10 {
		t.Errorf("result segment size %d", res.SegmentSize)
	}
	bad := cfg
	bad.Engines = []string{"server"}
	if _, err := Run(context.Background(), bad); !errors.Is(err, ErrBadConfig) {
		t.Errorf("server engine with a segment size: %v, want ErrBadConfig", err)
	}
}
