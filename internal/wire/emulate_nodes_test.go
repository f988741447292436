package wire

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// apiVersionsAnswer is what afterRead is told of a connection's
// ApiVersions v3 answer with FinalizedFeaturesEpoch epoch.
func apiVersionsAnswer(epoch int64) *answer {
	r := kmsg.NewPtrApiVersionsResponse()
	r.SetVersion(3)
	r.FinalizedFeaturesEpoch = epoch
	return &answer{key: apiVersionsKey, version: 3, apiVersions: r.AppendTo(nil)}
}

// TestEmulatorKnowsBrokersByNode: what the emulator knows of a broker is
// the node's of its cluster, named by kgo's ApiVersions v5, never the
// address's alone; and a connection's ApiVersions answer is the broker
// there now. A new broker at a reused address that answers a lower
// FinalizedFeaturesEpoch, whether under another node id or the same one
// (restarted behind), has its request held, not sent as if caught up (a
// silent stale read).
func TestEmulatorKnowsBrokersByNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"b1": 10}}
		e, store, _ := newTestEmulator(t, o, maxWait(100*time.Millisecond))
		cur := advance(t, store, "c", 100)

		old := e.bind("b1", []byte("c"), 1)
		e.afterRead(old, apiVersionsAnswer(100))
		waited, err := e.beforeWrite(old, metadataKey, cur, time.Time{}, noStop)
		require.False(t, waited, "node 1 applied the token")
		require.NoError(t, err)

		// Node 2 now at b1's address: a view of its own.
		moved := e.bind("b1", []byte("c"), 2)
		require.NotSame(t, old, moved)
		require.NotSame(t, old, e.bind("b1", []byte("d"), 1), "node 1 of another cluster")
		require.Same(t, old, e.bind("b9", []byte("c"), 1), "node 1 of c, wherever it is")
		e.afterRead(moved, apiVersionsAnswer(10))
		waited, err = e.beforeWrite(moved, metadataKey, cur, time.Time{}, noStop)
		require.True(t, waited, "the new broker at a reused address was not waited for")
		require.Error(t, err)

		// Node 1 restarted behind: its new connection's answer replaces
		// what was known.
		e.afterRead(old, apiVersionsAnswer(10))
		waited, _ = e.beforeWrite(old, metadataKey, cur, time.Time{}, noStop)
		require.True(t, waited, "a broker that came back behind was not waited for")

		// Known by address only (a seed, no KIP-1242 check): the same.
		seed := e.view("seed")
		e.afterRead(seed, apiVersionsAnswer(100))
		e.afterRead(seed, apiVersionsAnswer(10))
		waited, _ = e.beforeWrite(seed, metadataKey, cur, time.Time{}, noStop)
		require.True(t, waited, "a new broker at a seed's address was not waited for")

		// A probe answered before a reset does not raise the view after it.
		g := old.generation()
		old.reset(5)
		old.raise(g, 500)
		require.EqualValues(t, 5, old.applied.Load())
	})
}

// TestEmulatorLearnsNothingFromAnotherCluster: a store at c@10 is not
// moved by what brokers of another cluster show: not by a Metadata answer
// naming cluster d (the store's id put on d's offset would make c@500), not
// by a probe answered by cluster d, not by a view of a node of d. An answer
// and a probe of c move it.
func TestEmulatorLearnsNothingFromAnotherCluster(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{applied: map[string]int64{"b1": 500}}
		e, store, _ := newTestEmulator(t, o, nil)
		advance(t, store, "c", 10)
		meta := func(cluster string) *answer {
			m := kmsg.NewPtrMetadataResponse()
			m.ClusterID = kmsg.StringPtr(cluster)
			return &answer{key: metadataKey, version: 12, flexible: true, resp: m}
		}

		e.afterRead(e.view("b1"), meta("d"))
		require.Equal(t, consistency.MustOf("c", 10), store.Load(), "cluster d's answer moved the store")

		o.set(func(o *scriptedOracle) { o.cluster = "d" })
		e.afterRead(e.view("b1"), meta("c"))
		require.Equal(t, consistency.MustOf("c", 10), store.Load(), "a probe answered by cluster d moved the store")

		o.set(func(o *scriptedOracle) { o.cluster = "" })
		e.afterRead(e.bind("b1", []byte("d"), 1), meta("c"))
		require.Equal(t, consistency.MustOf("c", 10), store.Load(), "a node of cluster d moved the store")

		e.afterRead(e.view("b1"), meta("c"))
		require.Equal(t, consistency.MustOf("c", 500), store.Load())
	})
}

// TestEmulatorViewsBounded: address churn does not grow the emulator's
// table without bound; a view dropped from it stays usable by whoever
// holds it.
func TestEmulatorViewsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, _, _ := newTestEmulator(t, &scriptedOracle{}, nil)
		first := e.view("addr-0")
		first.saw(7)
		for i := range 3 * maxViews {
			e.view(fmt.Sprintf("addr-%d", i))
			e.bind(fmt.Sprintf("addr-%d", i), []byte("c"), int32(i))
		}
		e.mu.Lock()
		n := len(e.brokers)
		e.mu.Unlock()
		require.LessOrEqual(t, n, maxViews)
		require.EqualValues(t, 7, first.applied.Load())
	})
}
