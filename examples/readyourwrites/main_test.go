package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kconsist/kconsist/integration/localcluster"
)

// cells returns the values of the table row that starts with label.
func cells(t *testing.T, out, label string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(line, label); ok && strings.HasPrefix(rest, "  ") {
			return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(rest), -1)
		}
	}
	t.Fatalf("no row %q in:\n%s", label, out)
	return nil
}

func number(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err, "cell %q", s)
	return n
}

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	// A bound against a hang, not a measure: -realkafka starts three JVMs,
	// which on a loaded machine took most of a minute (and a boot retried
	// after a taken port, more).
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	t.Logf("output:\n%s%s", out.String(), errOut.String())
	return out.String(), err
}

// TestSideBySide runs the command as a newcomer would, with fewer records:
// the factory column reads its writes, the plain column is served stale
// data. The default cluster behaves like Apache Kafka 4.4 (the factory
// emulates tokens); -native brokers hold requests or, with -error-mode,
// answer INCONSISTENT_METADATA.
func TestSideBySide(t *testing.T) {
	for _, mode := range []string{"emulated", "wait", "error"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"-lag", "500ms", "-records", "5"}
			switch mode {
			case "wait":
				args = append(args, "-native")
			case "error":
				args = append(args, "-native", "-error-mode")
			}
			out, err := runCmd(t, args...)
			require.NoError(t, err)
			require.Contains(t, out, "OK: the factory flow read its writes")

			require.Equal(t, []string{"factory (kconsist)", "plain kgo/kadm"}, cells(t, out, "clients"))
			seen := cells(t, out, "stale reads seen by the app")
			served := cells(t, out, "stale answers served (cluster count)")
			require.Equal(t, "0", seen[0], "the factory saw no stale read")
			require.Equal(t, "0", served[0], "no broker answered the factory stale")
			// Whether the plain app itself reads a topic as missing depends
			// on which broker each read reaches (broker 0 has no lag, and
			// franz-go retries some answers); that the cluster served them
			// stale answers does not.
			require.Positive(t, number(t, served[1]), "lagging brokers answered plain clients stale")
			_ = number(t, seen[1]) // still a count
			require.Equal(t, "0", cells(t, out, "errors returned to the app")[0])
			require.Equal(t, "5 / 5", cells(t, out, "records produced / consumed")[0])
			require.Contains(t, out, "stale answers served: answers a lagging broker gave", "the counters are explained")

			held := number(t, cells(t, out, "requests held by brokers (cluster count)")[0])
			retried := number(t, cells(t, out, "INCONSISTENT_METADATA retried")[0])
			switch mode {
			case "emulated":
				require.Contains(t, out, "behaving like Apache Kafka 4.4")
				require.Zero(t, held, "brokers without KIP-1243 hold nothing")
				require.Zero(t, retried)
			case "wait":
				require.Positive(t, held, "lagging brokers held the factory's requests")
			case "error":
				require.Positive(t, retried, "lagging brokers answered INCONSISTENT_METADATA and the factory retried")
			}
		})
	}
}

