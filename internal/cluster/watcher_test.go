package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
)

// fakeProbe answers with whatever cluster is set, counting calls.
type fakeProbe struct {
	mu      sync.Mutex
	cluster string
	fails   int // calls to fail before answering
	calls   int
}

func (p *fakeProbe) probe(context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.fails > 0 {
		p.fails--
		return "", errors.New("seed not ready")
	}
	return p.cluster, nil
}

func (p *fakeProbe) set(c string) {
	p.mu.Lock()
	p.cluster = c
	p.mu.Unlock()
}

func TestWatcherDetectsChangeAndResetsStore(t *testing.T) {
	store := consistency.NewMemoryStore()
	_, _ = store.Advance(consistency.MustOf("a", 7))
	p := &fakeProbe{cluster: "a"}
	var events []Event
	var mu sync.Mutex
	w := &Watcher{Tokens: tokens.New(store, nil), Probe: p.probe, OnEvent: func(ev Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}}
	defer w.Close()
	ctx := context.Background()

	w.Check(true)
	require.Equal(t, uint64(0), w.Settle(ctx), "same cluster: no change")
	require.Equal(t, consistency.MustOf("a", 7), store.Load(), "tokens kept")

	p.set("b")
	p.fails = 2 // the first probes after a rebootstrap may fail
	w.Check(false)
	require.Equal(t, uint64(1), w.Settle(ctx))
	require.True(t, store.Load().IsUnknown(), "another cluster's offsets mean nothing here")
	require.Equal(t, "b", w.Cluster())
	mu.Lock()
	require.Equal(t, []Event{
		{Rebootstrapped: true, From: "", To: "a"}, // the first cluster it learns
		{Rebootstrapped: false, From: "a", To: "b", Changed: true, StoreReset: true},
	}, events)
	mu.Unlock()
}

func TestWatcherPinnedKeepsStore(t *testing.T) {
	store := consistency.NewMemoryStore()
	_, _ = store.Advance(consistency.MustOf("a", 7))
	p := &fakeProbe{cluster: "b"}
	w := &Watcher{Tokens: tokens.New(store, nil), Probe: p.probe, Pin: "a"}
	defer w.Close()
	w.Check(true)
	require.Equal(t, uint64(1), w.Settle(context.Background()), "pinned to a, the seeds name b: a change")
	require.Equal(t, consistency.MustOf("a", 7), store.Load(), "a pinned factory keeps its tokens")
}

func TestWatcherLearnAndWatch(t *testing.T) {
	p := &fakeProbe{cluster: "a"}
	w := &Watcher{Probe: p.probe}
	defer w.Close()
	w.Watch()
	require.Eventually(t, func() bool { return w.Cluster() == "a" }, 5*time.Second, 5*time.Millisecond)
	w.Learn("other")
	require.Equal(t, "a", w.Cluster(), "Learn never overrides a known cluster")
}

// TestWatcherCloseStopsProbing: a watcher whose seeds never answer stops
// when closed instead of probing until its timeout.
func TestWatcherCloseStopsProbing(t *testing.T) {
	p := &fakeProbe{fails: 1 << 30}
	w := &Watcher{Probe: p.probe, Timeout: time.Minute}
	w.Check(false)
	time.AfterFunc(50*time.Millisecond, w.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.Settle(ctx)
	require.NoError(t, ctx.Err(), "Close ended the check")
}

// TestWatcherCoalescesChecks: a storm of checks costs one probe at a time,
// and Settle waits only for checks requested before it, so it returns
// while the storm goes on: within two probes' time (the one running, and
// the one that answers its request), on synctest's clock.
func TestWatcherCoalescesChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const probeTime = 100 * time.Millisecond
		var probes atomic.Int32
		w := &Watcher{Probe: func(context.Context) (string, error) {
			probes.Add(1)
			time.Sleep(probeTime)
			return "a", nil
		}}
		defer w.Close()
		stop := make(chan struct{})
		storm := make(chan struct{})
		var checks atomic.Int32
		go func() {
			defer close(storm)
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
					checks.Add(1)
					w.Check(false)
				}
			}
		}()
		time.Sleep(50 * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		w.Check(false)
		w.Settle(ctx)
		require.NoError(t, ctx.Err(), "Settle returned during the storm")
		require.LessOrEqual(t, time.Since(start), 2*probeTime)
		close(stop)
		<-storm
		w.Settle(ctx)
		// One probe at a time, each answering every check made before it
		// started: a probe per 100 ms of storm and one more, where one per
		// check would be one per 10 ms.
		stormed := time.Since(start) + 50*time.Millisecond
		t.Logf("%d checks, %d probes in %v", checks.Load(), probes.Load(), stormed)
		require.LessOrEqual(t, probes.Load(), int32(stormed/probeTime)+2, "checks were coalesced")
		require.Greater(t, checks.Load(), 3*probes.Load())
	})
}

