package ycsb

import (
	"math/rand/v2"
)

// OpKind is a YCSB operation type.
type OpKind uint8

// Operation kinds.
const (
	OpRead OpKind = iota
	OpUpdate
	OpInsert
	OpScan
	OpReadModifyWrite
	NumOpKinds
)

var opNames = [NumOpKinds]string{"read", "update", "insert", "scan", "rmw"}

func (k OpKind) String() string {
	if k < NumOpKinds {
		return opNames[k]
	}
	return "unknown"
}

// Op is one generated operation. Key is valid until the Worker's next call
// to Next; Value is read-only. Insert, Update and ReadModifyWrite carry the
// value to write; Scan carries the number of records to read from Key.
type Op struct {
	Kind    OpKind
	KeyNum  int64
	Key     []byte
	Value   []byte
	ScanLen int
}

// Generator holds a phase's shared state: the workload, the seed, the
// insert counter and the value pool. It is safe for concurrent use.
type Generator struct {
	w       Workload
	seed    uint64
	hashed  bool
	ops     int64 // operations in the phase
	items   int64 // key space of the scrambled zipfian chooser
	cumul   [NumOpKinds]float64
	inserts *ackCounter
	pool    *valuePool
	zetaKey float64 // zeta for the request distribution's zipfian
	zetaLat int64   // item count zetaKey was computed for (latest)
}

// NewGenerator validates w and prepares its shared state.
func NewGenerator(w Workload, seed uint64) (*Generator, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	w = w.withDefaults()
	g := &Generator{
		w:      w,
		seed:   seed,
		hashed: w.InsertOrder == OrderHashed,
		pool:   newValuePool(seed, w.Sizes.MaxPair()),
	}
	if w.Load {
		g.ops = w.InsertCount
		g.inserts = newAckCounter(w.InsertStart)
		g.cumul[OpInsert] = 1
		return g, nil
	}
	g.ops = w.OperationCount
	g.inserts = newAckCounter(w.RecordCount)
	props := [NumOpKinds]float64{w.ReadProportion, w.UpdateProportion, w.InsertProportion, w.ScanProportion, w.ReadModifyWriteProportion}
	var sum float64
	for i, p := range props {
		sum += p
		g.cumul[i] = sum
	}
	for i := range g.cumul {
		g.cumul[i] /= sum
	}
	// As YCSB: size the scrambled space for the records plus twice the
	// expected inserts, so popularity does not shift as records arrive.
	g.items = w.RecordCount + int64(float64(w.OperationCount)*(w.InsertProportion/sum)*2)
	switch w.RequestDistribution {
	case DistZipfian:
		g.zetaKey = scrambledZeta(w.ZipfianConstant)
	case DistLatest:
		g.zetaLat = max(w.RecordCount, 1)
		g.zetaKey = Zeta(g.zetaLat, w.ZipfianConstant)
	}
	return g, nil
}

// Workload returns the workload with defaults applied.
func (g *Generator) Workload() Workload { return g.w }

// Seed returns the generator's seed.
func (g *Generator) Seed() uint64 { return g.seed }

// Ops returns the number of operations in the phase: InsertCount for a
// load, OperationCount otherwise.
func (g *Generator) Ops() int64 { return g.ops }

// Records returns the number of records present once every insert handed
// out so far is done (the record count for the next phase).
func (g *Generator) Records() int64 {
	if g.w.Load {
		return max(g.w.RecordCount, g.inserts.Issued())
	}
	return g.inserts.Issued()
}

// AppendKey appends record keynum's key to dst.
func (g *Generator) AppendKey(dst []byte, keynum int64) []byte {
	return AppendKey(dst, keynum, g.hashed, g.w.ZeroPadding)
}

// ValueLen is the value length of record keynum (SizeMix.ValueLen).
func (g *Generator) ValueLen(keynum int64, keyLen int) int {
	return g.w.Sizes.ValueLen(keynum, keyLen)
}

// InsertValue returns the value an insert of record keynum writes: a pure
// function of the seed and keynum, so a loaded record can be verified.
// keyLen is the length of the record's key.
func (g *Generator) InsertValue(keynum int64, keyLen int) []byte {
	return g.pool.window(mix64(uint64(keynum)^g.seed), g.ValueLen(keynum, keyLen))
}

// Worker returns the generator state for worker i (one per goroutine).
// Workers with distinct i draw distinct, reproducible random streams.
func (g *Generator) Worker(i int) *Worker {
	rng := rand.New(rand.NewPCG(g.seed, uint64(i)+1))
	wk := &Worker{g: g, rng: rng, key: make([]byte, 0, 64+g.w.ZeroPadding)}
	w := g.w
	if !w.Load {
		switch w.RequestDistribution {
		case DistZipfian:
			wk.keys = newScrambledZipfian(rng, g.items, w.ZipfianConstant, g.zetaKey)
		case DistUniform:
			wk.keys = &uniform{rng: rng, items: max(w.RecordCount, 1)}
		case DistLatest:
			wk.keys = &skewedLatest{z: NewZipfianZeta(rng, 0, g.zetaLat, w.ZipfianConstant, g.zetaKey)}
		}
		if w.ScanLengthDistribution == DistZipfian {
			wk.scanZ = NewZipfian(rng, int64(w.MinScanLength), int64(w.MaxScanLength-w.MinScanLength+1), w.ZipfianConstant)
		}
	}
	return wk
}
