package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRealKafkaRYWQuick runs -realkafka-ryw -quick on three real Kafka 4.4
// nodes into a temporary report: both read-your-writes rows and the
// emulated overhead table are there, the factory failed no trial and was
// never answered stale, and it ended with a token it made itself (so the
// overhead was measured with emulation on, not with tokens off).
func TestRealKafkaRYWQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Kafka JVMs")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(out, []byte(skeleton()), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, RealKafkaRYW: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -realkafka-ryw -local=false -quick", Logf: t.Logf}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	require.Equal(t, 1, strings.Count(doc, beginMarker(rywKafkaSection)))

	f := cells(t, doc, "| factory | 2 |")
	require.Equal(t, "0", f[6], "factory failures")
	require.Equal(t, "0 (0)", f[7], "factory stale answers")
	require.Greater(t, leading(t, f[2]), 0.0)
	p := cells(t, doc, "| plain kgo | 2 |")
	require.Greater(t, leading(t, p[2]), 0.0)

	require.NotContains(t, doc, "token at the end of the last block: none")
	require.Regexp(t, `token at the end of the last block: \d+\.`, doc)
	require.Equal(t, []string{"0", "0", "0"}, cells(t, doc, "| failed records")[1:4])
	require.Contains(t, doc, "](overhead_realkafka_emulated_throughput.png)")
}

// TestRealKafkaNativeQuick runs -realkafka-ryw -kip1243 -quick on three
// Kafka 4.4 nodes with the KIP-1243 agent into a temporary report: one
// table with plain kgo, both factory modes and the control; neither
// factory failed a read-your-writes trial or was answered stale, no record
// failed, and each factory ended with a token (the native one from the
// brokers' headers: the agent was on).
func TestRealKafkaNativeQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Kafka JVMs with the KIP-1243 agent")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(out, []byte(skeleton()), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, RealKafkaRYW: true, KIP1243: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -realkafka-ryw -kip1243 -local=false -quick", Logf: t.Logf}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	require.Equal(t, 1, strings.Count(doc, beginMarker(nativeSection)))
	require.NotContains(t, doc, beginMarker(rywKafkaSection))

	p := cells(t, doc, "| plain kgo | 2 |")
	require.Greater(t, leading(t, p[2]), 0.0)
	require.Equal(t, "0", p[12], "plain kgo failed records")
	for _, name := range []string{"factory, emulated mode", "factory, native mode"} {
		f := cells(t, doc, "| "+name+" | 2 |")
		require.Greater(t, leading(t, f[2]), 0.0, name)
		require.Equal(t, "0", f[6], "%s: read-your-writes failures", name)
		require.Equal(t, "0 (0)", f[7], "%s: stale trials", name)
		require.Greater(t, leading(t, f[8]), 0.0, "%s: records/s", name)
		require.Contains(t, f[9], "[", "%s: throughput ratio and interval", name)
		require.Equal(t, "0", f[12], "%s: failed records", name)
		require.Regexp(t, `^\d+$`, f[13], "%s: token at the end", name)
	}
	c := cells(t, doc, "| control (plain kgo): harness error |")
	require.Equal(t, "–", c[1])
	require.Equal(t, "0", c[12])
}
