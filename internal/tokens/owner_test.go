package tokens

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consistency"
)

// changes records what an owner reports.
type changes struct {
	mu   sync.Mutex
	list []Change
}

func (c *changes) emit(ch Change) {
	c.mu.Lock()
	c.list = append(c.list, ch)
	c.mu.Unlock()
}

func (c *changes) kinds() []Kind {
	c.mu.Lock()
	defer c.mu.Unlock()
	var k []Kind
	for _, ch := range c.list {
		k = append(k, ch.Kind)
	}
	return k
}

// yieldingStore yields before every change, so that racing writers
// interleave between a Load and a CompareAndSwap.
type yieldingStore struct{ consistency.Store }

func (s yieldingStore) CompareAndSwap(old, next consistency.Token) bool {
	runtime.Gosched()
	return s.Store.CompareAndSwap(old, next)
}

func (s yieldingStore) Advance(c consistency.Token) (consistency.Token, error) {
	runtime.Gosched()
	return s.Store.Advance(c)
}

// TestMovedConcurrent has a move race connections that already store
// tokens of the new cluster: the reset may only ever wipe the old
// cluster's token, never a newer one of cluster b.
func TestMovedConcurrent(t *testing.T) {
	const conns, trials = 3, 2000
	for trial := range trials {
		s := yieldingStore{consistency.NewMemoryStore()}
		o := New(s, nil)
		_, err := o.Answered("x", consistency.MustOf("a", 10), nil)
		require.NoError(t, err)
		var start, done sync.WaitGroup
		start.Add(1)
		done.Go(func() {
			start.Wait()
			o.Moved("", "a", "b", true)
		})
		for i := range conns {
			done.Go(func() {
				start.Wait()
				o.Moved("x", "a", "b", true)
				if _, err := o.Answered("x", consistency.MustOf("b", int64(100*(i+1))), nil); err != nil {
					t.Error(err)
				}
			})
		}
		start.Done()
		done.Wait()
		if got := s.Load(); got != consistency.MustOf("b", 100*conns) {
			t.Fatalf("trial %d: store went backwards to %v, want b@%d", trial, got, 100*conns)
		}
		if n := o.Stats().Resets; n != 1 {
			t.Fatalf("trial %d: %d resets, want 1", trial, n)
		}
	}
}

// TestMovedReportsOnce: a move seen by a connection and then by the
// watcher is reported once; a pinned owner reports the move and keeps
// its store.
func TestMovedReportsOnce(t *testing.T) {
	rec := &changes{}
	o := New(consistency.NewMemoryStore(), rec.emit)
	_, err := o.Answered("x", consistency.MustOf("a", 10), nil)
	require.NoError(t, err)
	require.True(t, o.Moved("x", "a", "b", true))
	require.False(t, o.Moved("", "a", "b", true), "the watcher finds the store moved already")
	require.Equal(t, []Kind{Advanced, Moved}, rec.kinds())
	require.True(t, rec.list[1].StoreReset)

	pinned := New(consistency.NewMemoryStore(), rec.emit)
	_, err = pinned.Answered("x", consistency.MustOf("a", 10), nil)
	require.NoError(t, err)
	require.False(t, pinned.Moved("", "a", "b", false))
	require.Equal(t, consistency.MustOf("a", 10), pinned.Load(), "a pinned store is kept")
	require.Equal(t, []Kind{Advanced, Moved, Advanced, Moved}, rec.kinds())
}

