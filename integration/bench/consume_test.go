package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
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
	// A bound against a hang (see TestQuick).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, Local: true, ConsumeOnly: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -consume-only -quick", Logf: t.Logf}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	local := doc[strings.Index(doc, beginMarker(consumeSection)):strings.Index(doc, endMarker(consumeSection))]
	require.Contains(t, local, "-consume-only -quick")
	require.Contains(t, local, "| "+readerNames[rFactoryAppend]+" |", "the AppendPoll reader's row")
	for v, name := range readerNames {
		row := cells(t, local, "| "+name+" |")
		require.Greater(t, leading(t, row[1]), 1000.0, "%s: records/s", name)
		require.Greater(t, leading(t, row[2]), 0.0, "%s: CPU", name)
		if v != rPlain {
			ratio := leading(t, row[3])
			require.True(t, ratio > 0.05 && ratio < 20, "%s: ratio %v", name, ratio)
			require.Contains(t, row[3], "95% CI [")
		}
		// Records, Poll and AppendPoll have issue #40's target, the
		// others none.
		if v == rFactory || v == rFactoryPoll || v == rFactoryAppend {
			require.Equal(t, "≥ 0.95", row[5], "%s: target", name)
			require.NotEqual(t, "–", row[6], "%s: result", name)
		} else {
			require.Equal(t, []string{"–", "–"}, row[5:7], "%s: target", name)
		}
	}
	// -quick's 2 rounds run as one whole set of the 6 readers' orders.
	require.Contains(t, local, "a balanced set of 6 (a Williams design of 6 readers: one square suffices")
	require.Contains(t, local, "6 rounds are 1 whole set, the 2 rounds asked rounded up")
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
		// As few orders as balance allows: an odd n needs two squares.
		want := n
		if n%2 == 1 && n > 1 {
			want = 2 * n
		}
		require.Len(t, orders, want, "n=%d", n)
		requireWilliams(t, n, orders)
	}
	// The readers of the comparison: 6, one square; 5 (before AppendPoll)
	// took two.
	require.Equal(t, 6, numReaders)
	require.Len(t, readOrders(numReaders), numReaders)
}

// requireWilliams checks that orders are a Williams design of n readers
// (williams).
func requireWilliams(t *testing.T, n int, orders [][]int) {
	t.Helper()
	require.NoError(t, williams(n, orders))
}

// williams returns why orders are not a Williams design of n readers, or
// nil: each must be a permutation, and over the set every reader must be
// at every position, and every ordered pair of readers adjacent, equally
// often.
func williams(n int, orders [][]int) error {
	pos := make([][]int, n)  // pos[v][i]: times v is at position i
	next := make([][]int, n) // next[a][b]: times b directly follows a
	for v := range n {
		pos[v], next[v] = make([]int, n), make([]int, n)
	}
	for _, o := range orders {
		if !slices.Equal(slices.Sorted(slices.Values(o)), seq(n)) {
			return fmt.Errorf("n=%d: %v is not a permutation", n, o)
		}
		for i, v := range o {
			pos[v][i]++
			if i > 0 {
				next[o[i-1]][v]++
			}
		}
	}
	// Each order puts every reader at one of the n positions, so the
	// orders must be a multiple of n; then each of their len(orders)·(n-1)
	// adjacencies goes to one of the n·(n-1) ordered pairs.
	if len(orders) == 0 || len(orders)%n != 0 {
		return fmt.Errorf("n=%d: %d orders", n, len(orders))
	}
	for v := range n {
		for i := range n {
			if pos[v][i] != len(orders)/n {
				return fmt.Errorf("n=%d: reader %d at position %d %d times, not %d", n, v, i, pos[v][i], len(orders)/n)
			}
			if i != v && next[v][i] != len(orders)/n {
				return fmt.Errorf("n=%d: %d right after %d %d times, not %d", n, i, v, next[v][i], len(orders)/n)
			}
		}
	}
	return nil
}

// TestWilliamsCatchesUnbalanced checks the checker: a rotation (each
// reader always after the same one) is not balanced, nor is the first
// square alone for an odd n.
func TestWilliamsCatchesUnbalanced(t *testing.T) {
	for _, n := range []int{5, 6} {
		var rot [][]int
		for s := range n {
			o := make([]int, n)
			for i := range o {
				o[i] = (i + s) % n
			}
			rot = append(rot, o)
		}
		require.ErrorContains(t, williams(n, rot), "right after", "n=%d: a rotation", n)
	}
	require.ErrorContains(t, williams(5, readOrders(5)[:5]), "right after", "n=5: one square")
	require.ErrorContains(t, williams(6, readOrders(6)[:5]), "orders", "n=6: part of a set")
	require.NoError(t, williams(6, readOrders(6)))
}

// TestReadOrdersBalancedFiveAndSix checks the balance for the comparison's
// reader counts before and after AppendPoll, over whole runs of rounds as
// runConsume takes them (round r has order r mod the set): every reader at
// every position, and every ordered pair adjacent, equally often.
func TestReadOrdersBalancedFiveAndSix(t *testing.T) {
	for _, n := range []int{5, 6} {
		orders := readOrders(n)
		for _, sets := range []int{1, 2, 4} {
			var run [][]int
			for r := range sets * len(orders) {
				run = append(run, orders[r%len(orders)])
			}
			requireWilliams(t, n, run)
		}
		// One square is not balanced for an odd n, one is for an even n.
		if n%2 == 1 {
			require.Len(t, orders, 2*n)
		} else {
			require.Len(t, orders, n)
		}
	}
}

// TestConsumeRoundsWholeSets checks that the rounds run are the rounds
// asked rounded up to whole sets of the readers' orders: the plans' 20
// and 10 (the local and real Kafka defaults), the record-size curve's, and
// -quick's 2 and 1.
func TestConsumeRoundsWholeSets(t *testing.T) {
	set := len(readOrders(numReaders))
	for _, asked := range []int{0, 1, 2, 5, 6, 7, 10, 12, 20, 24, 40, 80,
		planFor(false, 1).consume.Rounds, planFor(false, 2).kconsume.Rounds, planFor(true, 1).consume.Rounds,
		scalePlan(false).SizeRounds, scalePlan(true).SizeRounds} {
		got := consumeRounds(asked)
		require.Zero(t, got%set, "asked %d: %d rounds", asked, got)
		require.GreaterOrEqual(t, got, max(asked, 1), "asked %d", asked)
		require.Less(t, got-max(asked, 1), set, "asked %d: rounded up more than a set", asked)
	}
	require.Equal(t, 24, consumeRounds(20))
	require.Equal(t, 12, consumeRounds(10))
	require.Equal(t, 6, consumeRounds(2))
	// The record-size curve asks for whole sets.
	require.Equal(t, scalePlan(false).SizeRounds, consumeRounds(scalePlan(false).SizeRounds))
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
