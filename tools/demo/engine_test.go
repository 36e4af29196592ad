package demo

import (
	"context"
	"testing"

	"github.com/tebis-go/tebis/tools/ycsb"
)

func TestEngineRunAndReopen(t *testing.T) {
	cfg := Config{Dir: t.TempDir(), Records: 3000, Threads: 3, Seed: testSeed(t), Sizes: ycsb.MixSD, L0Pairs: 500}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reopened {
		t.Error("fresh volume reported as reopened")
	}
	cfg.Seed++ // the reload rewrites every record with new values
	res, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Reopened || res.Verified != 3000+DefaultSample {
		t.Errorf("rerun: reopened %v, verified %d", res.Reopened, res.Verified)
	}
}
