package main

import (
	"bytes"
	"context"
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	t.Logf("output:\n%s%s", out.String(), errOut.String())
	return out.String(), err
}

// TestSideBySide runs the command as a newcomer would, with fewer records:
// the factory column reads its writes, the plain column reads stale data.
func TestSideBySide(t *testing.T) {
	for _, mode := range []string{"wait", "error"} {
		t.Run(mode, func(t *testing.T) {
			args := []string{"-lag", "500ms", "-records", "5"}
			if mode == "error" {
				args = append(args, "-error-mode")
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

			held := number(t, cells(t, out, "requests held for the token (cluster)")[0])
			retried := number(t, cells(t, out, "INCONSISTENT_METADATA retried")[0])
			if mode == "wait" {
				require.Positive(t, held, "lagging brokers held the factory's requests")
			} else {
				require.Positive(t, retried, "lagging brokers answered INCONSISTENT_METADATA and the factory retried")
			}
		})
	}
}

// TestExternalCluster runs the factory flow alone with -brokers: against a
// KIP-1243 cluster the token is known and reads are fresh; against kfake (no
// KIP-1243, like a released Kafka) the run works and says no token came
// back.
func TestExternalCluster(t *testing.T) {
	t.Run("kip1243", func(t *testing.T) {
		lc, err := localcluster.New(localcluster.Brokers(2), localcluster.BrokerLag(1, 200*time.Millisecond))
		require.NoError(t, err)
		defer lc.Close()
		out, err := runCmd(t, "-brokers", strings.Join(lc.Addrs(), ","), "-records", "3")
		require.NoError(t, err)
		require.Equal(t, []string{"factory (kconsist)"}, cells(t, out, "clients"), "no side-by-side")
		require.Equal(t, []string{"n/a"}, cells(t, out, "stale answers served (cluster count)"))
		require.Equal(t, []string{"0"}, cells(t, out, "stale reads seen by the app"))
		require.Contains(t, out, "factory token after the run: "+lc.ClusterID()+"@")
		require.NotContains(t, out, "No KIP-1243 token")
	})
	t.Run("kfake", func(t *testing.T) {
		kf, err := kfake.NewCluster(kfake.NumBrokers(1))
		require.NoError(t, err)
		defer kf.Close()
		out, err := runCmd(t, "-brokers", strings.Join(kf.ListenAddrs(), ","), "-records", "3")
		require.NoError(t, err)
		require.Contains(t, out, "No KIP-1243 token came back")
		require.Equal(t, []string{"3 / 3"}, cells(t, out, "records produced / consumed"))
	})
}

// TestErrors: bad flags and an unreachable cluster end the run with an error
// that says what went wrong.
func TestErrors(t *testing.T) {
	_, err := runCmd(t, "-records", "0")
	require.ErrorContains(t, err, "-records 0")
	_, err = runCmd(t, "extra")
	require.ErrorContains(t, err, "unexpected arguments")
	_, err = runCmd(t, "-nosuchflag")
	require.Error(t, err)

	// A port nobody listens on: the run gives up at -timeout.
	_, err = runCmd(t, "-brokers", "127.0.0.1:1", "-timeout", "2s")
	require.ErrorContains(t, err, "deadline exceeded")
}
