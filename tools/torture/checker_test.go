package torture

import (
	"context"
	"fmt"
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

// regKeyHistory is one key's history: pairs of an acknowledged put and a
// read of it, after open indeterminate puts of values never read.
func regKeyHistory(key string, open, pairs int) (acked, unknown []porcupine.Operation) {
	tm := int64(0)
	for i := range open {
		unknown = append(unknown, porcupine.Operation{ClientId: 100 + i, Input: regInput{Kind: regPut, Key: key, Value: fmt.Sprintf("u%d", i)}, Call: tm, Return: tm + 1})
		tm += 2
	}
	for i := range pairs {
		acked = append(acked,
			porcupine.Operation{ClientId: 0, Input: regInput{Kind: regPut, Key: key, Value: fmt.Sprintf("a%d", i)}, Output: regOutput{}, Call: tm, Return: tm + 1},
			porcupine.Operation{ClientId: 1, Input: regInput{Key: key, Via: "get"}, Output: regOutput{Value: fmt.Sprintf("a%d", i), Found: true}, Call: tm + 2, Return: tm + 3})
		tm += 4
	}
	return acked, unknown
}

// TestRegisterCheckDecidesWithOpenWrites: a stale read on a key with a
// dozen indeterminate puts open (never read: a client retrying through a
// failover) is found not linearizable within the bound; the open puts do
// not make the search exponential. A read of an open put's value, or a
// delete's "not found", keeps that write in the check.
func TestRegisterCheckDecidesWithOpenWrites(t *testing.T) {
	acked, unknown := regKeyHistory("k", 12, 400)
	end := acked[len(acked)-1].Return
	stale := porcupine.Operation{ClientId: 1, Input: regInput{Key: "k", Via: "get"}, Output: regOutput{Value: "a3", Found: true}, Call: end + 1, Return: end + 2}
	w := &registerLoad{history: append(slices.Clone(acked), stale), unknown: unknown}
	start := time.Now()
	res, err := w.check(t.TempDir(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.bad, []string{"k"}) || res.unknown || res.checked != len(acked)+1+len(unknown) {
		t.Fatalf("bad %v, undecided %v, checked %d after %v: want key k not linearizable", res.bad, res.undecided, res.checked, time.Since(start))
	}

	// The same history without the stale read, and an open put read at the
	// end: linearizable.
	late := porcupine.Operation{ClientId: 1, Input: regInput{Key: "k", Via: "get"}, Output: regOutput{Value: "u5", Found: true}, Call: end + 1, Return: end + 2}
	w = &registerLoad{history: append(slices.Clone(acked), late), unknown: unknown}
	if res, err := w.check(t.TempDir(), 5*time.Second); err != nil || len(res.bad) != 0 || res.unknown {
		t.Fatalf("open put read late: bad %v, undecided %v (%v)", res.bad, res.undecided, err)
	}
	// Read, then the earlier value read back: the open put took effect
	// before its read; a399 coming back after it is stale.
	back := porcupine.Operation{ClientId: 1, Input: regInput{Key: "k", Via: "get"}, Output: regOutput{Value: "a399", Found: true}, Call: end + 3, Return: end + 4}
	w = &registerLoad{history: append(slices.Clone(acked), late, back), unknown: unknown}
	if res, err := w.check(t.TempDir(), 5*time.Second); err != nil || !slices.Equal(res.bad, []string{"k"}) {
		t.Fatalf("a value read back after an open put's: bad %v, undecided %v (%v)", res.bad, res.undecided, err)
	}
	// An open delete and "not found" read after it: linearizable; without
	// the delete it is not (the delete is kept).
	del := porcupine.Operation{ClientId: 99, Input: regInput{Kind: regDelete, Key: "k"}, Call: end - 10, Return: end - 9}
	gone := porcupine.Operation{ClientId: 1, Input: regInput{Key: "k", Via: "get"}, Output: regOutput{}, Call: end + 1, Return: end + 2}
	w = &registerLoad{history: append(slices.Clone(acked), gone), unknown: append(slices.Clone(unknown), del)}
	if res, err := w.check(t.TempDir(), 5*time.Second); err != nil || len(res.bad) != 0 || res.unknown {
		t.Fatalf("open delete read late: bad %v, undecided %v (%v)", res.bad, res.undecided, err)
	}
	w.unknown = unknown
	if res, err := w.check(t.TempDir(), 5*time.Second); err != nil || !slices.Equal(res.bad, []string{"k"}) {
		t.Fatalf("not found with no delete: bad %v, undecided %v (%v)", res.bad, res.undecided, err)
	}
}

// TestRegisterHistoryRewrites: which indeterminate writes the check keeps
// and how long they stay open.
func TestRegisterHistoryRewrites(t *testing.T) {
	op := func(in regInput, out regOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{Input: in, Output: out, Call: call, Return: ret}
	}
	put := func(v string) regInput { return regInput{Kind: regPut, Key: "k", Value: v} }
	get := regInput{Key: "k", Via: "get"}
	acked := []porcupine.Operation{
		op(get, regOutput{Value: "x", Found: true}, 10, 20),
		op(get, regOutput{Value: "x", Found: true}, 12, 15),
		op(get, regOutput{}, 30, 40),
		op(regInput{Key: "j", Via: "multi-get"}, regOutput{Value: "y", Found: true}, 10, 20),
	}
	unknown := []porcupine.Operation{
		op(put("x"), regOutput{}, 5, 6),                              // read: open until 15
		op(put("y"), regOutput{}, 5, 6),                              // y read on another key only: left out
		op(put("z"), regOutput{}, 5, 6),                              // never read: left out
		op(put("x2"), regOutput{}, 50, 51),                           // never read
		op(regInput{Kind: regDelete, Key: "k"}, regOutput{}, 35, 36), // a not found returned after: kept, open
		op(regInput{Kind: regDelete, Key: "k"}, regOutput{}, 41, 42), // every not found before: left out
		op(regInput{Kind: regDelete, Key: "j"}, regOutput{}, 0, 1),   // no not found on j: left out
	}
	h := registerHistory(acked, unknown)
	if len(h) != len(acked)+2 {
		t.Fatalf("%d operations, want %d: %v", len(h), len(acked)+2, h[len(acked):])
	}
	if x := h[len(acked)]; x.Input.(regInput).Value != "x" || x.Return != 15 {
		t.Fatalf("read put kept as %+v, want x open until 15", x)
	}
	if d := h[len(acked)+1]; d.Input.(regInput).Kind != regDelete || d.Call != 35 || d.Return < 1<<60 {
		t.Fatalf("delete kept as %+v, want the one at 35, open", d)
	}
}
