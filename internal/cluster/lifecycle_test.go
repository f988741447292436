package cluster

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWatcherCloseWaitsForCheck: Close ends a probe in flight and returns
// only after the check's goroutine is done, its event reported.
func TestWatcherCloseWaitsForCheck(t *testing.T) {
	probing := make(chan struct{})
	release := make(chan struct{})
	var reported atomic.Bool
	w := &Watcher{
		Probe: func(ctx context.Context) (string, error) {
			close(probing)
			<-ctx.Done() // ended by Close
			<-release
			return "", ctx.Err()
		},
		OnEvent: func(Event) { reported.Store(true) },
	}
	w.Check(true)
	<-probing
	closed := make(chan struct{})
	go func() {
		w.Close()
		close(closed)
	}()
	// An observation window, not synchronisation: Close must still be
	// waiting when it ends.
	select {
	case <-closed:
		t.Fatal("Close returned while a check was running")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the check ended")
	}
	require.True(t, reported.Load(), "the check finished before Close returned")
	goleak.VerifyNone(t)
}

// TestWatcherAfterClose: checks and watches after Close start nothing, and
// Settle does not wait for them.
func TestWatcherAfterClose(t *testing.T) {
	var probes atomic.Int32
	w := &Watcher{Probe: func(context.Context) (string, error) {
		probes.Add(1)
		return "a", nil
	}}
	w.Close()
	w.Close() // harmless
	w.Check(true)
	w.Watch()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.Equal(t, uint64(0), w.Settle(ctx))
	require.NoError(t, ctx.Err())
	goleak.VerifyNone(t)
	require.Zero(t, probes.Load(), "no probe after Close")
	require.Empty(t, w.Cluster())
}
