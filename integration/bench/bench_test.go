package main

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
)

// TestQuick runs the command in -quick mode, each step in a child process
// as the command does, into a temporary report, so it cannot rot: every
// table has its rows, numbers parse and are sane (not the targets, which
// small runs cannot judge), the charts exist, and text outside the
// generated markers survives.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the benchmarks for about 20s")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	const manual = "## RELIABILITY\n\nwritten by hand, must survive\n"
	require.NoError(t, os.WriteFile(out, []byte(skeleton()+"\n"+manual), 0o644))
	// A bound against a hang, not the CI budget (-quick ≤ 2 min on a quiet
	// machine): three CI clones and a test suite beside it took it past 2
	// minutes at load 28.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	require.NoError(t, run(ctx, options{Quick: true, Local: true, Isolate: true, Out: out, Charts: dir, Command: "go run ./integration/bench -quick", Logf: t.Logf}))
	// How long it took is logged, not asserted: a wall-clock bound fails
	// on a loaded machine (61.8 s once, at load 30), and ctx bounds it.
	t.Logf("-quick took %v", time.Since(start).Round(time.Millisecond))

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	require.Contains(t, doc, manual)
	require.Equal(t, 1, strings.Count(doc, beginMarker(localSection)))
	require.Contains(t, doc, "Machine: ")
	require.Contains(t, doc, "go1.")

	// Overhead: positive throughputs, CPU and latencies for all three
	// clients, ratios (factory and control over plain) in a sane band. A
	// p99 of 200 samples under -race can be anything: only its sign and
	// that it parses are checked.
	for _, q := range []string{"| throughput, records/s", "| process CPU per record", "| p50 latency", "| p99 latency"} {
		row := cells(t, doc, q)
		for v := 1; v <= 3; v++ {
			require.Greater(t, leading(t, row[v]), 0.0, "%s: column %d", q, v)
		}
		if q == "| throughput, records/s" {
			require.Greater(t, leading(t, row[1]), 100.0)
		} else {
			require.Less(t, leading(t, row[1]), 1000.0, q)
		}
		for _, c := range row[4:6] {
			ratio := leading(t, c)
			if q == "| p99 latency" {
				require.Greater(t, ratio, 0.0, "%s: ratio", q)
			} else {
				require.True(t, ratio > 0.2 && ratio < 5, "%s: ratio %v", q, ratio)
			}
			require.Contains(t, c, "95% CI [")
		}
	}
	require.Equal(t, []string{"0", "0", "0"}, cells(t, doc, "| failed records")[1:4])

	// Read-your-writes: one row per lag and client; the factory never fails
	// and never reads stale. A trial can be faster than the lag: when the
	// new topic's leader is broker 0 (kfake picks leaders at random) and
	// every request of the trial happens to reach broker 0, nothing lags
	// behind the write, so the lag is no lower bound.
	for _, lag := range []string{"0s", "100ms", "500ms"} {
		for _, client := range []string{"factory", "plain kgo"} {
			row := cells(t, doc, "| "+lag+" | "+client+" |")
			require.Equal(t, "2", row[2])
			if client == "factory" {
				require.Equal(t, "0", row[7], "factory failures")
				require.Equal(t, "0 (0)", row[8], "factory stale answers")
				d, _ := time.ParseDuration(lag)
				p50 := leading(t, row[3])
				require.Greater(t, p50, 0.0)
				require.Less(t, p50, float64(d.Milliseconds())+5000)
			}
		}
	}

	// Misroute: both clients recover, nothing lands in the wrong cluster.
	for _, client := range []string{"factory", "plain kgo"} {
		requireMisrouteRow(t, doc, client, "move")
	}

	for _, png := range []string{"overhead_local_throughput.png", "overhead_local_latency.png", "ryw_latency.png", "misroute_recovery.png"} {
		st, err := os.Stat(filepath.Join(dir, png))
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(1000), png)
		require.Contains(t, doc, "]("+png+")")
	}
}

