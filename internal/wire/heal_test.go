package wire

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

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
		owner, healed := healLog(store)
		h := NewHealer(HealerConfig{Tokens: owner, Oracle: o})
		defer h.Close()

		h.Check()
		h.Check() // one runs, or ran less than Every ago
		synctest.Wait()
		require.EqualValues(t, 1, o.quorum.Load())
		require.Equal(t, [][2]consistency.Token{{consistency.MustOf("c", 100), consistency.MustOf("c", 40)}}, healed.get())
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
		require.Len(t, healed.get(), 1, "a store of another cluster is not lowered")
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

// inFlightOracle answers DescribeQuorum with committed, after during has
// run: what happens while the question is in flight.
type inFlightOracle struct {
	scriptedOracle
	during func()
}

func (o *inFlightOracle) Committed(ctx context.Context) (consistency.Token, error) {
	o.during()
	return o.scriptedOracle.Committed(ctx)
}

// TestHealerKeepsWriteMadeWhileAsking: a write that commits and advances
// the store while the check's DescribeQuorum is in flight is not taken for
// a token beyond the cluster: the check judges the token it loaded before
// asking, which the answer covers. (The Healer used to load the store
// after the answer and lowered c@105 to c@100.)
func TestHealerKeepsWriteMadeWhileAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := knownStore(t, "c", 100)
		owner, healed := healLog(store)
		o := &inFlightOracle{scriptedOracle: scriptedOracle{committed: consistency.MustOf("c", 100)}}
		o.during = func() {
			if _, err := owner.Answered("b1", consistency.MustOf("c", 105), nil); err != nil {
				t.Error(err)
			}
		}
		h := NewHealer(HealerConfig{Tokens: owner, Oracle: o})
		defer h.Close()
		h.Check()
		synctest.Wait()
		require.EqualValues(t, 1, o.quorum.Load())
		require.Equal(t, consistency.MustOf("c", 105), store.Load(), "the write's token is kept")
		require.Empty(t, healed.get())
	})
}

// TestHealerStopsAskingWhenDenied: DescribeQuorum refused for an ACL the
// principal lacks is not asked again (each refusal is an audit line in
// the broker's log, and no retry changes an ACL).
func TestHealerStopsAskingWhenDenied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{err: fmt.Errorf("DescribeQuorum: %w", kerr.ClusterAuthorizationFailed)}
		owner, _ := healLog(knownStore(t, "c", 100))
		h := NewHealer(HealerConfig{Tokens: owner, Oracle: o})
		defer h.Close()
		for range 5 {
			h.Check()
			synctest.Wait()
			time.Sleep(2 * time.Second)
		}
		require.EqualValues(t, 1, o.quorum.Load(), "asked once")

		o.set(func(o *scriptedOracle) { o.err = errors.New("broker gone") })
		h2 := NewHealer(HealerConfig{Tokens: owner, Oracle: o})
		defer h2.Close()
		for range 3 {
			h2.Check()
			synctest.Wait()
			time.Sleep(2 * time.Second)
		}
		require.EqualValues(t, 4, o.quorum.Load(), "other failures are asked again")
	})
}
