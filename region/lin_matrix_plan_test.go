package region_test

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestLinPlanFromEnv: the sampled pick is the seed's, has only
// configurations with a fault left to inject, and names and patterns
// select configurations.
func TestLinPlanFromEnv(t *testing.T) {
	for _, v := range []string{"TEBIS_LIN_CONFIGS", "TEBIS_LIN_PICK", "TEBIS_LIN_UNSAFE", "TEBIS_LIN_DURATION", "TEBIS_LIN_TOTAL", "TEBIS_LIN_L0", "TEBIS_LIN_FAULTS"} {
		t.Setenv(v, "")
	}
	t.Setenv("TEBIS_LIN_PICK", "4")
	for seed := range uint64(20) {
		a := linPlanFromEnv(t, rand.New(rand.NewPCG(seed, 17)))
		b := linPlanFromEnv(t, rand.New(rand.NewPCG(seed, 17)))
		if len(a.configs) == 0 || !slices.Equal(a.configs, b.configs) {
			t.Fatalf("seed %d: picks %v and %v", seed, a.configs, b.configs)
		}
		for _, c := range a.configs {
			if f, _ := a.faultsFor(c); len(f) == 0 {
				t.Fatalf("seed %d: picked %s, which has no fault left to inject", seed, c.Name())
			}
		}
	}
	t.Setenv("TEBIS_LIN_CONFIGS", "async-*-tcp-2,sync-send-shm-3")
	var names []string
	for _, c := range linPlanFromEnv(t, rand.New(rand.NewPCG(1, 1))).configs {
		names = append(names, c.Name())
	}
	if want := []string{"async-send-tcp-2", "async-build-tcp-2", "sync-send-shm-3"}; !slices.Equal(names, want) {
		t.Fatalf("configurations %v, want %v", names, want)
	}
	t.Setenv("TEBIS_LIN_CONFIGS", "all")
	if n := len(linPlanFromEnv(t, rand.New(rand.NewPCG(1, 1))).configs); n != 16 {
		t.Fatalf("all: %d configurations", n)
	}
	// A 2-way configuration never gets a double failover.
	p := linPlan{unsafe: true}
	if f, _ := p.faultsFor(linConfig{Sync: true, SendIndex: true, Transport: "shm", Replicas: 2}); slices.Contains(f, faultDoubleFailover) || len(f) != len(allFaults)-1 {
		t.Fatalf("2-way faults %v", f)
	}
}
