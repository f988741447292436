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
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, Local: true, ConsumeOnly: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -consume-only -quick", Logf: t.Logf}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	local := doc[strings.Index(doc, beginMarker(consumeSection)):strings.Index(doc, endMarker(consumeSection))]
	require.Contains(t, local, "-consume-only -quick")
	for v, name := range readerNames {
		row := cells(t, local, "| "+name+" |")
		require.Greater(t, leading(t, row[1]), 1000.0, "%s: records/s", name)
		require.Greater(t, leading(t, row[2]), 0.0, "%s: CPU", name)
		if v != rPlain {
			ratio := leading(t, row[3])
			require.True(t, ratio > 0.05 && ratio < 20, "%s: ratio %v", name, ratio)
			require.Contains(t, row[3], "95% CI [")
		}
	}
	// The producer's sections were not run.
	require.Contains(t, doc, beginMarker(localSection)+"\n"+endMarker(localSection))
}
