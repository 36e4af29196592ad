package demo

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/tebis-go/tebis/internal/testseed"
	"github.com/tebis-go/tebis/tools/ycsb"
)

func testSeed(t *testing.T) uint64 { return testseed.Seed(t) }

// mapStore is an in-memory store; corrupt, if set, damages every value read.
type mapStore struct {
	mu      sync.Mutex
	m       map[string][]byte
	corrupt bool
}

func (s *mapStore) Put(k, v []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[string(k)] = bytes.Clone(v)
	return nil
}

func (s *mapStore) Get(k []byte) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[string(k)]
	if ok && s.corrupt {
		v = append(bytes.Clone(v[1:]), v[0]+1)
	}
	return v, ok, nil
}

func (s *mapStore) WaitIdle() error { return nil }
func (s *mapStore) Close() error    { return nil }

func testConfig(t *testing.T) Config {
	cfg, err := Config{Records: 3000, Threads: 3, Seed: testSeed(t), Sizes: ycsb.MixLD}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestRunVerifies(t *testing.T) {
	cfg := testConfig(t)
	s := &mapStore{m: map[string][]byte{}}
	res, err := run(context.Background(), cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.m) != 3000 || res.Load.Ops != 3000 || res.Read.Ops != 3000 {
		t.Errorf("stored %d, loaded %d, read %d; want 3000 each", len(s.m), res.Load.Ops, res.Read.Ops)
	}
	if res.Verified != 3000+DefaultSample {
		t.Errorf("verified %d values, want %d", res.Verified, 3000+DefaultSample)
	}
	if res.Load.UserBytes <= 0 || res.Read.UserBytes <= 0 {
		t.Errorf("user bytes load %d read %d", res.Load.UserBytes, res.Read.UserBytes)
	}
}

func TestRunDetectsCorruption(t *testing.T) {
	cfg := testConfig(t)
	s := &mapStore{m: map[string][]byte{}, corrupt: true}
	if _, err := run(context.Background(), cfg, s); !errors.Is(err, ErrMismatch) {
		t.Errorf("corrupt store: %v, want ErrMismatch", err)
	}
}

func TestRunDetectsMissing(t *testing.T) {
	cfg := testConfig(t)
	gen, err := ycsb.NewGenerator(ycsb.Workload{Load: true, RecordCount: 10, Sizes: cfg.Sizes}, cfg.Seed)
	if err != nil {
		t.Fatal(err)
	}
	s := &mapStore{m: map[string][]byte{}}
	if _, err := verify(s, gen, 3, gen.AppendKey(nil, 3)); !errors.Is(err, ErrMissing) {
		t.Errorf("empty store: %v, want ErrMissing", err)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	cfg := testConfig(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := run(ctx, cfg, &mapStore{m: map[string][]byte{}}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled run: %v", err)
	}
}
