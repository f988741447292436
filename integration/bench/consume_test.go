package main

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConsumeQuick runs the consumer comparison in -quick mode into a
// temporary report: a row per reader with positive throughputs and CPU, the
// ratios in a sane band, and only the consumer's section written.
func TestConsumeQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the consumer comparison for a few seconds")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(out, []byte(skeleton()), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, Local: true, ConsumeOnly: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -consume-only -quick", Logf: t.Logf}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	local := doc[strings.Index(doc, beginMarker(consumeSection)):strings.Index(doc, endMarker(consumeSection))]
	require.Contains(t, local, "-consume-only -quick")
	for v, name := range readerNames {
		row := cells(t, local, "| "+name+" |")
		require.Greater(t, leading(t, row[1]), 1000.0, "%s: records/s", name)
		require.Greater(t, leading(t, row[2]), 0.0, "%s: CPU", name)
		if v != rPlain {
			ratio := leading(t, row[3])
			require.True(t, ratio > 0.05 && ratio < 20, "%s: ratio %v", name, ratio)
			require.Contains(t, row[3], "95% CI [")
		}
	}
	// The producer's sections were not run.
	require.Contains(t, doc, beginMarker(localSection)+"\n"+endMarker(localSection))
}

// TestReadOrdersBalanced checks the consumer comparison's orders: each is a
// permutation of the readers, and over the set every reader is at every
// position, and directly follows every other reader, equally often. A
// rotation (the harness's old order) fails the second: each reader always
// had the same predecessor, and plain kgo's was the JSON reader.
func TestReadOrdersBalanced(t *testing.T) {
	for n := 1; n <= 8; n++ {
		orders := readOrders(n)
		pos := make([][]int, n)  // pos[v][i]: times v is at position i
		next := make([][]int, n) // next[a][b]: times b directly follows a
		for v := range n {
			pos[v], next[v] = make([]int, n), make([]int, n)
		}
		for _, o := range orders {
			require.ElementsMatch(t, seq(n), o, "n=%d: %v is not a permutation", n, o)
			for i, v := range o {
				pos[v][i]++
				if i > 0 {
					next[o[i-1]][v]++
				}
			}
		}
		for v := range n {
			for i := range n {
				require.Equal(t, len(orders)/n, pos[v][i], "n=%d: reader %d at position %d", n, v, i)
				if i != v {
					require.Equal(t, len(orders)/n, next[v][i], "n=%d: %d right after %d", n, i, v)
				}
			}
		}
		// As few orders as balance allows: an odd n needs two squares.
		want := n
		if n%2 == 1 && n > 1 {
			want = 2 * n
		}
		require.Len(t, orders, want, "n=%d", n)
	}
	// The real readers: the default 20 rounds are whole sets.
	require.Zero(t, planFor(false, 1).consume.Rounds%len(readOrders(numReaders)))
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestSettleReturnsFreedHeap checks that settle leaves no freed heap mapped
// for the next reader to grow into without page faults, which a forced GC
// alone does (the bias readOrders' comment describes).
func TestSettleReturnsFreedHeap(t *testing.T) {
	free := func() uint64 {
		s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	var keep [][]byte
	for range 64 {
		keep = append(keep, make([]byte, 1<<20))
	}
	runtime.KeepAlive(keep)
	keep = nil
	settle()
	require.Less(t, free(), uint64(4<<20), "freed heap still mapped after settle")
}

// TestRatioMedianSymmetric checks that the ratios' median does not favour
// either side of a ratio: the median of y/x is 1 over that of x/y, also
// for an even number of rounds (the default 20), where the nearest rank
// took the lower middle value and put the control below plain kgo.
func TestRatioMedianSymmetric(t *testing.T) {
	require.InDelta(t, math.Sqrt(1.0*1.1), ratioMedian([]float64{1.2, 0.9, 1.1, 1.0}), 1e-12)
	require.Equal(t, 1.1, ratioMedian([]float64{1.2, 0.9, 1.1}))
	require.True(t, math.IsNaN(ratioMedian(nil)))
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 21; n++ {
		xs, inv := make([]float64, n), make([]float64, n)
		for i := range xs {
			xs[i] = math.Exp(rng.NormFloat64() / 4)
			inv[i] = 1 / xs[i]
		}
		require.InDelta(t, 1, ratioMedian(xs)*ratioMedian(inv), 1e-12, "n=%d", n)
	}
}
