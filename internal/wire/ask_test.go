package wire

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestQuestionFlights: callers join the flight under way; a caller that
// needs a fresh answer joins the next one, which starts when the first
// ends; at most one flight runs and one waits, however many ask; a flight
// ends at AskTimeout; await ends at its bound or when stop says so; after
// close nothing is asked.
func TestQuestionFlights(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAsker(time.Second)
		var started, ended atomic.Int64
		release := make(chan struct{})
		q := &question{run: func(ctx context.Context) bool {
			started.Add(1)
			defer ended.Add(1)
			select {
			case <-release:
				return true
			case <-ctx.Done():
				return false
			}
		}}

		first := a.ask(q, false)
		same := a.ask(q, false)
		next := a.ask(q, true)
		for range 10 {
			require.Equal(t, next, a.ask(q, true), "one flight waits, however many ask")
		}
		require.Equal(t, first, same)
		require.NotEqual(t, first, next)
		synctest.Wait()
		require.EqualValues(t, 1, started.Load())

		start := time.Now()
		require.ErrorIs(t, await(first.done, start.Add(300*time.Millisecond), nil), errBound)
		require.Equal(t, 300*time.Millisecond, time.Since(start))
		stopped := make(chan struct{})
		go func() { time.Sleep(120 * time.Millisecond); close(stopped) }()
		err := await(first.done, time.Time{}, func() error {
			select {
			case <-stopped:
				return context.Canceled
			default:
				return nil
			}
		})
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, 300*time.Millisecond+3*stopEvery, time.Since(start), "stop is looked at every stopEvery")

		release <- struct{}{} // the first flight answers
		require.NoError(t, await(first.done, time.Time{}, nil))
		require.True(t, first.ok, "the first flight was answered")
		synctest.Wait()
		require.EqualValues(t, 2, started.Load(), "the fresh flight started when the first ended")
		start = time.Now()
		require.NoError(t, await(next.done, time.Time{}, nil))
		require.Equal(t, time.Second, time.Since(start), "a flight nobody answers ends at AskTimeout")
		require.False(t, next.ok, "a flight that timed out got no answer")

		a.close()
		require.Equal(t, started.Load(), ended.Load())
		select {
		case <-a.ask(q, false).done:
		default:
			t.Fatal("a question asked after close must not wait")
		}
		require.EqualValues(t, 2, started.Load())
	})
}
