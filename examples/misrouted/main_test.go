package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRun runs both scenarios; run itself fails if a record goes astray or
// the misroute is handled differently from what the output says, and the
// output tells the two stories.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, nil, &out, &errOut)
	t.Logf("output:\n%s%s", out.String(), errOut.String())
	require.NoError(t, err)

	on, off, ok := strings.Cut(out.String(), "== metadata.cluster.check.enable=false")
	require.True(t, ok, "both scenarios ran")
	require.Contains(t, on, "event rebootstrap: a broker answered REBOOTSTRAP_REQUIRED")
	require.Contains(t, on, "read: an error, never an answer from cluster-b")
	require.Contains(t, on, "cluster-b holds 0 records")
	require.Contains(t, on, "cluster-a holds 10, cluster-b 0; the admin read says end offset 10")

	require.Contains(t, off, "read: end offset 0 — served by cluster-b (cluster-a holds 5)")
	require.Contains(t, off, "5 records failed with UNKNOWN_TOPIC_ID")
	require.Contains(t, off, "misroute events: 0, rebootstraps: 0")
	require.NotContains(t, off, "event rebootstrap")
}

func TestBadArgs(t *testing.T) {
	var out, errOut bytes.Buffer
	// -h prints the usage and is no error (exit 0), as with Go's tools.
	require.NoError(t, run(context.Background(), []string{"-h"}, &out, &errOut))
	require.Contains(t, errOut.String(), "-timeout")
	require.ErrorContains(t, run(context.Background(), []string{"extra"}, &out, &errOut), "unexpected arguments")
	require.Error(t, run(context.Background(), []string{"-nosuchflag"}, &out, &errOut))
}
