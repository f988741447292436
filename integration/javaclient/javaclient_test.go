package javaclient_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/integration/javaclient"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/integration/localcluster"
)

// The Apache Kafka 4.4 Java client administers, produces to and consumes
// from a local cluster whose brokers lag: every call of JavaClient.java's
// "all" mode succeeds (issue 23). The program retries reads that follow a
// change until they see it, as on any Kafka cluster; the lag makes sure
// some do.
func TestJavaClientAll(t *testing.T) {
	// Writes are answered at commit (as Kafka 4.4 answers them), so the
	// brokers that have not applied a write yet serve the reads after it.
	c, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(100*time.Millisecond),
		localcluster.WriteAnswers(localcluster.WritesAtCommit))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	cmd := javaclient.Command(t, ctx, "all", strings.Join(c.Addrs(), ","))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		t.Log(line)
	}
	if err != nil || !strings.HasSuffix(strings.TrimSpace(stdout.String()), "PASS") {
		t.Fatalf("JavaClient all: %v\nstderr:\n%s", err, stderr.String())
	}
	t.Logf("JVM run took %v; gateway stats %+v", time.Since(start).Round(time.Millisecond), c.Stats())
	st := c.Stats()
	require.Zero(t, st.ClosedMalformed, "no connection closed for a request the gateway could not parse")
	require.Positive(t, st.StaleAnswers, "the brokers' lag showed")
}

// TestJavaClientAllOnKIP1243Brokers: the Apache Kafka 4.4 Java client,
// which sends no token, goes through every call of its "all" mode (Admin
// calls, an idempotent producer, consumers in a classic and a KIP-848
// group) on 3 real Kafka 4.4 nodes that speak KIP-1243 through the agent:
// the tagged response headers and the token checks leave it unharmed.
func TestJavaClientAllOnKIP1243Brokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real Apache Kafka; skipped with -short")
	}
	c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.KIP1243())
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := javaclient.Command(t, ctx, "all", strings.Join(c.BootstrapAddrs(), ","))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		t.Log(line)
	}
	if err != nil || !strings.HasSuffix(strings.TrimSpace(stdout.String()), "PASS") {
		t.Fatalf("JavaClient all on KIP-1243 brokers: %v\nstderr:\n%s", err, stderr.String())
	}
}
