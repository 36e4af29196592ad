package ycsb

import "math/rand/v2"

// Worker generates one goroutine's operations. It is not safe for
// concurrent use; Next does not allocate.
type Worker struct {
	g     *Generator
	rng   *rand.Rand
	keys  chooser
	scanZ *Zipfian
	key   []byte
}

// Next returns the next operation. An insert's record number must be
// passed to Ack once the insert is done.
func (w *Worker) Next() Op {
	g := w.g
	kind := OpInsert
	if !g.w.Load {
		u := w.rng.Float64()
		kind = OpReadModifyWrite
		for k, c := range g.cumul {
			if u < c {
				kind = OpKind(k)
				break
			}
		}
	}
	var op Op
	op.Kind = kind
	if kind == OpInsert {
		op.KeyNum = g.inserts.Next()
	} else {
		op.KeyNum = w.keys.next(g.inserts.Limit())
	}
	w.key = g.AppendKey(w.key[:0], op.KeyNum)
	op.Key = w.key
	switch kind {
	case OpInsert:
		op.Value = g.InsertValue(op.KeyNum, len(op.Key))
	case OpUpdate, OpReadModifyWrite:
		op.Value = g.pool.window(w.rng.Uint64(), g.ValueLen(op.KeyNum, len(op.Key)))
	case OpScan:
		op.ScanLen = w.scanLen()
	}
	return op
}

func (w *Worker) scanLen() int {
	if w.scanZ != nil {
		return int(w.scanZ.Next())
	}
	lo, hi := w.g.w.MinScanLength, w.g.w.MaxScanLength
	return lo + w.rng.IntN(hi-lo+1)
}

// Ack records that the insert of op is done, making the record visible to
// the request distributions. It is a no-op for other kinds.
func (w *Worker) Ack(op Op) error {
	if op.Kind != OpInsert {
		return nil
	}
	return w.g.inserts.Ack(op.KeyNum)
}
