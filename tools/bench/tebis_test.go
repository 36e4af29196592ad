package bench

import (
	"context"
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