// TestExternalCluster runs both flows with -brokers: against a cluster with
// tokens (KIP-1243 or emulated) the factory's reads are fresh; against
// kfake (neither) the run works and says the factory had no token.
func TestExternalCluster(t *testing.T) {
	for _, native := range []bool{true, false} {
		t.Run(fmt.Sprintf("native=%v", native), func(t *testing.T) {
			lc, err := localcluster.New(localcluster.Brokers(2), localcluster.BrokerLag(1, 200*time.Millisecond),
				localcluster.Native(native))
			require.NoError(t, err)
			defer lc.Close()
			out, err := runCmd(t, "-brokers", strings.Join(lc.Addrs(), ","), "-records", "3")
			require.NoError(t, err)
			require.Equal(t, []string{"factory (kconsist)", "plain kgo/kadm"}, cells(t, out, "clients"), "side by side")
			require.Equal(t, []string{"n/a", "n/a"}, cells(t, out, "stale answers served (cluster count)"))
			require.Equal(t, "0", cells(t, out, "stale reads seen by the app")[0])
			require.Equal(t, []string{"3 / 3", "3 / 3"}, cells(t, out, "records produced / consumed"))
			require.Contains(t, out, "factory token after the run: "+lc.ClusterID()+"@")
			require.Contains(t, out, "to hand over: kc1.")
		})
	}
	t.Run("kfake", func(t *testing.T) {
		kf, err := kfake.NewCluster(kfake.NumBrokers(1))
		require.NoError(t, err)
		defer kf.Close()
		out, err := runCmd(t, "-brokers", strings.Join(kf.ListenAddrs(), ","), "-records", "3")
		require.NoError(t, err)
		require.Contains(t, out, "factory token after the run: unknown")
		require.Contains(t, out, "Without a token the factory can only be as fresh")
		require.Equal(t, []string{"3 / 3", "3 / 3"}, cells(t, out, "records produced / consumed"))
	})
}

// TestRealKafka runs -realkafka: three Apache Kafka 4.4 nodes, where the
// factory emulates tokens and must read its writes. Whether plain kgo reads
// stale data on real brokers varies from run to run, so only the factory's
// column is asserted. Like every test that starts real brokers it needs
// Java and Maven and is skipped with -short.
func TestRealKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real Apache Kafka; skipped with -short")
	}
	out, err := runCmd(t, "-realkafka", "-records", "5")
	require.NoError(t, err)
	require.Contains(t, out, "OK: the factory flow read its writes")
	require.Equal(t, []string{"factory (kconsist)", "plain kgo/kadm"}, cells(t, out, "clients"))
	require.Equal(t, "0", cells(t, out, "stale reads seen by the app")[0])
	require.Equal(t, "0", cells(t, out, "errors returned to the app")[0])
	require.Equal(t, "5 / 5", cells(t, out, "records produced / consumed")[0])
	require.NotContains(t, out, "token after the run: unknown", "the factory emulated tokens")
}

// TestRealKafkaKIP1243 runs -realkafka -kip1243: three Kafka 4.4 nodes
// with the KIP-1243 agent, the factory in native mode (tokens from the
// brokers' headers only) must read its writes.
func TestRealKafkaKIP1243(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real Apache Kafka; skipped with -short")
	}
	out, err := runCmd(t, "-realkafka", "-kip1243", "-records", "5")
	require.NoError(t, err)
	require.Contains(t, out, "with the KIP-1243 agent")
	require.Contains(t, out, "OK: the factory flow read its writes")
	require.Equal(t, "0", cells(t, out, "stale reads seen by the app")[0])
	require.Equal(t, "0", cells(t, out, "errors returned to the app")[0])
	require.Equal(t, "5 / 5", cells(t, out, "records produced / consumed")[0])
	require.NotContains(t, out, "token after the run: unknown", "the brokers sent tokens")
}

// TestRealKafkaWithoutJava: without Java, -realkafka says plainly what is
// missing and what to install.
func TestRealKafkaWithoutJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := runCmd(t, "-realkafka")
	require.ErrorContains(t, err, "-realkafka runs Apache Kafka as Java processes")
	require.ErrorContains(t, err, "java is not on PATH; install a Java 17+ runtime")
}

// TestHelp: -h prints the usage and exits 0, with no error line, as Go's
// own tools do.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		var out, errOut bytes.Buffer
		code := exitCode(run(context.Background(), []string{arg}, &out, &errOut), &errOut)
		require.Equal(t, 0, code, arg)
		require.Contains(t, errOut.String(), "Usage: go run ./examples/readyourwrites")
		require.Contains(t, errOut.String(), "-realkafka")
		require.NotContains(t, errOut.String(), "help requested")
		require.NotContains(t, errOut.String(), "readyourwrites:")
		require.Empty(t, out.String())
	}
}

