package ycsb

import (
	"math"
	"math/rand/v2"
)

// ZipfianConstant is YCSB's default zipfian constant (theta).
const ZipfianConstant = 0.99

// Zipfian draws integers in [base, base+n) where item i has probability
// proportional to 1/(i+1)^theta, using Gray et al.'s algorithm ("Quickly
// generating billion-record synthetic databases", SIGMOD'94) as YCSB's
// ZipfianGenerator does: zeta(n, theta) is computed once, and when the item
// count grows (inserts) it is extended incrementally with the new terms only.
// Item base is the most popular. A Zipfian is not safe for concurrent use.
type Zipfian struct {
	rng   *rand.Rand
	base  int64
	n     int64 // item count zetan was computed for (YCSB's countforzeta)
	theta float64
	alpha float64 // 1/(1-theta)
	zeta2 float64 // zeta(2, theta)
	zetan float64 // zeta(n, theta)
	eta   float64
	half  float64 // 1 + 0.5^theta
}

// NewZipfian returns a generator over [base, base+n) with constant theta in
// (0, 1), computing zeta(n, theta).
func NewZipfian(rng *rand.Rand, base, n int64, theta float64) *Zipfian {
	return NewZipfianZeta(rng, base, n, theta, Zeta(n, theta))
}

// NewZipfianZeta is NewZipfian with zeta(n, theta) supplied by the caller
// (precomputed once and shared by many workers).
func NewZipfianZeta(rng *rand.Rand, base, n int64, theta, zetan float64) *Zipfian {
	if n < 1 {
		n = 1
	}
	z := &Zipfian{
		rng:   rng,
		base:  base,
		n:     n,
		theta: theta,
		alpha: 1 / (1 - theta),
		zeta2: zetaRange(0, 2, theta, 0),
		zetan: zetan,
		half:  1 + math.Pow(0.5, theta),
	}
	z.eta = z.etaFor(n)
	return z
}

func (z *Zipfian) etaFor(n int64) float64 {
	return (1 - math.Pow(2/float64(n), 1-z.theta)) / (1 - z.zeta2/z.zetan)
}

// Next draws from the generator's current item count.
func (z *Zipfian) Next() int64 { return z.NextN(z.n) }

// NextN draws from [base, base+n). When n exceeds the count zeta was
// computed for, zeta is extended incrementally (YCSB's behaviour for a
// growing record count); a smaller n reuses the larger count's zeta, as YCSB
// does by default (allowitemcountdecrease=false).
func (z *Zipfian) NextN(n int64) int64 {
	if n < 1 {
		n = 1
	}
	if n > z.n {
		z.zetan = zetaRange(z.n, n, z.theta, z.zetan)
		z.n = n
		z.eta = z.etaFor(n)
	}
	u := z.rng.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return z.base
	}
	if uz < z.half && n > 1 {
		return z.base + 1
	}
	r := int64(float64(n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
	if r >= n {
		r = n - 1
	}
	if r < 0 {
		r = 0
	}
	return z.base + r
}

// exactZetaLimit bounds the item count for which Zeta sums every term.
const exactZetaLimit = 1 << 20

// Zeta returns zeta(n, theta) = sum_{i=1..n} 1/i^theta. Up to 2^20 terms it
// sums exactly; beyond, it sums the first 2^20 terms and approximates the
// rest with the Euler-Maclaurin formula (relative error far below 1e-9), so
// that zeta over YCSB's 10^10-item scrambled space is cheap.
func Zeta(n int64, theta float64) float64 {
	if n <= exactZetaLimit {
		return zetaRange(0, n, theta, 0)
	}
	m := int64(exactZetaLimit)
	s := zetaRange(0, m, theta, 0)
	// sum_{i=m+1..n} f(i) = int_m^n f + (f(n)-f(m))/2 + (f'(n)-f'(m))/12 - ...
	f := func(x float64) float64 { return math.Pow(x, -theta) }
	df := func(x float64) float64 { return -theta * math.Pow(x, -theta-1) }
	a, b := float64(m), float64(n)
	var integral float64
	if theta == 1 {
		integral = math.Log(b / a)
	} else {
		integral = (math.Pow(b, 1-theta) - math.Pow(a, 1-theta)) / (1 - theta)
	}
	return s + integral + (f(b)-f(a))/2 + (df(b)-df(a))/12
}

// zetaRange adds the terms for items st..n-1 (ranks st+1..n) to initial.
func zetaRange(st, n int64, theta, initial float64) float64 {
	sum := initial
	for i := st; i < n; i++ {
		sum += 1 / math.Pow(float64(i+1), theta)
	}
	return sum
}
