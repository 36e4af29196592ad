package ycsb

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestZetaApproximation(t *testing.T) {
	// YCSB's hard-coded zeta(10^10, 0.99).
	if got := Zeta(scrambledItemCount, 0.99); math.Abs(got-scrambledZetan)/scrambledZetan > 1e-9 {
		t.Errorf("Zeta(1e10, 0.99) = %.14f, want %.14f", got, scrambledZetan)
	}
	n := int64(exactZetaLimit + 5000)
	exact := zetaRange(0, n, 0.8, 0)
	if got := Zeta(n, 0.8); math.Abs(got-exact)/exact > 1e-12 {
		t.Errorf("Zeta(%d, 0.8) = %.14f, exact %.14f", n, got, exact)
	}
}

func TestZipfianSkew(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 1))
	const n, draws = 1000, 200_000
	z := NewZipfian(rng, 0, n, ZipfianConstant)
	counts := make([]int, n)
	for range draws {
		v := z.Next()
		if v < 0 || v >= n {
			t.Fatalf("draw %d outside [0, %d)", v, n)
		}
		counts[v]++
	}
	zeta := Zeta(n, ZipfianConstant)
	for i := range 2 { // Gray's algorithm is exact for the two top items
		want := draws / math.Pow(float64(i+1), ZipfianConstant) / zeta
		if got := float64(counts[i]); math.Abs(got-want) > 0.05*want {
			t.Errorf("item %d drawn %v times, want about %.0f", i, got, want)
		}
	}
	if counts[0] <= counts[10] || counts[10] <= counts[500] {
		t.Errorf("counts not decreasing: c0=%d c10=%d c500=%d", counts[0], counts[10], counts[500])
	}
}

func TestZipfianIncrementalZeta(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 2))
	z := NewZipfian(rng, 10, 1000, ZipfianConstant)
	for range 100 {
		if v := z.NextN(3000); v < 10 || v >= 3010 {
			t.Fatalf("draw %d outside [10, 3010)", v)
		}
	}
	if want := Zeta(3000, ZipfianConstant); math.Abs(z.zetan-want) > 1e-9 {
		t.Errorf("incremental zeta %.12f, want %.12f", z.zetan, want)
	}
}

func TestScrambledZipfianTopItem(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 3))
	const n, draws = 1000, 100_000
	s := newScrambledZipfian(rng, n, ZipfianConstant, scrambledZetan)
	counts := make([]int, n)
	for range draws {
		counts[s.next(n)]++
	}
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	top, median := sorted[n-1], sorted[n/2]
	// Rank 0 alone has probability 1/zeta = 3.8%.
	if float64(top) < 0.03*draws || top < 5*median {
		t.Errorf("top record drawn %d times, median %d: not skewed", top, median)
	}
	if hot := FNVHash64(0) % n; counts[hot] != top {
		t.Errorf("hottest record is not FNV(0) mod n = %d", hot)
	}
}

func TestUniformSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 4))
	const n, draws = 100, 100_000
	u := &uniform{rng: rng, items: n}
	counts := make([]int, n)
	for range draws {
		counts[u.next(n)]++
	}
	for i, c := range counts {
		if want := draws / n; math.Abs(float64(c-want)) > 0.2*float64(want) {
			t.Errorf("record %d drawn %d times, want about %d", i, c, want)
		}
	}
}

func TestLatestFavoursRecent(t *testing.T) {
	rng := rand.New(rand.NewPCG(testSeed(t), 5))
	const n, draws = 1000, 50_000
	l := &skewedLatest{z: NewZipfian(rng, 0, n, ZipfianConstant)}
	counts := make([]int, n+100)
	recent := 0
	for range draws {
		v := l.next(n)
		counts[v]++
		if v >= n-100 {
			recent++
		}
	}
	if slices.Max(counts) != counts[n-1] {
		t.Errorf("newest record %d is not the most drawn", n-1)
	}
	if float64(recent) < 0.5*draws {
		t.Errorf("only %d of %d draws among the newest 10%%", recent, draws)
	}
	// After 100 more records, the newest one leads.
	for range draws / 10 {
		counts[l.next(n+100)]++
	}
	if v := l.next(n + 100); v > n+99 {
		t.Fatalf("draw %d beyond the newest record", v)
	}
	if counts[n+99] < counts[n+50] {
		t.Errorf("newest record drawn %d times, less than an older one (%d)", counts[n+99], counts[n+50])
	}
}
