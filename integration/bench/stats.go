package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// quantile returns the q-quantile (0..1) of xs by the nearest-rank method,
// so p99 of 100 samples is the 99th smallest, a value that was observed.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// spread is the median, minimum and maximum of per-round values.
type spread struct {
	Median, Min, Max float64
	N                int
}

func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	}
	return spread{Median: quantile(xs, 0.5), Min: slices.Min(xs), Max: slices.Max(xs), N: len(xs)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func durationsMs(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = ms(d)
	}
	return out
}

// bootstrapCI returns a 95% percentile bootstrap interval of stat over n
// units (rounds): stat gets the indices of a resample with replacement.
// The generator is seeded, so a report is reproducible from its data.
func bootstrapCI(n int, stat func(idx []int) float64) (lo, hi float64) {
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(1243, 1242))
	const resamples = 1000
	vals := make([]float64, resamples)
	idx := make([]int, n)
	for b := range vals {
		for i := range idx {
			idx[i] = rng.IntN(n)
		}
		vals[b] = stat(idx)
	}
	return quantile(vals, 0.025), quantile(vals, 0.975)
}

// verdict judges an interval against a target: met when all of it is on
// the right side, missed when all of it is on the wrong side, else the run
// cannot tell.
func verdict(lo, hi, target float64, higherIsBetter bool) string {
	switch {
	case math.IsNaN(lo) || math.IsNaN(hi):
		return "–"
	case higherIsBetter && lo >= target, !higherIsBetter && hi <= target:
		return "**met**"
	case higherIsBetter && hi < target, !higherIsBetter && lo > target:
		return "**missed**"
	}
	return "**not decided** (interval spans the target)"
}
