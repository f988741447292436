package realkafka

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kconsist/kconsist/integration/checker"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
)

// idleEnv gates TestCheckerIdleInterval: a measurement, not a check.
const idleEnv = "KCONSIST_MEASURE_IDLE"

// TestCheckerIdleInterval measures how much of the factory's extra time
// on the checker (TestCheckerOnKafka) comes from the KRaft leader's
// no-op record interval, metadata.max.idle.interval.ms (default 500 ms):
// before Kafka 4.1 (KIP-1166) a follower applies a committed metadata
// batch only when the next one arrives, so a read held for a token on a
// follower waits up to one interval. For each release (3.9.1 and 4.4.0,
// or $KCONSIST_KAFKA_VERSIONS) and each of two settings, Kafka's default
// and metadata.max.idle.interval.ms=50 on every (combined
// broker+controller) node, it starts three nodes and runs the checker as
// checkerOn does, factory then plain and plain then factory (seeds 1 and
// 2), and logs each run's time, the factory/plain ratio and violations.
// Only the factory's zero violations are asserted; nothing about time.
// The factory's Stats are not logged: the checker does not expose its
// factory.
//
// It runs only with KCONSIST_MEASURE_IDLE=1, without -race (timing):
//
//	KCONSIST_MEASURE_IDLE=1 go test -race=false -count=1 -timeout 40m \
//	    -run TestCheckerIdleInterval -v ./integration/realkafka/
func TestCheckerIdleInterval(t *testing.T) {
	if os.Getenv(idleEnv) != "1" {
		t.Skipf("a measurement; runs with %s=1", idleEnv)
	}
	versions := []string{"3.9.1", "4.4.0"}
	if os.Getenv(kafkatest.VersionsEnv) != "" {
		versions = matrixVersions(t)
	}
	settings := []struct {
		name string
		opts []kafkatest.Opt
	}{
		{"default", nil},
		{"idle50", []kafkatest.Opt{kafkatest.BrokerConfig("metadata.max.idle.interval.ms", "50")}},
	}
	var rows []string
	for _, v := range versions {
		for _, s := range settings {
			t.Run(v+"/"+s.name, func(t *testing.T) {
				rows = append(rows, idleRuns(t, v, s.name, s.opts)...)
			})
		}
	}
	t.Logf("summary (release setting round order: factory s, plain s, factory/plain, violations factory/plain):\n%s",
		strings.Join(rows, "\n"))
}

// idleRuns starts three nodes of version with opts and runs two
// factory/plain pairs on them, returning one summary row per pair.
func idleRuns(t *testing.T, version, setting string, opts []kafkatest.Opt) []string {
	c := kafkatest.Start(t, append([]kafkatest.Opt{kafkatest.Nodes(3), kafkatest.Version(version)}, opts...)...)

	// Which idle interval the nodes run with, as node 1 reports it.
	ctx := testkit.CtxFor(t, 2*time.Minute)
	rc, err := kadm.NewClient(plainClient(t, c)).DescribeBrokerConfigs(ctx, 1)
	require.NoError(t, err)
	idle := "(not reported)"
	for _, r := range rc {
		for _, cfg := range r.Configs {
			if cfg.Key == "metadata.max.idle.interval.ms" {
				idle = cfg.MaybeValue() + " (" + cfg.Source.String() + ")"
			}
		}
	}
	t.Logf("%s %s: metadata.max.idle.interval.ms=%s", version, setting, idle)

	var rows []string
	for round := range 2 {
		modes := []checker.Mode{checker.ModeFactory, checker.ModePlain}
		if round == 1 {
			modes = []checker.Mode{checker.ModePlain, checker.ModeFactory}
		}
		seed := uint64(round + 1)
		ctx := testkit.CtxFor(t, 6*time.Minute)
		got := map[checker.Mode]*checker.Result{}
		for _, mode := range modes {
			res, err := checker.Run(ctx, checker.Config{Seed: seed, Mode: mode, Ops: 400, Goroutines: 4,
				Addrs: c.BootstrapAddrs(), BypassAdminCache: true})
			require.NoError(t, err, "%s", mode)
			rep := res.Report
			t.Logf("%s %s round %d %s: ops=%d views=%d unjudged=%d acked=%d consumed=%d violations=%d (read-your-writes %d, monotonic %d) token=%d in %v (drain %v)",
				version, setting, round, mode, res.ClientOps, rep.Views, rep.Unjudged, rep.Acked, rep.Consumed, len(rep.Violations),
				rep.Count(checker.ReadYourWrites), rep.Count(checker.MonotonicReads), res.Token,
				res.Elapsed.Round(time.Millisecond), res.Drain.Round(time.Millisecond))
			// Not vacuous, and well formed, as in checkerOn.
			require.GreaterOrEqual(t, res.ClientOps, 400)
			require.Greater(t, rep.Writes, 30, "%s", mode)
			require.Greater(t, rep.Views, 300, "%s", mode)
			require.Greater(t, rep.Acked, 20, "%s", mode)
			require.Zero(t, rep.Count(checker.WellFormed), "%s: %v", mode, rep.Violations)
			require.Zero(t, rep.Count(checker.NoLoss)+rep.Count(checker.NoDuplication), "%s: %v", mode, rep.Violations)
			if mode == checker.ModeFactory {
				for _, v := range rep.Violations {
					t.Errorf("factory: %v", v)
				}
				require.GreaterOrEqual(t, res.Token, int64(0), "the factory made no token: emulation was off")
			}
			got[mode] = res
		}
		f, p := got[checker.ModeFactory], got[checker.ModePlain]
		order := "factory-first"
		if round == 1 {
			order = "plain-first"
		}
		row := fmt.Sprintf("%s %s %d %s: %.1f %.1f %.2f %d/%d", version, setting, round, order,
			f.Elapsed.Seconds(), p.Elapsed.Seconds(), f.Elapsed.Seconds()/p.Elapsed.Seconds(),
			len(f.Report.Violations), len(p.Report.Violations))
		t.Log(row)
		rows = append(rows, row)
	}
	return rows
}
