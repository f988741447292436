package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunPrintsSeedsAndTotals(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errs bytes.Buffer
	code, err := run(ctx, []string{"-mode", "factory", "-bypass-admin-cache", "-seeds", "1", "-seed", "7", "-ops", "60", "-lag-max", "30ms"}, &out, &errs)
	require.NoError(t, err, out.String())
	require.Equal(t, 0, code)
	require.Contains(t, out.String(), "seed   7 factory: violations=0 ")
	require.Contains(t, out.String(), "total: mode=factory seeds=1 ops=62 ")

	out.Reset()
	code, err = run(ctx, []string{"-mode", "plain", "-seeds", "1", "-ops", "60", "-lag-max", "200ms", "-show", "1"}, &out, &errs)
	require.NoError(t, err)
	require.Equal(t, 0, code, "plain mode reports violations as evidence, not failure")
	require.Contains(t, out.String(), "total: mode=plain")
	if !strings.Contains(out.String(), "note: plain clients showed no violation") {
		require.Contains(t, out.String(), "[replay: -mode plain -seed 1 -seeds 1 -ops 60 -lag-max 200ms]")
	}

	// Both modes on brokers that behave like Kafka 4.4: the factory makes
	// its own tokens (the line shows one) and still breaks no rule.
	out.Reset()
	code, err = run(ctx, []string{"-mode", "both", "-native=false", "-seeds", "1", "-seed", "3", "-ops", "60", "-lag-max", "30ms"}, &out, &errs)
	require.NoError(t, err, out.String())
	require.Equal(t, 0, code)
	require.Contains(t, out.String(), "cluster=local Kafka-4.4-like (native=false) modes=[factory plain]")
	require.Regexp(t, `seed   3 factory: violations=0 .* token=\d+ `, out.String())
	require.Regexp(t, `seed   3 plain: .* token=none `, out.String())
	require.Contains(t, out.String(), "total: mode=factory seeds=1 ops=62 ")
	require.Contains(t, out.String(), "total: mode=plain seeds=1 ops=62 ")
	if strings.Contains(out.String(), "[replay: -mode plain") {
		require.Contains(t, out.String(), "-lag-max 30ms -native=false]")
	}
}

func TestRunRejectsBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{"-mode", "other"},
		{"-seeds", "0"},
		{"-ops", "0"},
		{"extra"},
		{"-lag-max", "-1s", "-seeds", "1", "-ops", "1"},
		{"-mode", "all"},
		{"-realkafka", "-native=false"},
		{"-kip1243"},
	} {
		var out, errs bytes.Buffer
		code, err := run(context.Background(), args, &out, &errs)
		require.Error(t, err, "%q", args)
		require.Equal(t, 2, code, "%q", args)
	}
}
