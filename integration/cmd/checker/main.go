// Command checker runs the read-your-writes and monotonic-reads checker of
// package integration/checker: for each seed, a seeded workload of admin
// writes and reads, produces and group consumes against a 3-broker local
// KIP-1243 cluster whose brokers apply metadata late, then a check of the
// recorded history.
//
//	go run ./integration/cmd/checker -mode factory -seeds 20 -ops 500 -lag-max 300ms
//
// It prints one line per seed and the totals, and the violations with the
// history excerpt that shows each (-show bounds how many per seed). The exit
// code is 1 when factory mode sees any violation; plain mode (plain kgo/kadm
// clients) is expected to see them, and exits 0.
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
		mode       = fs.String("mode", "factory", "clients: factory (one kconsist factory) or plain (plain kgo/kadm)")
		seeds      = fs.Int("seeds", 20, "number of seeds to run")
		first      = fs.Uint64("seed", 1, "first seed; seeds are first, first+1, ...")
		ops        = fs.Int("ops", 500, "client operations per seed")
		goroutines = fs.Int("goroutines", 4, "goroutines running operations")
		lagMax     = fs.Duration("lag-max", 300*time.Millisecond, "maximum per-broker apply lag")
		pauseMax   = fs.Duration("pause-max", 0, "maximum apply pause of one broker (default lag-max)")
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
	m, err := checker.ParseMode(*mode)
	if err != nil {
		return 2, err
	}
	if *seeds < 1 || *ops < 1 {
		return 2, fmt.Errorf("want -seeds ≥ 1 and -ops ≥ 1")
	}

	fmt.Fprintf(stdout, "checker: mode=%s seeds=%d..%d ops=%d goroutines=%d lag-max=%v bypass-admin-cache=%v data-reads-during-delete=%v (%s, GOMAXPROCS=%d)\n",
		m, *first, *first+uint64(*seeds)-1, *ops, *goroutines, *lagMax, *bypass, *dataDelete, runtime.Version(), runtime.GOMAXPROCS(0))
	began := time.Now()
	var total checker.Report
	var clientOps, polls int
	for i := range *seeds {
		seed := *first + uint64(i)
		res, err := checker.Run(ctx, checker.Config{
			Seed: seed, Mode: m, Ops: *ops, Goroutines: *goroutines,
			LagMax: *lagMax, PauseMax: *pauseMax, BypassAdminCache: *bypass, DataReadsDuringDelete: *dataDelete,
		})
		if err != nil {
			return 2, fmt.Errorf("seed %d: %w", seed, err)
		}
		rep := res.Report
		fmt.Fprintf(stdout, "seed %3d: %s ops=%d polls=%d views=%d unjudged=%d acked=%d consumed=%d lag-changes=%d pauses=%d %v (drain %v)\n",
			seed, counts(rep), res.ClientOps, res.Polls, rep.Views, rep.Unjudged, rep.Acked, rep.Consumed,
			res.LagChanges, res.Pauses, res.Elapsed.Round(time.Millisecond), res.Drain.Round(time.Millisecond))
		for j, v := range rep.Violations {
			if *show >= 0 && j >= *show {
				fmt.Fprintf(stdout, "  ... %d more\n", len(rep.Violations)-j)
				break
			}
			fmt.Fprintf(stdout, "  [replay: -mode %s -seed %d -seeds 1 -ops %d -lag-max %v] %v\n", m, seed, *ops, *lagMax, v)
		}
		clientOps += res.ClientOps
		polls += res.Polls
		total.Views += rep.Views
		total.Unjudged += rep.Unjudged
		total.Acked += rep.Acked
		total.Consumed += rep.Consumed
		total.Violations = append(total.Violations, rep.Violations...)
	}
	fmt.Fprintf(stdout, "total: mode=%s seeds=%d ops=%d polls=%d views=%d unjudged=%d acked=%d consumed=%d %s runtime=%v\n",
		m, *seeds, clientOps, polls, total.Views, total.Unjudged, total.Acked, total.Consumed, counts(total),
		time.Since(began).Round(time.Millisecond))
	switch {
	case m == checker.ModeFactory && len(total.Violations) > 0:
		return 1, fmt.Errorf("%d violations in factory mode", len(total.Violations))
	case m == checker.ModePlain && len(total.Violations) == 0:
		fmt.Fprintln(stdout, "note: plain clients showed no violation; raise -lag-max or -ops")
	}
	return 0, nil
}

func counts(r checker.Report) string {
	s := fmt.Sprintf("violations=%d", len(r.Violations))
	for _, rule := range checker.Rules {
		s += fmt.Sprintf(" %s=%d", rule, r.Count(rule))
	}
	return s
}
