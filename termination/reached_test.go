package termination

import (
	"math"
	"math/rand/v2"
	"testing"
)

// reachedByRatio is reached without its fast rejection: the ratio, always.
func reachedByRatio(r Resource, used, limit, fraction float64) bool {
	if r == ResourceCost {
		return used/limit >= fraction*(1-costTolerance)
	}
	if fraction == 1 {
		return used >= limit
	}
	return used/limit >= fraction
}

// TestReachedFastRejection: rejecting usage far below a limit without a
// division never changes whether a limit is reached, at the edges (limits
// written in decimal, cost sums in binary, unvalidated settings) and on
// random values near and far from the limit.
func TestReachedFastRejection(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	values := []float64{0, 1e-300, 0.07, 0.1, 0.3, 0.5, 0.8, 0.9, 0.9999999999999999, 1, 7, 100, 1e9, 1e15, inf, -1, -inf, nan}
	fractions := []float64{1, 0.8, 0.9, 0.07, 0.5, 0, -0.5, nan}
	resources := []Resource{ResourceCost, ResourceTotalTokens}
	check := func(r Resource, u, l, f float64) {
		t.Helper()
		if got, want := reached(r, u, l, f), reachedByRatio(r, u, l, f); got != want {
			t.Fatalf("reached(%s, %v, %v, %v) = %v, the ratio says %v", r, u, l, f, got, want)
		}
	}
	for _, r := range resources {
		for _, u := range values {
			for _, l := range values {
				for _, f := range fractions {
					check(r, u, l, f)
				}
			}
		}
	}
	// Ten events costing 0.1 reach a limit of 1; seven tokens of a
	// hundred reach a pressure of 0.07.
	sum := 0.0
	for range 10 {
		sum += 0.1
	}
	check(ResourceCost, sum, 1, 1)
	check(ResourceTotalTokens, 7, 100, 0.07)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200_000 {
		l := math.Ldexp(rng.Float64(), rng.IntN(80)-20)
		f := []float64{1, rng.Float64()}[rng.IntN(2)]
		// Usage around the fraction of the limit, within a few ulps to a
		// few parts in a million.
		u := l * f * (1 + (rng.Float64()-0.5)*math.Ldexp(1, -rng.IntN(60)))
		check(resources[rng.IntN(2)], u, l, f)
	}
}