// TestWatcherClusterOf: the watcher tells which cluster it knew in each
// generation, the current one and the last maxEnded that a change ended.
func TestWatcherClusterOf(t *testing.T) {
	p := &fakeProbe{}
	w := &Watcher{Probe: p.probe}
	defer w.Close()
	ctx := context.Background()
	require.Equal(t, "", w.ClusterOf(0), "nothing learnt yet")
	w.Learn("c0")
	require.Equal(t, "c0", w.ClusterOf(0))
	for i := 1; i <= maxEnded+2; i++ {
		p.set(fmt.Sprintf("c%d", i))
		w.Check(false)
		require.Equal(t, uint64(i), w.Settle(ctx))
	}
	gen := uint64(maxEnded + 2)
	require.Equal(t, fmt.Sprintf("c%d", gen), w.ClusterOf(gen), "the current generation")
	for g := gen - maxEnded; g < gen; g++ {
		require.Equal(t, fmt.Sprintf("c%d", g), w.ClusterOf(g), "generation %d", g)
	}
	require.Equal(t, "", w.ClusterOf(gen-maxEnded-1), "forgotten")
	require.Equal(t, "", w.ClusterOf(gen+1), "not yet")
	w.mu.Lock()
	require.Len(t, w.ended, maxEnded)
	w.mu.Unlock()
}

// TestWatcherForeignStoreIsNoChange: a store holding a token of another
// cluster than the one the bootstrap servers name at the watcher's first
// check (a token given to a fresh factory), or at a later check of the
// cluster it knows, is no cluster change: the store is left to the
// Healer (OnForeignStore), and no event says Changed. Pinned, nothing is
// foreign to replace.
func TestWatcherForeignStoreIsNoChange(t *testing.T) {
	for _, pin := range []string{"", "a"} {
		store := consistency.NewMemoryStore()
		_, _ = store.Advance(consistency.MustOf("x", 9_000))
		p := &fakeProbe{cluster: "a"}
		var events []Event
		foreign := 0
		w := &Watcher{Tokens: tokens.New(store, nil), Probe: p.probe, Pin: pin,
			OnEvent:        func(ev Event) { events = append(events, ev) },
			OnForeignStore: func() { foreign++ }}
		ctx := context.Background()
		w.Check(true)
		require.Zero(t, w.Settle(ctx), "pin %q: no change", pin)
		w.Check(false)
		require.Zero(t, w.Settle(ctx), "pin %q: no change", pin)
		w.Close()
		require.Equal(t, consistency.MustOf("x", 9_000), store.Load(), "the watcher replaces nothing itself")
		for _, ev := range events {
			require.False(t, ev.Changed, "pin %q: %+v", pin, ev)
			require.False(t, ev.StoreReset, "pin %q: %+v", pin, ev)
		}
		if pin == "" {
			require.Equal(t, 2, foreign, "once per check that found it")
		} else {
			require.Zero(t, foreign, "a pinned factory's store is never replaced")
		}
	}
}

// TestWatcherLearnFindsForeignStore: the first cluster learnt is checked
// against the store too: a token of another cluster given to a fresh
// factory goes to the Healer (OnForeignStore) even when no later check
// runs (KIP-1243 brokers refuse every connection naming that cluster, so
// no answer would replace it). Pinned, nothing is foreign.
func TestWatcherLearnFindsForeignStore(t *testing.T) {
	for _, tc := range []struct {
		pin, store string
		want       int
	}{
		{"", "x", 1},
		{"", "a", 0},
		{"a", "x", 0},
	} {
		store := consistency.NewMemoryStore()
		_, _ = store.Advance(consistency.MustOf(tc.store, 9))
		foreign := 0
		w := &Watcher{Tokens: tokens.New(store, nil), Probe: (&fakeProbe{cluster: "a"}).probe, Pin: tc.pin,
			OnForeignStore: func() { foreign++ }}
		w.Learn("a")
		w.Close()
		require.Equal(t, tc.want, foreign, "pin %q, store %q", tc.pin, tc.store)
	}
}
