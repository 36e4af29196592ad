package ycsb

import (
	"bytes"
	"errors"
	"math"
	"sync"
	"testing"
)

func TestSizeMixes(t *testing.T) {
	const n = 100_000
	for _, m := range []SizeMix{MixS, MixM, MixL, MixSD, MixMD, MixLD} {
		var got [3]int
		for k := range int64(n) {
			switch m.PairSize(k) {
			case SmallPair:
				got[0]++
			case MediumPair:
				got[1]++
			case LargePair:
				got[2]++
			default:
				t.Fatalf("%s: pair size %d", m, m.PairSize(k))
			}
		}
		for i, want := range []int{m.Small, m.Medium, m.Large} {
			if pct := 100 * float64(got[i]) / n; math.Abs(pct-float64(want)) > 1 {
				t.Errorf("%s: class %d at %.2f%%, want %d%%", m, i, pct, want)
			}
		}
	}
	fixed, err := ParseSizeMix("200")
	if err != nil || fixed.PairSize(7) != 200 {
		t.Errorf("ParseSizeMix(200) = %+v, %v", fixed, err)
	}
	val, err := ParseSizeMix("v4096")
	if err != nil || val.String() != "v4096" || val.ValueLen(7, 23) != 4096 || val.ValueLen(8, 5) != 4096 {
		t.Errorf("ParseSizeMix(v4096) = %+v, %v", val, err)
	}
	if fixed.ValueLen(7, 23) != 177 {
		t.Errorf("fixed 200: ValueLen with a 23-byte key = %d, want 177", fixed.ValueLen(7, 23))
	}
	if m, err := ParseSizeMix("sd"); err != nil || m != MixSD {
		t.Errorf("ParseSizeMix(sd) = %+v, %v", m, err)
	}
	for _, bad := range []string{"XL", "0", "-3", "", "v", "v0", "vx", "v2000000"} {
		if _, err := ParseSizeMix(bad); !errors.Is(err, ErrBadSizeMix) {
			t.Errorf("ParseSizeMix(%q) error %v, want ErrBadSizeMix", bad, err)
		}
	}
}

func runWorkload(t *testing.T, name string, records, ops int64, sizes SizeMix) Workload {
	t.Helper()
	w, err := Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	w.RecordCount, w.OperationCount, w.Sizes = records, ops, sizes
	return w
}

func TestPairSizeStableAcrossSeedsAndOps(t *testing.T) {
	seed := testSeed(t)
	load, err := NewGenerator(runWorkload(t, "load-a", 1000, 0, MixSD), seed)
	if err != nil {
		t.Fatal(err)
	}
	run, err := NewGenerator(runWorkload(t, "a", 1000, 2000, MixSD), seed+1)
	if err != nil {
		t.Fatal(err)
	}
	size := map[int64]int{}
	lw := load.Worker(0)
	for range load.Ops() {
		op := lw.Next()
		if op.Kind != OpInsert {
			t.Fatalf("load produced %v", op.Kind)
		}
		size[op.KeyNum] = len(op.Key) + len(op.Value)
		if !bytes.Equal(op.Value, load.InsertValue(op.KeyNum, len(op.Key))) {
			t.Fatalf("record %d: insert value is not InsertValue", op.KeyNum)
		}
		if err := lw.Ack(op); err != nil {
			t.Fatal(err)
		}
	}
	if len(size) != 1000 || load.Records() != 1000 {
		t.Fatalf("load inserted %d distinct records, Records() = %d", len(size), load.Records())
	}
	rw := run.Worker(3)
	for range run.Ops() {
		op := rw.Next()
		if op.Kind == OpUpdate {
			if got := len(op.Key) + len(op.Value); got != size[op.KeyNum] {
				t.Fatalf("update of record %d has pair size %d, loaded with %d", op.KeyNum, got, size[op.KeyNum])
			}
		}
	}
}

