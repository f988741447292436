package factory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDefaultBackoffIsJavas: without retry.backoff.ms the factory's clients
// retry as the Java client does, 50ms doubling up to 1s with ±20% jitter.
// franz-go's default (250ms up to 2.5s) made a client whose broker address
// was misrouted for a few seconds find it repaired up to 2.5s late, where
// the Java 4.4 producer took at most about a second (issue 21). With
// RetryBackoff the wait is the one given.
func TestDefaultBackoffIsJavas(t *testing.T) {
	backoffOf := func(opts ...Opt) func(int) time.Duration {
		t.Helper()
		f, err := New(nil, append([]Opt{BootstrapServers("127.0.0.1:1")}, opts...)...)
		require.NoError(t, err)
		defer f.Close()
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
	within(0, 50*time.Millisecond)
	within(1, 50*time.Millisecond)
	within(2, 100*time.Millisecond)
	within(3, 200*time.Millisecond)
	within(5, 800*time.Millisecond)
	within(6, time.Second)
	within(40, time.Second)
	within(1<<30, time.Second)
	spread := map[time.Duration]bool{}
	for range 50 {
		spread[fn(1)] = true
	}
	require.Greater(t, len(spread), 1, "jittered")

	fixed := backoffOf(RetryBackoff(20 * time.Millisecond))
	require.Equal(t, 20*time.Millisecond, fixed(1))
	require.Equal(t, 20*time.Millisecond, fixed(9))
}
