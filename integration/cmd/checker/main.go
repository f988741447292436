// Command checker runs the read-your-writes and monotonic-reads checker of
// package integration/checker: for each seed, a seeded workload of admin
// writes and reads, produces and group consumes, then a check of the
// recorded history. By default the workload runs on a 3-broker local
// KIP-1243 cluster whose brokers apply metadata late; -native=false makes
// those brokers behave like Apache Kafka 4.4 (no header tokens, so the
// factory emulates them from KRaft offsets); -realkafka runs it on three
// real Apache Kafka 4.4 nodes started through integration/kafkatest (java
// and mvn needed, or KAFKA_HOME), without the local cluster's chaos.
//
//	go run ./integration/cmd/checker -mode factory -seeds 20 -ops 500 -lag-max 300ms
//	go run ./integration/cmd/checker -mode both -native=false -seeds 4
//	go run ./integration/cmd/checker -mode both -realkafka -seeds 4 -ops 500
//
// -mode both runs each seed with factory clients and then with plain ones,
// on the same real cluster with -realkafka. It prints one line per seed and
// mode and the totals per mode, and the violations with the history excerpt
// that shows each (-show bounds how many per seed). The exit code is 1 when
// factory mode sees any violation; plain mode (plain kgo/kadm clients) is
// expected to see them, and exits 0.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/kconsist/kconsist/integration/checker"
	"github.com/kconsist/kconsist/integration/kafkatest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "checker:", err)
	}
	os.Exit(code)
}