// TestConclusion: the closing lines say what the run showed; a run where
// plain kgo read nothing stale must not claim it did (issue 24: with -lag 0
// the old closing sentence said plain clients were "answered at once but
// wrongly").
func TestConclusion(t *testing.T) {
	embedded := target{lc: &localcluster.Cluster{}}
	factoryOK := &result{tokenKnown: true, produced: 3, consumed: 3, clusterStats: true}
	for _, tc := range []struct {
		name  string
		s     settings
		t     target
		f     *result
		plain *result
		want  []string
		not   []string
	}{
		{
			name:  "plain read stale",
			s:     settings{records: 3, lag: 500 * time.Millisecond},
			t:     embedded,
			f:     factoryOK,
			plain: &result{stale: []string{"a", "b"}, clusterStats: true, staleServed: 4},
			want:  []string{"Plain kgo/kadm read 2 stale answers; the factory", "answered at once but wrongly"},
		},
		{
			name:  "served but retried away",
			s:     settings{records: 3, lag: 500 * time.Millisecond},
			t:     embedded,
			f:     factoryOK,
			plain: &result{clusterStats: true, staleServed: 3},
			want:  []string{"read no stale answer this run, but lagging brokers served it 3"},
			not:   []string{"wrongly"},
		},
		{
			name:  "lag 0",
			s:     settings{records: 3},
			t:     embedded,
			f:     factoryOK,
			plain: &result{clusterStats: true},
			want:  []string{"read no stale answer this run either", "With -lag 0 no broker lags"},
			not:   []string{"wrongly"},
		},
		{
			name:  "real kafka, nothing stale",
			s:     settings{records: 3},
			t:     target{realKafka: true},
			f:     &result{tokenKnown: true, produced: 3, consumed: 3},
			plain: &result{},
			want:  []string{"read no stale answer this run either", "run it again"},
			not:   []string{"wrongly", "-lag"},
		},
		{
			name:  "no token",
			s:     settings{records: 3},
			t:     target{},
			f:     &result{produced: 3, consumed: 3},
			plain: &result{stale: []string{"a"}},
			want:  []string{"Without a token the factory can only be as fresh"},
			not:   []string{"the factory, whose clients share a token, read none"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			require.NoError(t, verdict(&out, tc.s, tc.t, tc.f, tc.plain))
			for _, w := range tc.want {
				require.Contains(t, out.String(), w)
			}
			for _, n := range tc.not {
				require.NotContains(t, out.String(), n)
			}
			require.Contains(t, out.String(), "OK: the factory flow read its writes")
		})
	}
}

// TestErrors: bad flags and an unreachable cluster end the run with an error
// that says what went wrong.
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-records", "0"}, "-records 0"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"-realkafka", "-brokers", "127.0.0.1:1"}, "give one cluster"},
		{[]string{"-brokers", "127.0.0.1:1", "-lag", "1s"}, "-lag applies to the embedded cluster only"},
		{[]string{"-realkafka", "-native"}, "-native applies to the embedded cluster only"},
		{[]string{"-error-mode"}, "-error-mode needs -native"},
		{[]string{"-realkafka", "-error-mode"}, "-error-mode applies to the embedded cluster only"},
		{[]string{"-kip1243"}, "-kip1243 needs -realkafka"},
	} {
		_, err := runCmd(t, tc.args...)
		require.ErrorContains(t, err, tc.want, "%q", tc.args)
		require.Equal(t, 1, exitCode(err, io.Discard))
	}

	var errOut bytes.Buffer
	err := run(context.Background(), []string{"-nosuchflag"}, io.Discard, &errOut)
	require.Error(t, err)
	require.Equal(t, 2, exitCode(err, &errOut), "a bad flag exits 2, as with the flag package")
	require.Contains(t, errOut.String(), "flag provided but not defined: -nosuchflag")
	require.NotContains(t, errOut.String(), "readyourwrites:", "the flag package said it already")

	// A port nobody listens on: the run gives up at -timeout.
	_, err = runCmd(t, "-brokers", "127.0.0.1:1", "-timeout", "2s")
	require.ErrorContains(t, err, "deadline exceeded")
}