// TestScaleQuick runs the "How the cost grows" step as the command does
// with -curves-only -quick, in a child process, into a temporary report,
// so it cannot rot: every curve has its rows, numbers parse and are sane,
// the charts exist, text outside the markers survives.
func TestScaleQuick(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	const manual = "## RELIABILITY\n\nwritten by hand, must survive\n"
	require.NoError(t, os.WriteFile(out, []byte(skeleton()+"\n"+manual), 0o644))
	// A bound against a hang (see TestQuick).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, Local: true, CurvesOnly: true, Isolate: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -curves-only -quick", Logf: t.Logf}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	require.Contains(t, doc, manual)
	require.Contains(t, doc, "Command: `go run ./integration/bench -curves-only -quick`")
	require.Equal(t, 1, strings.Count(doc, beginMarker(scaleSection)))
	// Only that step ran.
	require.Contains(t, doc, beginMarker(localSection)+"\n"+endMarker(localSection))
	requireScaleSection(t, doc, dir)
}

// TestReplaceSection keeps everything outside the markers and adds missing
// markers at the end.
func TestReplaceSection(t *testing.T) {
	doc := "intro\n" + beginMarker("x") + "\nold\n" + endMarker("x") + "\nafter\n"
	got := replaceSection(doc, "x", "new\n")
	require.Equal(t, "intro\n"+beginMarker("x")+"\nnew\n"+endMarker("x")+"\nafter\n", got)
	require.Equal(t, got, replaceSection(got, "x", "new\n"), "idempotent")
	got = replaceSection("no markers", "y", "body\n")
	require.Equal(t, "no markers\n\n"+beginMarker("y")+"\nbody\n"+endMarker("y")+"\n", got)
}

func TestQuantile(t *testing.T) {
	xs := make([]float64, 100)
	for i := range xs {
		xs[i] = float64(100 - i)
	}
	require.Equal(t, 50.0, quantile(xs, 0.5))
	require.Equal(t, 99.0, quantile(xs, 0.99))
	require.Equal(t, 100.0, quantile(xs, 1))
	require.Equal(t, 1.0, quantile(xs, 0))
	require.Equal(t, 7.0, quantile([]float64{7}, 0.99))
}

// cells returns the cells of the first table row that starts with prefix.
func cells(t *testing.T, doc, prefix string) []string {
	t.Helper()
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, prefix) {
			parts := strings.Split(strings.Trim(line, "|"), "|")
			for i := range parts {
				parts[i] = strings.TrimSpace(parts[i])
			}
			return parts
		}
	}
	t.Fatalf("no row %q in the report", prefix)
	return nil
}

var number = regexp.MustCompile(`-?[0-9]+(\.[0-9]+)?`)

// leading parses the first number in a cell.
func leading(t *testing.T, cell string) float64 {
	t.Helper()
	m := number.FindString(cell)
	require.NotEmpty(t, m, "cell %q starts with no number", cell)
	v, err := strconv.ParseFloat(m, 64)
	require.NoError(t, err)
	return v
}

// TestPooledSamples: the quantile of a resample, found by counting in
// sorted groups, equals the nearest-rank quantile of the union built the
// slow way, duplicates and repeated groups included.
func TestPooledSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		groups := make([][]float64, 1+rng.IntN(8))
		for i := range groups {
			groups[i] = make([]float64, rng.IntN(30))
			for j := range groups[i] {
				groups[i][j] = float64(rng.IntN(20)) // many duplicates
			}
		}
		p := newPooledSamples(groups)
		idx := make([]int, 1+rng.IntN(10))
		var union []float64
		for i := range idx {
			idx[i] = rng.IntN(len(groups))
			union = append(union, groups[idx[i]]...)
		}
		for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 1} {
			want := quantile(union, q)
			got := p.quantile(idx, q)
			if math.IsNaN(want) {
				require.True(t, math.IsNaN(got), "trial %d q %v", trial, q)
				continue
			}
			require.Equal(t, want, got, "trial %d q %v: groups %v idx %v", trial, q, groups, idx)
		}
	}
}

