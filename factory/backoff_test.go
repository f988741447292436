package factory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDefaultBackoffIsJavas: without retry.backoff.ms the factory's clients
// retry as the Java client does, 100ms doubling up to 1s with ±20% jitter,
// capped after the jitter.
// franz-go's default (250ms up to 2.5s) made a client whose broker address
// was misrouted for a few seconds find it repaired up to 2.5s late, where
// the Java 4.4 producer took at most about a second (issue 21). With
// RetryBackoff the wait is the one given.
func TestDefaultBackoffIsJavas(t *testing.T) {
	backoffOf := func(opts ...Opt) func(int) time.Duration {
		t.Helper()
		f, err := New(append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...)...)
		require.NoError(t, err)
		defer f.Close(context.Background())
		cl, err := f.KgoClient()
		require.NoError(t, err)
		defer cl.Close()
		fn, ok := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration)
		require.True(t, ok, "RetryBackoffFn is set")
		return fn
	}
	fn := backoffOf()
	within := func(fails int, want time.Duration) {
		t.Helper()
		for range 200 {
			got := fn(fails)
			require.GreaterOrEqual(t, got, want*8/10, "retry %d", fails)
			require.LessOrEqual(t, got, want*12/10, "retry %d", fails)
		}
	}
	within(0, 100*time.Millisecond)
	within(1, 100*time.Millisecond)
	within(2, 200*time.Millisecond)
	within(3, 400*time.Millisecond)
	within(4, 800*time.Millisecond)
	for _, fails := range []int{5, 40, 1 << 30} {
		ceiling(t, fn, fails)
	}
	spread := map[time.Duration]bool{}
	for range 50 {
		spread[fn(1)] = true
	}
	require.Greater(t, len(spread), 1, "jittered")

	fixed := backoffOf(RetryBackoff(20 * time.Millisecond))
	require.Equal(t, 20*time.Millisecond, fixed(1))
	require.Equal(t, 20*time.Millisecond, fixed(9))
}

// ceiling checks fn(fails) at the ceiling as the Java client's
// ExponentialBackoff has it: jittered first, then capped, so 0.8–1s and
// exactly 1s about half the time. Jittering the 1s ceiling without the
// cap retried a misrouted address every 0.8–1.2s, about 50ms later on
// average than the Java producer (issue 21).
func ceiling(t *testing.T, fn func(int) time.Duration, fails int) {
	t.Helper()
	const n = 400
	var atMax int
	for range n {
		got := fn(fails)
		require.GreaterOrEqual(t, got, 800*time.Millisecond, "retry %d", fails)
		require.LessOrEqual(t, got, time.Second, "retry %d: above reconnect.backoff.max.ms", fails)
		if got == time.Second {
			atMax++
		}
	}
	// Binomial(400, 0.5): below 150 or above 250 has odds under 1e-6.
	require.Greater(t, atMax, 150, "retry %d: the cap applies to half the jittered waits", fails)
	require.Less(t, atMax, 250, "retry %d: the jitter below the cap remains", fails)
}
