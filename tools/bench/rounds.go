package bench

import (
	"fmt"
	"slices"
)

// MaxRounds bounds ReplConfig.Rounds and Config.Rounds.
const MaxRounds = 20

// roundOrder is the order in which round (1-based) runs items (setups,
// engines): as given in odd rounds, reversed in even ones, so that one run
// early in a round runs late in the next on a host whose speed drifts.
func roundOrder[T any](items []T, round int) []T {
	order := slices.Clone(items)
	if round%2 == 0 {
		slices.Reverse(order)
	}
	return order
}

// roundDir is the data directory of one run named base in round of
// rounds: base itself when there is one round.
func roundDir(base string, rounds, round int) string {
	if rounds > 1 {
		return fmt.Sprintf("%s.r%d", base, round)
	}
	return base
}

// distinct is key of every item, each value once, in the order of first
// appearance.
func distinct[E any, K comparable](items []E, key func(E) K) []K {
	var out []K
	for _, e := range items {
		if k := key(e); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// median of a non-empty sample (the mean of the middle two for an even
// count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