// run parses args, runs every seed and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) (int, error) {
	fs := flag.NewFlagSet("checker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		mode       = fs.String("mode", "factory", "clients: factory (one kconsist factory), plain (plain kgo/kadm) or both (each seed in both modes)")
		seeds      = fs.Int("seeds", 20, "number of seeds to run")
		first      = fs.Uint64("seed", 1, "first seed; seeds are first, first+1, ...")
		ops        = fs.Int("ops", 500, "client operations per seed")
		goroutines = fs.Int("goroutines", 4, "goroutines running operations")
		lagMax     = fs.Duration("lag-max", 300*time.Millisecond, "maximum per-broker apply lag (local cluster)")
		pauseMax   = fs.Duration("pause-max", 0, "maximum apply pause of one broker (default lag-max; local cluster)")
		native     = fs.Bool("native", true, "local brokers implement KIP-1243; false: they behave like Apache Kafka 4.4 and the factory emulates tokens")
		kip1243    = fs.Bool("kip1243", false, "with -realkafka: start the nodes with the KIP-1243 agent (integration/kafkatest/KIP1243.md), so the factory's tokens come from the brokers")
		realKafka  = fs.Bool("realkafka", false, "run on 3 real Apache Kafka 4.4 nodes (integration/kafkatest; java and mvn, or KAFKA_HOME) instead of the local cluster")
		bypass     = fs.Bool("bypass-admin-cache", false, "admin metadata reads skip franz-go's metadata cache (kadm.WithAuthorizedOps)")
		dataDelete = fs.Bool("data-reads-during-delete", false, "let ListEndOffsets and produces target a topic whose delete is in flight (shows a local-cluster artifact)")
		show       = fs.Int("show", 3, "violations printed per seed (-1: all)")
	)
	if err := fs.Parse(args); err != nil {
		return 2, err
	}
	if fs.NArg() > 0 {
		return 2, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var modes []checker.Mode
	if *mode == "both" {
		modes = []checker.Mode{checker.ModeFactory, checker.ModePlain}
	} else {
		m, err := checker.ParseMode(*mode)
		if err != nil {
			return 2, fmt.Errorf("%w (or both)", err)
		}
		modes = []checker.Mode{m}
	}
	if *seeds < 1 || *ops < 1 {
		return 2, fmt.Errorf("want -seeds ≥ 1 and -ops ≥ 1")
	}
	nativeSet := false
	fs.Visit(func(f *flag.Flag) { nativeSet = nativeSet || f.Name == "native" })
	if *realKafka && nativeSet {
		return 2, fmt.Errorf("-native configures the local cluster; -realkafka brokers are Apache Kafka 4.4 (with -kip1243, with the KIP-1243 agent)")
	}
	if *kip1243 && !*realKafka {
		return 2, fmt.Errorf("-kip1243 needs -realkafka: the local cluster speaks KIP-1243 by default (-native)")
	}

	cluster := "local KIP-1243"
	replay := fmt.Sprintf("-lag-max %v", *lagMax)
	if !*native {
		cluster, replay = "local Kafka-4.4-like (native=false)", replay+" -native=false"
	}
	var addrs []string
	if *realKafka {
		t0 := time.Now()
		opts := []kafkatest.Opt{kafkatest.Nodes(3)}
		agent := ""
		if *kip1243 {
			opts = append(opts, kafkatest.KIP1243())
			agent = " with the KIP-1243 agent"
		}
		c, err := kafkatest.StartCluster(ctx, opts...)
		if err != nil {
			return 2, err
		}
		defer func() { _ = c.Close() }()
		addrs = c.BootstrapAddrs()
		cluster, replay = fmt.Sprintf("3 real Apache Kafka %s nodes%s (ready in %v)", kafkatest.KafkaVersion, agent, time.Since(t0).Round(time.Millisecond)), "-realkafka"
		if *kip1243 {
			replay += " -kip1243"
		}
	}

	fmt.Fprintf(stdout, "checker: cluster=%s modes=%v seeds=%d..%d ops=%d goroutines=%d lag-max=%v bypass-admin-cache=%v data-reads-during-delete=%v (%s, GOMAXPROCS=%d)\n",
		cluster, modes, *first, *first+uint64(*seeds)-1, *ops, *goroutines, *lagMax, *bypass, *dataDelete, runtime.Version(), runtime.GOMAXPROCS(0))
	if *realKafka {
		fmt.Fprintln(stdout, "note: no chaos on real brokers (SetLag and PauseApply need the local cluster); lag-max and pause-max do not apply")
	}
	began := time.Now()
	totals := make([]total, len(modes))
	for i := range *seeds {
		seed := *first + uint64(i)
		for k, m := range modes {
			res, err := checker.Run(ctx, checker.Config{
				Seed: seed, Mode: m, Ops: *ops, Goroutines: *goroutines,
				LagMax: *lagMax, PauseMax: *pauseMax, BypassAdminCache: *bypass, DataReadsDuringDelete: *dataDelete,
				Kafka44: !*native, Addrs: addrs,
			})
			if err != nil {
				return 2, fmt.Errorf("seed %d, mode %s: %w", seed, m, err)
			}
			rep := res.Report
			token := "none"
			if res.Token >= 0 {
				token = fmt.Sprint(res.Token)
			}
			fmt.Fprintf(stdout, "seed %3d %s: %s ops=%d polls=%d views=%d unjudged=%d acked=%d consumed=%d lag-changes=%d pauses=%d token=%s %v (drain %v)\n",
				seed, m, counts(rep), res.ClientOps, res.Polls, rep.Views, rep.Unjudged, rep.Acked, rep.Consumed,
				res.LagChanges, res.Pauses, token, res.Elapsed.Round(time.Millisecond), res.Drain.Round(time.Millisecond))
			for j, v := range rep.Violations {
				if *show >= 0 && j >= *show {
					fmt.Fprintf(stdout, "  ... %d more\n", len(rep.Violations)-j)
					break
				}
				fmt.Fprintf(stdout, "  [replay: -mode %s -seed %d -seeds 1 -ops %d %s] %v\n", m, seed, *ops, replay, v)
			}
			totals[k].add(res)
		}
	}
	code := 0
	for k, m := range modes {
		t := totals[k]
		fmt.Fprintf(stdout, "total: mode=%s seeds=%d ops=%d polls=%d views=%d unjudged=%d acked=%d consumed=%d %s runtime=%v\n",
			m, *seeds, t.clientOps, t.polls, t.rep.Views, t.rep.Unjudged, t.rep.Acked, t.rep.Consumed, counts(t.rep),
			t.elapsed.Round(time.Millisecond))
		switch {
		case m == checker.ModeFactory && len(t.rep.Violations) > 0:
			code = 1
		case m == checker.ModePlain && len(t.rep.Violations) == 0:
			fmt.Fprintln(stdout, "note: plain clients showed no violation; raise -lag-max or -ops")
		}
	}
	fmt.Fprintf(stdout, "runtime: %v\n", time.Since(began).Round(time.Millisecond))
	if code != 0 {
		return code, fmt.Errorf("%d violations in factory mode", len(totals[0].rep.Violations))
	}
	return 0, nil
}

// total sums the runs of one mode.
type total struct {
	rep              checker.Report
	clientOps, polls int
	elapsed          time.Duration
}

func (t *total) add(res *checker.Result) {
	t.clientOps += res.ClientOps
	t.polls += res.Polls
	t.elapsed += res.Elapsed
	t.rep.Views += res.Report.Views
	t.rep.Unjudged += res.Report.Unjudged
	t.rep.Acked += res.Report.Acked
	t.rep.Consumed += res.Report.Consumed
	t.rep.Violations = append(t.rep.Violations, res.Report.Violations...)
}

func counts(r checker.Report) string {
	s := fmt.Sprintf("violations=%d", len(r.Violations))
	for _, rule := range checker.Rules {
		s += fmt.Sprintf(" %s=%d", rule, r.Count(rule))
	}
	return s
}
