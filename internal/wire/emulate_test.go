package wire

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/consistency"
)

// scriptedOracle answers from fields a test sets; each broker catches up
// by step per question, as a lagging broker applies the log.
type scriptedOracle struct {
	mu        sync.Mutex
	applied   map[string]int64
	step      int64
	committed consistency.Token
	err       error
	asked     atomic.Int64
}

func (o *scriptedOracle) Committed(context.Context) (consistency.Token, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.committed, o.err
}

func (o *scriptedOracle) Applied(_ context.Context, addr string) (int64, error) {
	o.asked.Add(1)
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.applied[addr]
	if a >= 0 {
		o.applied[addr] = a + o.step
	}
	return a, nil
}

func newTestEmulator(t *testing.T, o Oracle, wait time.Duration) (*Emulator, *consistency.MemoryStore, *[]error) {
	t.Helper()
	store := consistency.NewMemoryStore()
	var offs []error
	e, err := NewEmulator(EmulationConfig{Store: store, Oracle: o, MaxWait: wait, OnOff: func(err error) { offs = append(offs, err) }})
	require.NoError(t, err)
	return e, store, &offs
}

func noStop() error { return nil }

func TestEmulatorWaitsForLaggingBroker(t *testing.T) {
	o := &scriptedOracle{applied: map[string]int64{"b1": 10}, step: 5}
	e, _, _ := newTestEmulator(t, o, 5*time.Second)
	v := e.view("b1")
	v.saw(10)
	cur := consistency.MustOf("c", 30)
	require.False(t, e.needsWait(v, apiVersionsKey, cur), "the handshake never waits")
	require.True(t, e.needsWait(v, metadataKey, cur))
	require.NoError(t, e.waitFor(v, "b1", metadataKey, 30, time.Time{}, noStop))
	require.GreaterOrEqual(t, v.applied.Load(), int64(30))
	require.False(t, e.needsWait(v, metadataKey, cur), "a broker known to be caught up costs nothing")
	require.EqualValues(t, 1, e.Stats().Waits)
}

func TestEmulatorBrokerNeverCatchesUp(t *testing.T) {
	o := &scriptedOracle{applied: map[string]int64{"b1": 10}}
	e, _, _ := newTestEmulator(t, o, 150*time.Millisecond)
	v := e.view("b1")
	start := time.Now()
	err := e.waitFor(v, "b1", metadataKey, 30, time.Time{}, noStop)
	require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
	var ime *InconsistentMetadataError
	require.ErrorAs(t, err, &ime)
	require.EqualValues(t, 30, ime.Sent)
	require.EqualValues(t, 10, ime.BrokerAt)
	require.Less(t, time.Since(start), 2*time.Second)

	require.NoError(t, e.waitFor(v, "b1", produceKey, 30, time.Time{}, noStop), "produce goes out after the bound: the broker answers it with a retriable error")

	deadline := time.Now().Add(20 * time.Millisecond)
	start = time.Now()
	require.Error(t, e.waitFor(v, "b1", metadataKey, 30, deadline, noStop))
	require.Less(t, time.Since(start), 140*time.Millisecond, "kgo's write deadline ends the wait first")

	closed := errors.New("closed")
	require.ErrorIs(t, e.waitFor(v, "b1", metadataKey, 30, time.Time{}, func() error { return closed }), closed)
}

func TestEmulatorTurnsOffWithoutFinalizedEpoch(t *testing.T) {
	o := &scriptedOracle{applied: map[string]int64{"b1": -1}}
	e, _, offs := newTestEmulator(t, o, time.Second)
	v := e.view("b1")
	require.NoError(t, e.waitFor(v, "b1", metadataKey, 30, time.Time{}, noStop), "off: requests go out as plain franz-go's")
	require.True(t, e.Off())
	require.Len(t, *offs, 1)
	require.ErrorIs(t, (*offs)[0], ErrEmulationUnsupported)
	require.False(t, e.needsWait(v, metadataKey, consistency.MustOf("c", 99)))
}

func TestEmulatorLearnsCommittedOffset(t *testing.T) {
	o := &scriptedOracle{committed: consistency.MustOf("c", 41)}
	e, store, offs := newTestEmulator(t, o, time.Second)
	e.learnCommitted()
	require.Equal(t, consistency.MustOf("c", 41), store.Load())

	o.err = kerr.ClusterAuthorizationFailed
	e.learnCommitted()
	require.True(t, e.Off(), "DescribeQuorum refused by ACLs turns the emulation off")
	require.Len(t, *offs, 1)
	require.ErrorIs(t, (*offs)[0], kerr.ClusterAuthorizationFailed)
	e.learnCommitted()
	require.Len(t, *offs, 1, "one event, not one per write")
}

// TestEmulatorMonotonicReads: after a broker answered a read, the store
// holds what that broker had applied after answering, so a read sent to a
// broker behind it waits.
func TestEmulatorMonotonicReads(t *testing.T) {
	o := &scriptedOracle{applied: map[string]int64{"ahead": 50, "behind": 20}, step: 0}
	e, store, _ := newTestEmulator(t, o, 100*time.Millisecond)
	ahead, behind := e.view("ahead"), e.view("behind")
	e.learnApplied(ahead, "ahead", "c")
	require.Equal(t, consistency.MustOf("c", 50), store.Load())
	require.True(t, e.needsWait(behind, metadataKey, store.Load()))
	require.ErrorIs(t, e.waitFor(behind, "behind", metadataKey, 50, time.Time{}, noStop), consistency.ErrInconsistentMetadata)
	o.mu.Lock()
	o.applied["behind"] = 50
	o.mu.Unlock()
	require.NoError(t, e.waitFor(behind, "behind", metadataKey, 50, time.Time{}, noStop))
}

// TestEmulatorHoldsOnlyWhereBrokersSendNoTokens: a broker whose headers
// carry tokens holds requests itself; one not heard from yet is taken to be
// like those heard from.
func TestEmulatorHoldsOnlyWhereBrokersSendNoTokens(t *testing.T) {
	e, _, _ := newTestEmulator(t, &scriptedOracle{}, time.Second)
	a, b, c := e.view("a"), e.view("b"), e.view("c")
	require.True(t, e.active(a), "nothing heard yet: Kafka 4.4 is what users run")
	e.sawHeader(a, false)
	require.True(t, e.active(a))
	e.sawHeader(b, true)
	require.False(t, e.active(b), "a KIP-1243 broker waits by itself")
	require.False(t, e.active(c), "an unheard broker of a KIP-1243 cluster")
	require.True(t, e.active(a), "a broker seen without tokens stays emulated")
}
