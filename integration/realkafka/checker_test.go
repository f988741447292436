package realkafka

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/integration/checker"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
)

// TestCheckerOnKafka runs the read-your-writes and monotonic-reads
// checker (integration/checker) on three real Kafka nodes of each release
// of kafkatest.MatrixVersions (KCONSIST_KAFKA_VERSIONS), first with
// the clients of one factory (ModeAuto: tokens made from KRaft's offsets),
// then with plain kgo/kadm clients on the same cluster. The factory must
// break no rule; plain's count is reported, not asserted: real brokers lag
// by themselves, and how often a plain client catches one behind depends
// on the machine. Both modes read past kadm's metadata cache, so that plain
// clients' stale reads come from the brokers.
func TestCheckerOnKafka(t *testing.T) {
	for _, v := range matrixVersions(t) {
		t.Run(v, func(t *testing.T) { checkerOn(t, v) })
	}
}

func checkerOn(t *testing.T, version string) {
	c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.Version(version))
	ctx := testkit.CtxFor(t, 2*time.Minute)
	counts := map[checker.Mode]checker.Report{}
	for _, mode := range []checker.Mode{checker.ModeFactory, checker.ModePlain} {
		res, err := checker.Run(ctx, checker.Config{Seed: 1, Mode: mode, Ops: 400, Goroutines: 4,
			Addrs: c.BootstrapAddrs(), BypassAdminCache: true})
		require.NoError(t, err, "%s", mode)
		rep := res.Report
		t.Logf("%s: ops=%d views=%d unjudged=%d acked=%d consumed=%d violations=%d (read-your-writes %d, monotonic %d) token=%d in %v",
			mode, res.ClientOps, rep.Views, rep.Unjudged, rep.Acked, rep.Consumed, len(rep.Violations),
			rep.Count(checker.ReadYourWrites), rep.Count(checker.MonotonicReads), res.Token, res.Elapsed.Round(time.Millisecond))
		// Not vacuous: writes, views and records all happened.
		require.GreaterOrEqual(t, res.ClientOps, 400)
		require.Greater(t, rep.Writes, 30, "%s", mode)
		require.Greater(t, rep.Views, 300, "%s", mode)
		require.Greater(t, rep.Acked, 20, "%s", mode)
		require.Zero(t, rep.Count(checker.WellFormed), "%s: %v", mode, rep.Violations)
		require.Zero(t, rep.Count(checker.NoLoss)+rep.Count(checker.NoDuplication), "%s: %v", mode, rep.Violations)
		counts[mode] = rep
		if mode == checker.ModeFactory {
			for _, v := range rep.Violations {
				t.Errorf("factory: %v", v)
			}
			require.GreaterOrEqual(t, res.Token, int64(0), "the factory made no token: emulation was off")
		}
	}
	require.Empty(t, counts[checker.ModeFactory].Violations)
	plain := counts[checker.ModePlain]
	t.Logf("plain kgo on the same cluster: %d read-your-writes and %d monotonic-reads violations over %d views",
		plain.Count(checker.ReadYourWrites), plain.Count(checker.MonotonicReads), plain.Views)
}