// TestBaselines: the factory is compared with both plain kgo clients (the
// geometric mean of their per-round values, their latency samples pooled),
// the control with plain kgo alone; the intervals bracket the ratios.
func TestBaselines(t *testing.T) {
	r := newOverheadResult("", overheadConfig{})
	r.Block = []int{0, 0, 1, 1}
	r.Tput[vFactory] = []float64{100, 100, 90, 90}
	r.Tput[vPlain] = []float64{50, 50, 90, 90}
	r.Tput[vControl] = []float64{200, 200, 90, 90}
	r.CPU = slices.Clone(r.Tput) // the rows, not the values, are the CPU's own
	require.Equal(t, []float64{1, 1, 1, 1}, r.tputRatios(vFactory), "100 over the geometric mean of 50 and 200")
	require.Equal(t, []float64{4, 4, 1, 1}, r.tputRatios(vControl))
	require.Equal(t, r.tputRatios(vFactory), r.cpuRatios(vFactory))
	r.CPU[vControl] = nil
	require.Nil(t, r.cpuRatios(vFactory), "the control's CPU is part of the factory's baseline")

	samples := func(vs ...float64) [][]float64 { return [][]float64{vs[:2], vs[:2], vs[2:], vs[2:]} }
	r.LatR[vFactory] = samples(3, 3, 3, 3)
	r.LatR[vPlain] = samples(1, 1, 1, 1)
	r.LatR[vControl] = samples(5, 5, 5, 5)
	for v := range r.LatR {
		for _, s := range r.LatR[v] {
			r.Lat[v] = append(r.Lat[v], s...)
		}
	}
	// The baseline's samples: eight of 1 and eight of 5. Their median is
	// 1 (nearest rank), their maximum 5.
	require.Equal(t, 3.0, r.pooledRatio(vFactory, 0.5))
	require.Equal(t, 0.6, r.pooledRatio(vFactory, 1))
	require.Equal(t, 5.0, r.pooledRatio(vControl, 1), "the control against plain kgo alone")
	lo, hi := r.pooledCI(vFactory, 1)
	require.Equal(t, [2]float64{0.6, 0.6}, [2]float64{lo, hi})
}

// TestPlanScale: -scale multiplies the overhead rounds and blocks (so each
// block keeps its rounds, and with them every client order) and nothing else.
func TestPlanScale(t *testing.T) {
	one, three := planFor(false, 1), planFor(false, 3)
	for _, c := range [][2]overheadConfig{{one.overhead, three.overhead}, {one.kafka, three.kafka}} {
		require.Equal(t, 3*c[0].Rounds, c[1].Rounds)
		require.Equal(t, 3*c[0].Blocks, c[1].Blocks)
		require.Equal(t, c[0].Records, c[1].Records)
		require.Equal(t, c[0].Latencies, c[1].Latencies)
		require.Zero(t, c[0].Rounds/c[0].Blocks%len(roundOrders), "each block runs every client order")
	}
	require.Equal(t, one.ryw, three.ryw)
	require.Equal(t, one.misroute, three.misroute)
}

// TestBurstAndLatenciesEndWithContext: a producer whose acknowledgements
// never come (an idempotent franz-go producer whose broker died) must not
// hang the run: both timed steps return once ctx ends, with the records
// they gave up on counted as failed.
func TestBurstAndLatenciesEndWithContext(t *testing.T) {
	dead := sender{async: func(context.Context, []byte, func(error)) {}, close: func() {}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	type out struct{ burstErrs, latErrs, samples int }
	got := make(chan out, 1)
	go func() {
		_, be := dead.burst(ctx, 50, nil)
		lat, le := latencies(ctx, []sender{dead}, 10, nil)
		got <- out{be, le[0], len(lat[0])}
	}()
	select {
	case o := <-got:
		require.Equal(t, out{burstErrs: 50, latErrs: 1, samples: 0}, o)
	case <-time.After(10 * time.Second):
		t.Fatal("burst or latencies still waiting 10s after their context ended")
	}
}

// TestLatenciesTakeTurns: the sequential produces of the latency step
// alternate between the clients record by record, in the order given, so
// a slow stretch of the cluster is shared by all of them; every client gets
// its n samples and its failures are its own.
func TestLatenciesTakeTurns(t *testing.T) {
	var calls []int
	failing := errors.New("refused")
	mk := func(id int, fail bool) sender {
		return sender{async: func(_ context.Context, _ []byte, done func(error)) {
			calls = append(calls, id)
			if fail && len(calls)%2 == 0 {
				done(failing)
				return
			}
			done(nil)
		}, close: func() {}}
	}
	s := []sender{mk(2, false), mk(0, false), mk(1, true)}
	lat, errs := latencies(context.Background(), s, 4, nil)
	require.Equal(t, []int{2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1}, calls)
	require.Len(t, lat[0], 4)
	require.Len(t, lat[1], 4)
	require.Equal(t, []int{0, 0, 2}, errs) // calls 6 and 12 fail
	require.Len(t, lat[2], 2)
}

// TestWatchNodes runs one real Kafka node: the overhead topic's configs are
// ones Kafka accepts, and when the node dies the watch ends the run's
// context with an error that names it.
func TestWatchNodes(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Nodes(1), kafkatest.BrokerConfig("log.retention.check.interval.ms", "1000"))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	created, err := adm.CreateTopic(ctx, 1, 1, overheadTopicConfigs, "overhead")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	configs, err := adm.DescribeTopicConfigs(ctx, "overhead")
	require.NoError(t, err)
	rc, err := configs.On("overhead", nil)
	require.NoError(t, err)
	for _, kv := range rc.Configs {
		if want, ok := overheadTopicConfigs[kv.Key]; ok {
			require.Equal(t, *want, kv.MaybeValue(), kv.Key)
		}
	}

	watched, stop := watchNodes(ctx, c)
	defer stop()
	select {
	case <-watched.Done():
		t.Fatalf("watch ended while the node runs: %v", context.Cause(watched))
	case <-time.After(1500 * time.Millisecond): // at least one check
	}
	require.NoError(t, c.Kill(1))
	select {
	case <-watched.Done():
		cause := context.Cause(watched)
		require.ErrorContains(t, cause, "node 1 exited during the run; end of its log:\n")
		require.NotEqual(t, "", strings.TrimSpace(strings.SplitN(cause.Error(), "end of its log:\n", 2)[1]), "the node's log")
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not notice the node's exit")
	}
}

