package ycsb

import "math/rand/v2"

// minValueLen is the smallest value generated: a pair whose key alone
// reaches the pair size still gets one value byte.
const minValueLen = 1

// valuePool is an immutable buffer of seeded random bytes; a value is a
// window into it. Windows are cheap (no allocation, no per-op RNG fill) and
// random bytes keep block compression from flattering either engine.
type valuePool struct {
	buf  []byte
	span uint64 // number of valid window starts
}

func newValuePool(seed uint64, maxValue int) *valuePool {
	size := max(1<<20, 4*maxValue) + maxValue
	buf := make([]byte, size)
	r := rand.New(rand.NewPCG(seed, 0x76616c756573)) // "values"
	for i := 0; i+8 <= len(buf); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			buf[i+j] = byte(v >> (8 * j))
		}
	}
	return &valuePool{buf: buf, span: uint64(size - maxValue + 1)}
}

// window returns n bytes starting at a position derived from x.
func (p *valuePool) window(x uint64, n int) []byte {
	o := x % p.span
	return p.buf[o : o+uint64(n) : o+uint64(n)]
}
