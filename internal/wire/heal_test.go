package wire

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consistency"
)

// TestHealerChecks: a check runs on the Healer's goroutine, at most once
// per Every whoever asks; it lowers only a store of the committed
// offset's cluster that is beyond it; Close ends a check the cluster does
// not answer.
func TestHealerChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{committed: consistency.MustOf("c", 40)}
		store := knownStore(t, "c", 100)
		var healed [][2]consistency.Token
		h := NewHealer(HealerConfig{Store: store, Oracle: o, OnHealed: func(from, to consistency.Token) {
			healed = append(healed, [2]consistency.Token{from, to})
		}})
		defer h.Close()

		h.Check()
		h.Check() // one runs, or ran less than Every ago
		synctest.Wait()
		require.EqualValues(t, 1, o.quorum.Load())
		require.Equal(t, [][2]consistency.Token{{consistency.MustOf("c", 100), consistency.MustOf("c", 40)}}, healed)
		require.Equal(t, consistency.MustOf("c", 40), store.Load())

		time.Sleep(time.Second - time.Nanosecond)
		h.Check()
		synctest.Wait()
		require.EqualValues(t, 1, o.quorum.Load(), "asked again before Every")
		time.Sleep(time.Nanosecond)
		o.set(func(o *scriptedOracle) { o.committed = consistency.MustOf("other", 10) })
		h.Check()
		synctest.Wait()
		require.EqualValues(t, 2, o.quorum.Load())
		require.Len(t, healed, 1, "a store of another cluster is not lowered")
		require.Equal(t, consistency.MustOf("c", 40), store.Load())

		time.Sleep(time.Second)
		o.set(func(o *scriptedOracle) { o.hungQuorum = true })
		h.Check()
		synctest.Wait() // the check is waiting for DescribeQuorum
		start := time.Now()
		h.Close()
		require.Zero(t, time.Since(start), "Close ends the check under way")
		h.Check() // closed: nothing runs
		synctest.Wait()
		require.EqualValues(t, 3, o.quorum.Load())
	})
}
