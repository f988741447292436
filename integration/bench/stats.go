package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
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

// pooledSamples answers quantiles of the union of chosen groups of samples
// (the blocks of a bootstrap resample, with repetition) without building
// and sorting the union: each group is sorted once, and a quantile is found
// by binary search over all the values, counting in each chosen group how
// many are at most the candidate. The answer is exactly quantile of the
// union, at O(groups · log² n) instead of O(n log n) per resample: with
// hundreds of thousands of latency samples the sorting took minutes.
type pooledSamples struct {
	groups [][]float64 // each sorted
	all    []float64   // every value, sorted
}

func newPooledSamples(groups [][]float64) *pooledSamples {
	p := &pooledSamples{groups: make([][]float64, len(groups))}
	for i, g := range groups {
		p.groups[i] = slices.Sorted(slices.Values(g))
		p.all = append(p.all, g...)
	}
	slices.Sort(p.all)
	return p
}

// quantile returns the q-quantile (nearest rank, as quantile) of the union
// of the groups idx names, each as often as it is named.
func (p *pooledSamples) quantile(idx []int, q float64) float64 {
	n := 0
	for _, g := range idx {
		n += len(p.groups[g])
	}
	if n == 0 {
		return math.NaN()
	}
	rank := max(1, min(int(math.Ceil(q*float64(n))), n))
	atMost := func(x float64) int {
		c := 0
		for _, g := range idx {
			vs := p.groups[g]
			c += sort.Search(len(vs), func(i int) bool { return vs[i] > x })
		}
		return c
	}
	// The smallest value whose count reaches rank is a value of the union.
	i := sort.Search(len(p.all), func(i int) bool { return atMost(p.all[i]) >= rank })
	return p.all[i]
}
