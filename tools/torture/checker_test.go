package torture

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// TestCompareSetFindsEveryViolation: an acknowledged insert missing is
// lost, an acknowledged delete's key present is resurrected, a key never
// written or a wrong value is unexpected; elements whose insert or delete
// failed may be either way.
func TestCompareSetFindsEveryViolation(t *testing.T) {
	elems := map[string]setState{
		"a": setInserted, "b": setInserted, "c": setDeleted, "d": setDeleted,
		"e": setInsertUnknown, "f": setInsertUnknown, "g": setDeleteUnknown, "h": setDeleteUnknown, "i": setInserted,
	}
	found := map[string][]byte{
		"a": setValue("a"), // kept
		// b lost
		"c": setValue("c"), // resurrected
		// d deleted
		"e": setValue("e"),   // unknown insert that took
		"g": setValue("g"),   // unknown delete that did not
		"i": []byte("other"), // wrong value
		"z": setValue("z"),   // never written
	}
	res := compareSet(elems, found)
	if !slices.Equal(res.lost, []string{"b"}) || !slices.Equal(res.resurrected, []string{"c"}) ||
		!slices.Equal(res.unexpected, []string{"i (wrong value)", "z (never written)"}) {
		t.Fatalf("lost %v resurrected %v unexpected %v", res.lost, res.resurrected, res.unexpected)
	}
	if res.inserted != 3 || res.deleted != 2 || res.scanned != len(found) {
		t.Fatalf("counted %d inserted, %d deleted, %d scanned", res.inserted, res.deleted, res.scanned)
	}
	ok := compareSet(map[string]setState{"a": setInserted, "c": setDeleted}, map[string][]byte{"a": setValue("a")})
	if len(ok.lost)+len(ok.unexpected)+len(ok.resurrected) != 0 {
		t.Fatalf("a correct outcome reported: %+v", ok)
	}
}

// TestRegisterCheckFindsViolations: the register check blames the key of a
// stale read and of a deleted value read back, and accepts an
// indeterminate put read late (its return is unbounded).
func TestRegisterCheckFindsViolations(t *testing.T) {
	op := func(client int, in regInput, out regOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	put := func(k, v string) regInput { return regInput{Kind: regPut, Key: k, Value: v} }
	get := func(k string) regInput { return regInput{Key: k, Via: "get"} }
	w := &registerLoad{}
	w.history = []porcupine.Operation{
		// stale: put 1, put 2 acknowledged, then 1 read
		op(0, put("stale", "1"), regOutput{}, 0, 1), op(0, put("stale", "2"), regOutput{}, 2, 3),
		op(1, get("stale"), regOutput{Value: "1", Found: true}, 4, 5),
		// back: put, delete acknowledged, then the value read
		op(0, put("back", "1"), regOutput{}, 0, 1), op(0, regInput{Kind: regDelete, Key: "back"}, regOutput{}, 2, 3),
		op(1, regInput{Key: "back", Via: "multi-get"}, regOutput{Value: "1", Found: true}, 4, 5),
		// late: an indeterminate put read long after its call
		op(1, get("late"), regOutput{}, 4, 5), op(1, get("late"), regOutput{Value: "x", Found: true}, 6, 7),
	}
	w.unknown = []porcupine.Operation{op(0, put("late", "x"), regOutput{}, 0, 1)}
	res, err := w.check(t.TempDir(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.bad, []string{"back", "stale"}) || res.unknown || res.checked != 9 {
		t.Fatalf("bad %v, unknown %t, checked %d", res.bad, res.unknown, res.checked)
	}
	w.history = w.history[6:] // only the late key
	if res, err := w.check(t.TempDir(), time.Minute); err != nil || len(res.bad) != 0 {
		t.Fatalf("a late indeterminate put: bad %v (%v)", res.bad, err)
	}
}

// TestStartClusterFailureStopsWhatStarted: a start that fails part way
// (here ZooKeeper, its context already over) returns the error after
// stopping what it started, instead of crashing in its cleanup.
func TestStartClusterFailureStopsWhatStarted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o := Options{Binary: "tebis-not-run", Dir: t.TempDir(), Network: "loopback"}
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if c, err := startCluster(ctx, o, loopback{}, false); err == nil || c != nil {
		t.Fatalf("start with its context over: cluster %v, error %v", c, err)
	}
}

// TestUnavailabilityPerRegion: a fault on one region's group is measured
// on that region's operations: the other regions' successes do not hide
// its outage; a cluster-wide fault counts every operation.
func TestUnavailabilityPerRegion(t *testing.T) {
	s := time.Second
	var ops []opSample
	for i := range 10 { // region 2 serves every second
		ops = append(ops, opSample{At: time.Duration(i) * s, OK: true, Region: 2})
	}
	// region 1 succeeds at 0 s and 7 s only
	ops = append(ops, opSample{At: 0, OK: true, Region: 1}, opSample{At: 7 * s, OK: true, Region: 1},
		opSample{At: 3 * s, OK: false, Region: 1})
	got := unavailabilityByKind(ops, []faultSpan{{Kind: killPrimary, Start: 2 * s, End: 4 * s, Region: 1},
		{Kind: killMaster, Start: 2 * s, End: 4 * s}})
	if got[killPrimary] != 7*s || got[killMaster] != s {
		t.Fatalf("unavailability %v, want kill-primary 7s (region 1's gap), kill-master 1s (every operation)", got)
	}
}
