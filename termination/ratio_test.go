package termination

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The fast paths of pressureReached and beyond skip a division when the
// answer cannot depend on its rounding: they must answer as the division
// does, at the boundaries above all.
func TestRatioFastPathsMatchDivision(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fractions := []float64{0, 1e-9, 0.07, 0.1, 0.5, 0.8, 0.9, 0.999999, 1, 1.5, math.NaN(), math.Inf(1), -0.5}
	limits := []int{0, 1, 3, 7, 10, 100, 1000, 1e9, math.MaxInt64}
	for _, f := range fractions {
		for _, l := range limits {
			// The counts around the boundary f*l, and some far from it.
			b := int(math.Min(float64(l)*f, math.MaxInt64/2))
			if math.IsNaN(f) {
				b = l / 2
			}
			for _, u := range []int{0, 1, b - 2, b - 1, b, b + 1, b + 2, l - 1, l, l + 1, int(rng.Int64N(int64(l)/2 + 1))} {
				if u < 0 {
					continue
				}
				if got, want := pressureReached(u, l, f), float64(u)/float64(l) >= f; got != want {
					t.Errorf("pressureReached(%d, %d, %g) = %v, the division says %v", u, l, f, got, want)
				}
			}
		}
	}
	tolerances := []float64{0, 1e-9, 0.05, 0.1, 0.25, 0.999, math.NaN(), math.Inf(1), 1e308}
	for _, tol := range tolerances {
		for range 2000 {
			base := float64(1 + rng.Int64N(1<<20))
			// d around base*tol: the boundary, within a few ulps and far.
			d := math.Floor(base * tol)
			switch rng.IntN(4) {
			case 0:
				d += float64(rng.IntN(3)) - 1
			case 1:
				d = float64(rng.Int64N(1 << 21))
			case 2:
				d = math.Nextafter(base*tol, math.Inf(1))
			}
			if math.IsNaN(d) || math.IsInf(d, 0) || d < 0 {
				d = base
			}
			if got, want := beyond(d, base, tol), d/base > tol; got != want {
				t.Errorf("beyond(%g, %g, %g) = %v, the division says %v", d, base, tol, got, want)
			}
		}
	}
}