// TestHealOnlyWhatItJudged: a heal replaces only the token it judged, and
// never one that is not beyond the committed offset.
func TestHealOnlyWhatItJudged(t *testing.T) {
	rec := &changes{}
	s := consistency.NewMemoryStore()
	o := New(s, rec.emit)
	judged := consistency.MustOf("c", 100)
	_, err := o.Hand(judged)
	require.NoError(t, err)
	// A write advanced the store while the question was in flight.
	_, err = o.Answered("b1", consistency.MustOf("c", 105), nil)
	require.NoError(t, err)
	require.False(t, o.Heal(judged, consistency.MustOf("c", 90)), "the store moved on from what was judged")
	require.Equal(t, consistency.MustOf("c", 105), s.Load())
	require.False(t, o.Heal(consistency.MustOf("c", 105), consistency.MustOf("c", 105)), "covered")
	require.True(t, o.Heal(consistency.MustOf("c", 105), consistency.MustOf("c", 90)), "beyond what the cluster reports")
	require.Equal(t, consistency.MustOf("c", 90), s.Load())
	require.Equal(t, []Kind{Advanced, Advanced, Healed}, rec.kinds())
	require.EqualValues(t, 1, o.Stats().Heals)
}

// TestJudge: a token of another cluster is foreign to an owner that stored
// none, a move for one that learnt it from its brokers, and a store shared
// across clusters (reported once) for one that stored the bootstrap
// servers' cluster's tokens.
func TestJudge(t *testing.T) {
	rec := &changes{}
	s := consistency.NewMemoryStore()
	_, err := s.Advance(consistency.MustOf("x", 9_000))
	require.NoError(t, err)
	fresh := New(s, rec.emit)
	require.Equal(t, Foreign, fresh.Judge(s.Load(), "a"))
	require.True(t, fresh.ReplaceForeign("seed", s.Load(), consistency.MustOf("a", 5)))
	require.Equal(t, consistency.MustOf("a", 5), s.Load())

	// Another factory on cluster b shares the store and writes into it.
	other := New(s, nil)
	require.Equal(t, Foreign, other.Judge(s.Load(), "b"))
	require.True(t, other.ReplaceForeign("seed-b", s.Load(), consistency.MustOf("b", 7)))
	// The first owner stored a's tokens: b's is another writer's.
	require.Equal(t, Shared, fresh.Judge(s.Load(), "a"))
	require.Equal(t, Shared, fresh.Judge(s.Load(), "a"))
	require.False(t, fresh.ReplaceForeign("seed", s.Load(), consistency.MustOf("a", 6)), "no healing back and forth")
	require.False(t, fresh.Heal(s.Load(), consistency.MustOf("a", 6)))
	require.Equal(t, consistency.MustOf("b", 7), s.Load())
	require.Equal(t, []Kind{Healed, Conflict}, rec.kinds(), "one conflict reported")
	require.EqualValues(t, 1, fresh.Stats().Conflicts)

	// What an owner learnt from its own brokers is a move, not foreign.
	mover := New(consistency.NewMemoryStore(), nil)
	_, err = mover.Answered("x", consistency.MustOf("a", 3), nil)
	require.NoError(t, err)
	require.Equal(t, Move, mover.Judge(mover.Load(), "b"))
}

// TestCovered: offsets a cluster's brokers answered with, or its quorum
// reported, are known committed.
func TestCovered(t *testing.T) {
	o := New(consistency.NewMemoryStore(), nil)
	require.False(t, o.Covered(consistency.MustOf("c", 1)))
	_, err := o.Answered("x", consistency.MustOf("c", 50), nil)
	require.NoError(t, err)
	require.True(t, o.Covered(consistency.MustOf("c", 50)))
	require.False(t, o.Covered(consistency.MustOf("c", 51)))
	require.False(t, o.Covered(consistency.MustOf("d", 1)))
	o.Reported(consistency.MustOf("c", 60))
	require.True(t, o.Covered(consistency.MustOf("c", 60)))
	require.Equal(t, "c", o.Learnt())
}

// TestAnsweredNoAllocs: the answer path allocates nothing when the store
// does not move, nor when it moves within the cluster it knows, apart
// from the new token the store keeps.
func TestAnsweredNoAllocs(t *testing.T) {
	o := New(consistency.NewMemoryStore(), nil)
	tok := consistency.MustOf("c", 50)
	_, err := o.Answered("x", tok, nil)
	require.NoError(t, err)
	if n := testing.AllocsPerRun(100, func() { _, _ = o.Answered("x", tok, nil) }); n != 0 {
		t.Fatalf("an answer that moves nothing: %v allocations", n)
	}
}