func TestFixedValueSize(t *testing.T) {
	sizes, err := ParseSizeMix("v4096")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"load-a", "a"} {
		g, err := NewGenerator(runWorkload(t, name, 500, 500, sizes), testSeed(t))
		if err != nil {
			t.Fatal(err)
		}
		w := g.Worker(1)
		for range g.Ops() {
			op := w.Next()
			if (op.Kind == OpInsert || op.Kind == OpUpdate) && len(op.Value) != 4096 {
				t.Fatalf("%s: %v of record %d (key %d bytes) has a %d-byte value, want 4096", name, op.Kind, op.KeyNum, len(op.Key), len(op.Value))
			}
			if err := w.Ack(op); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestDeterminism(t *testing.T) {
	seed := testSeed(t)
	trace := func(seed uint64) []byte {
		g, err := NewGenerator(runWorkload(t, "d", 500, 3000, MixLD), seed)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		w := g.Worker(1)
		for range g.Ops() {
			op := w.Next()
			out = append(out, byte(op.Kind))
			out = append(out, op.Key...)
			out = append(out, op.Value...)
			if err := w.Ack(op); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	if !bytes.Equal(trace(seed), trace(seed)) {
		t.Error("same seed, different operations")
	}
	if bytes.Equal(trace(seed), trace(seed^0x9e3779b97f4a7c15)) {
		t.Error("different seeds, same operations")
	}
}

func TestOperationMix(t *testing.T) {
	seed := testSeed(t)
	for _, c := range []struct {
		name string
		want [NumOpKinds]float64
	}{
		{"a", [NumOpKinds]float64{OpRead: 0.5, OpUpdate: 0.5}},
		{"b", [NumOpKinds]float64{OpRead: 0.95, OpUpdate: 0.05}},
		{"c", [NumOpKinds]float64{OpRead: 1}},
		{"d", [NumOpKinds]float64{OpRead: 0.95, OpInsert: 0.05}},
		{"e", [NumOpKinds]float64{OpScan: 0.95, OpInsert: 0.05}},
		{"f", [NumOpKinds]float64{OpRead: 0.5, OpReadModifyWrite: 0.5}},
	} {
		const ops = 40_000
		g, err := NewGenerator(runWorkload(t, c.name, 10_000, ops, MixS), seed)
		if err != nil {
			t.Fatal(err)
		}
		var got [NumOpKinds]float64
		w := g.Worker(0)
		for range ops {
			op := w.Next()
			got[op.Kind]++
			if op.Kind == OpScan && (op.ScanLen < 1 || op.ScanLen > 100) {
				t.Fatalf("%s: scan length %d", c.name, op.ScanLen)
			}
			if op.KeyNum >= g.inserts.Issued() {
				t.Fatalf("%s: %v of record %d, only %d issued", c.name, op.Kind, op.KeyNum, g.inserts.Issued())
			}
			if err := w.Ack(op); err != nil {
				t.Fatal(err)
			}
		}
		for k := range got {
			if frac := got[k] / ops; math.Abs(frac-c.want[k]) > 0.01 {
				t.Errorf("run %s: %v fraction %.3f, want %.2f", c.name, OpKind(k), frac, c.want[k])
			}
		}
	}
}

func TestAckCounterConcurrent(t *testing.T) {
	c := newAckCounter(100)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5000 {
				n := c.Next()
				if l := c.Limit(); l > n {
					t.Errorf("limit %d passed unacknowledged record %d", l, n)
				}
				if err := c.Ack(n); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if c.Limit() != c.Issued() || c.Issued() != 100+8*5000 {
		t.Errorf("limit %d, issued %d, want both %d", c.Limit(), c.Issued(), 100+8*5000)
	}
	if err := c.Ack(c.Issued() + ackWindow); err != nil {
		t.Fatal(err)
	}
	if err := c.Ack(c.Issued() + 2*ackWindow); !errors.Is(err, ErrAckWindow) {
		t.Errorf("overlapping ack: %v, want ErrAckWindow", err)
	}
}

func TestBuiltinsAndValidation(t *testing.T) {
	for _, name := range []string{"load", "Load A", "a", "run-b", "workloadc", "RunD", "e", "F"} {
		if _, err := Builtin(name); err != nil {
			t.Errorf("Builtin(%q): %v", name, err)
		}
	}
	if _, err := Builtin("g"); !errors.Is(err, ErrBadWorkload) {
		t.Errorf("Builtin(g): %v", err)
	}
	if len(BuiltinNames()) != 7 {
		t.Errorf("BuiltinNames() = %v", BuiltinNames())
	}
	bad := Workload{RecordCount: 10, OperationCount: 10, ReadProportion: 1, RequestDistribution: "pareto"}
	if _, err := NewGenerator(bad, 1); !errors.Is(err, ErrBadWorkload) {
		t.Errorf("bad distribution: %v", err)
	}
}

func TestNextDoesNotAllocate(t *testing.T) {
	g, err := NewGenerator(runWorkload(t, "a", 1000, 1000, MixSD), testSeed(t))
	if err != nil {
		t.Fatal(err)
	}
	w := g.Worker(0)
	if n := testing.AllocsPerRun(1000, func() { _ = w.Next() }); n != 0 {
		t.Errorf("Next allocates %v times per op", n)
	}
}
