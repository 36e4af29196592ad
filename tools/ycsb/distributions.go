package ycsb

import "math/rand/v2"

// Scrambled zipfian constants from YCSB's ScrambledZipfianGenerator: the
// zipfian is drawn over a fixed, very large item space (so popularity does
// not shift as records are inserted) and then hashed onto the records.
const (
	scrambledItemCount = 10_000_000_000
	// scrambledZetan is zeta(10^10, 0.99), as hard-coded by YCSB.
	scrambledZetan = 26.46902820178302
)

// chooser picks a record number given the number of records that may be
// chosen (records [0, limit) are acknowledged as inserted).
type chooser interface {
	next(limit int64) int64
}

// scrambledZipfian is YCSB's ScrambledZipfianGenerator over [0, items):
// a zipfian over 10^10 items whose value is FNV-hashed modulo items.
type scrambledZipfian struct {
	z     *Zipfian
	items int64
}

func newScrambledZipfian(rng *rand.Rand, items int64, theta, zetan float64) *scrambledZipfian {
	return &scrambledZipfian{
		z:     NewZipfianZeta(rng, 0, scrambledItemCount, theta, zetan),
		items: max(items, 1),
	}
}

// scrambledZeta returns zeta over the scrambled item space for theta.
func scrambledZeta(theta float64) float64 {
	if theta == ZipfianConstant {
		return scrambledZetan
	}
	return Zeta(scrambledItemCount, theta)
}

// next redraws until the record is acknowledged, as YCSB's nextKeynum does.
func (s *scrambledZipfian) next(limit int64) int64 {
	if limit < 1 {
		return 0
	}
	for {
		k := FNVHash64(s.z.Next()) % s.items
		if k < limit {
			return k
		}
	}
}

// uniform picks uniformly among [0, items) (YCSB's UniformLongGenerator
// over the records present at start), redrawing unacknowledged records.
type uniform struct {
	rng   *rand.Rand
	items int64
}

func (u *uniform) next(limit int64) int64 {
	n := min(u.items, limit)
	if n < 1 {
		return 0
	}
	return u.rng.Int64N(n)
}

// skewedLatest is YCSB's SkewedLatestGenerator: the most recently inserted
// (acknowledged) record is the most popular, with zipfian decay backwards.
type skewedLatest struct {
	z *Zipfian
}

func (l *skewedLatest) next(limit int64) int64 {
	if limit < 1 {
		return 0
	}
	last := limit - 1
	return last - (l.z.NextN(limit) - l.z.base)
}