// requireMisrouteRow checks the misroute row of client and trial kind: 2
// trials, a recovery within the timeout, no failure, nothing in cluster B.
func requireMisrouteRow(t *testing.T, doc, client, kind string) {
	t.Helper()
	row := cells(t, doc, "| "+client+" | "+kind+" | 2 |")
	require.Greater(t, leading(t, row[3]), 0.0)
	require.Less(t, leading(t, row[5]), 15000.0)
	require.Equal(t, "0", row[7], "%s failures", client)
	require.Equal(t, "0", row[9], "%s records in the wrong cluster", client)
}

// TestMisrouteOnlyQuick runs -misroute-only -quick on the local clusters:
// the Java producer's rows are there next to the Go clients', for moves
// and repaired misroutes, and every client recovers without writing to
// the wrong cluster. It starts a JVM: skipped with -short.
func TestMisrouteOnlyQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the Java producer")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(out, []byte(skeleton()), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, Local: true, MisrouteOnly: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -misroute-only -quick", Logf: t.Logf}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	require.Contains(t, doc, beginMarker(misrouteSection))
	for _, client := range []string{"factory", "plain kgo", "Java 4.4 producer"} {
		for _, kind := range []string{"move", "repair"} {
			requireMisrouteRow(t, doc, client, kind)
		}
	}
	require.Contains(t, doc, "](misroute_local_java.png)")
}

// TestOverheadNames: with a second factory the two are named by their
// modes; a run of three keeps the names it always had.
func TestOverheadNames(t *testing.T) {
	three := newOverheadResult("", overheadConfig{Mode: factory.ModeNative})
	require.Len(t, three.Tput, 3)
	require.Equal(t, []string{"factory", "plain kgo", "control (plain kgo)"},
		[]string{three.nameOf(0), three.nameOf(1), three.nameOf(2)})
	four := newOverheadResult("", nativeOverhead(overheadConfig{}))
	require.Len(t, four.Tput, 4)
	require.Equal(t, []string{"factory emulated", "plain kgo", "control (plain kgo)", "factory native"},
		[]string{four.nameOf(0), four.nameOf(1), four.nameOf(2), four.nameOf(3)})
	// Each client runs in each place once in four rounds.
	for place := range 4 {
		seen := map[int]bool{}
		for _, o := range ordersFor(4) {
			seen[o[place]] = true
		}
		require.Len(t, seen, 4, "place %d", place)
	}
	// ... and right after each other client once.
	next := map[[2]int]int{}
	for _, o := range ordersFor(4) {
		for i := 1; i < 4; i++ {
			next[[2]int{o[i-1], o[i]}]++
		}
	}
	require.Len(t, next, 12)
}
