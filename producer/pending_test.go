package producer

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func isDone(ep *epoch) bool {
	select {
	case <-ep.done:
		return true
	default:
		return false
	}
}

// TestEpochs: a sealed epoch is done once every record counted in it ended,
// at once if none was; a record counted after it was sealed and done does
// not close it twice; a Flush waits for the epochs sealed before its own,
// and the links to those known done are dropped.
func TestEpochs(t *testing.T) {
	var es epochs
	es.init()
	first := es.current()
	first.add(2)
	sealed := es.seal()
	require.Same(t, first, sealed)
	require.NotSame(t, first, es.current(), "records produced from now on count in a new epoch")
	require.False(t, isDone(sealed))
	sealed.end()
	require.False(t, isDone(sealed))
	sealed.end()
	require.True(t, isDone(sealed))
	require.NotPanics(t, func() { sealed.add(1); sealed.end() }, "a late record ends without closing done again")

	empty := es.seal()
	require.True(t, isDone(empty), "nothing to wait for")

	// A Flush whose context ended leaves its epoch undone: the next one
	// waits for it too.
	slow := es.current()
	slow.add(1)
	require.Same(t, slow, es.seal())
	next := es.current()
	next.add(1)
	require.Same(t, next, es.seal())
	next.end()
	require.True(t, isDone(next))
	chain := next.chain()
	require.Equal(t, []*epoch{next, slow}, chain[:2], "the epoch before is not done: a Flush waits for it too")
	for _, x := range chain[2:] {
		require.True(t, isDone(x), "an epoch further back is done")
	}
	slow.end()
	for _, x := range next.chain() {
		require.True(t, isDone(x))
	}
	next.settled() // what a wait that saw them all done records
	require.Equal(t, []*epoch{next}, next.chain(), "the links to epochs known done are dropped")
	after := es.seal()
	require.Equal(t, []*epoch{after}, after.chain(), "the epoch sealed before it is complete: no link is kept")
}

// TestEpochsConcurrent: records counted and ended by many goroutines while
// Flushes seal epochs: every sealed epoch is done once its records ended,
// whatever the interleaving (run with -race).
func TestEpochsConcurrent(t *testing.T) {
	var es epochs
	es.init()
	var wg sync.WaitGroup
	const workers, per = 4, 2000
	for range workers {
		wg.Go(func() {
			for range per {
				ep := es.current()
				ep.add(1)
				ep.end()
			}
		})
	}
	var sealed []*epoch
	for range 50 {
		sealed = append(sealed, es.seal())
	}
	wg.Wait()
	sealed = append(sealed, es.seal())
	for _, ep := range sealed {
		for _, x := range ep.chain() {
			require.True(t, isDone(x), "every record of it ended")
		}
	}
}
