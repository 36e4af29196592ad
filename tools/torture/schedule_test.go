package torture

import (
	"slices"
	"testing"
	"time"
)

// TestSchedulerReplaysAndCovers: a seed gives the same faults again; with
// cover the first steps are every kind once; holds stay within their
// bounds.
func TestSchedulerReplaysAndCovers(t *testing.T) {
	session := 2 * time.Second
	for seed := range uint64(30) {
		a := newScheduler(seed, nemesisKinds, session, true)
		b := newScheduler(seed, nemesisKinds, session, true)
		seen := map[string]bool{}
		for i := range 3 * len(nemesisKinds) {
			sa, sb := a.next(), b.next()
			if sa != sb {
				t.Fatalf("seed %d step %d: %v and %v", seed, i, sa, sb)
			}
			if i < len(nemesisKinds) {
				if seen[sa.Kind] {
					t.Fatalf("seed %d: %s twice among the covering steps", seed, sa.Kind)
				}
				seen[sa.Kind] = true
			}
			if sa.Hold < 0 || sa.Hold > 6*session {
				t.Fatalf("seed %d: %v: hold out of bounds", seed, sa)
			}
			if !slices.Contains(nemesisKinds, sa.Kind) {
				t.Fatalf("seed %d: unknown kind %q", seed, sa.Kind)
			}
		}
	}
	// Without cover the kinds are drawn: a seed still replays.
	a, b := newScheduler(7, []string{killPrimary, slowLink}, session, false), newScheduler(7, []string{killPrimary, slowLink}, session, false)
	for range 20 {
		if sa, sb := a.next(), b.next(); sa != sb || (sa.Kind != killPrimary && sa.Kind != slowLink) {
			t.Fatalf("%v and %v", sa, sb)
		}
	}
}

// TestKindsFor: network kinds are left out without namespaces, a
// ZooKeeper minority without an ensemble of 3, and an unknown kind is an
// error.
func TestKindsFor(t *testing.T) {
	kinds, left, err := kindsFor(nil, false, false, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range nemesisKinds {
		if (needsNetwork(k) || k == diskFull) != (left[k] != "") || slices.Contains(kinds, k) == (left[k] != "") {
			t.Fatalf("%s: kept %t, left out %q", k, slices.Contains(kinds, k), left[k])
		}
	}
	kinds, left, err = kindsFor(nil, true, true, 1)
	if err != nil || len(left) != 1 || left[cutZKMinority] == "" || len(kinds) != len(nemesisKinds)-1 {
		t.Fatalf("with namespaces, 1 ZooKeeper: %v left %v (%v)", kinds, left, err)
	}
	if kinds, _, err = kindsFor(nil, true, true, 3); err != nil || !slices.Equal(kinds, nemesisKinds) {
		t.Fatalf("everything: %v (%v)", kinds, err)
	}
	if _, _, err := kindsFor([]string{"kill-everything"}, true, true, 3); err == nil {
		t.Fatal("an unknown nemesis was accepted")
	}
	if _, _, err := kindsFor([]string{slowLink}, false, true, 3); err == nil {
		t.Fatal("a run with no nemesis it can inject was accepted")
	}
}
