package tokens

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
)

// TestStreamOrderAndSlowReceiver: events arrive in the order they were
// emitted, and a receiver that blocks never blocks Emit; past the limit
// droppable events are dropped and counted, others kept.
func TestStreamOrderAndSlowReceiver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var got []int
		s := NewStream(func(ev int) {
			if ev == 0 {
				<-release // the receiver is stuck on the first event
			}
			got = append(got, ev)
		}, func(ev int) bool { return ev%2 == 1 }, 4)
		s.Emit(0)
		// The receiver has taken 0 before the rest come: without this
		// wait the scheduler decides how many are queued before it runs
		// (2 dropped instead of 3, once under load).
		synctest.Wait()
		for i := 1; i < 10; i++ {
			s.Emit(i) // returns although the receiver is stuck
		}
		synctest.Wait()
		// 0 was taken; 1..4 queued up to the limit; then only the even
		// ones (not droppable) were kept.
		require.EqualValues(t, 3, s.Dropped())
		close(release)
		s.Flush()
		require.Equal(t, []int{0, 1, 2, 3, 4, 6, 8}, got)
		s.Close()
		s.Emit(11)
		require.Equal(t, []int{0, 1, 2, 3, 4, 6, 8}, got, "nothing is delivered after Close")
	})
}

// TestStreamCloseDelivers: Close delivers what is queued before it
// returns.
func TestStreamCloseDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []int
		s := NewStream(func(ev int) { got = append(got, ev) }, nil, 0)
		for i := range 100 {
			s.Emit(i)
		}
		s.Close()
		require.Len(t, got, 100)
	})
}
