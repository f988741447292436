package consistency

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestMemoryStore(t *testing.T) {
	s := NewMemoryStore()
	require.True(t, s.Load().IsUnknown())

	got, err := s.Advance(MustOf("a", 5))
	require.NoError(t, err)
	require.Equal(t, MustOf("a", 5), got)

	got, err = s.Advance(MustOf("a", 3))
	require.NoError(t, err, "an older token is not an error")
	require.Equal(t, MustOf("a", 5), got, "the store never goes backwards")

	got, err = s.Advance(Unknown())
	require.NoError(t, err)
	require.Equal(t, MustOf("a", 5), got)

	_, err = s.Advance(MustOf("b", 100))
	require.ErrorIs(t, err, ErrClusterMismatch)
	require.Equal(t, MustOf("a", 5), s.Load(), "a mismatch leaves the store unchanged")

	s.Reset()
	require.True(t, s.Load().IsUnknown())
	got, err = s.Advance(MustOf("b", 1))
	require.NoError(t, err, "after Reset any cluster is adopted")
	require.Equal(t, MustOf("b", 1), got)

	var zero MemoryStore
	require.True(t, zero.Load().IsUnknown(), "the zero MemoryStore is usable")
}

// TestMemoryStoreConcurrent races 16 goroutines advancing with interleaved,
// rising offsets (goroutine g writes g, g+16, g+32...) and checks that no
// update is lost: nobody ever reads below what it wrote, and the store ends
// at the global maximum.
func TestMemoryStoreConcurrent(t *testing.T) {
	const goroutines, perG = 16, 10000
	s := NewMemoryStore()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 99))
			for i := range perG {
				off := int64(i*goroutines + g)
				if r.IntN(8) == 0 { // now and then an old one, which must not win
					off = r.Int64N(off + 1)
				}
				got, err := s.Advance(MustOf("c", off))
				if err != nil {
					t.Error(err)
					return
				}
				if got.Offset() < off {
					t.Errorf("advance to %d returned %v", off, got)
					return
				}
				if l := s.Load().Offset(); l < off {
					t.Errorf("load %d went below %d, which this goroutine wrote", l, off)
					return
				}
			}
		})
	}
	wg.Wait()
	require.Equal(t, MustOf("c", (perG-1)*goroutines+goroutines-1), s.Load())
}

func TestMemoryStoreNoAllocUnchanged(t *testing.T) {
	s := NewMemoryStore()
	_, _ = s.Advance(MustOf("c", 10))
	old := MustOf("c", 9)
	allocs := testing.AllocsPerRun(1000, func() {
		_, _ = s.Advance(old)
		_ = s.Load()
	})
	require.Zero(t, allocs)
}

func BenchmarkStoreAdvance(b *testing.B) {
	b.Run("unchanged", func(b *testing.B) {
		s := NewMemoryStore()
		_, _ = s.Advance(MustOf("MkU3OEVBNTcwNTJENDM2Qk", 1000))
		c := MustOf("MkU3OEVBNTcwNTJENDM2Qk", 999)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = s.Advance(c)
			}
		})
	})
	b.Run("changing", func(b *testing.B) {
		s := NewMemoryStore()
		var mu sync.Mutex
		next := int64(0)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			mu.Lock()
			base := next
			next += 1 << 40
			mu.Unlock()
			for i := base; pb.Next(); i++ {
				_, _ = s.Advance(MustOf("MkU3OEVBNTcwNTJENDM2Qk", i))
			}
		})
	})
	b.Run("load", func(b *testing.B) {
		s := NewMemoryStore()
		_, _ = s.Advance(MustOf("MkU3OEVBNTcwNTJENDM2Qk", 1000))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_ = s.Load()
			}
		})
	})
}

func TestMemoryStoreCompareAndSwap(t *testing.T) {
	s := NewMemoryStore()
	require.False(t, s.CompareAndSwap(MustOf("a", 1), MustOf("a", 2)), "the store does not hold a@1")
	require.True(t, s.CompareAndSwap(Unknown(), MustOf("a", 9)))
	require.Equal(t, MustOf("a", 9), s.Load())
	require.True(t, s.CompareAndSwap(MustOf("a", 9), MustOf("a", 4)), "CompareAndSwap may lower the offset")
	require.Equal(t, MustOf("a", 4), s.Load())
	require.False(t, s.CompareAndSwap(MustOf("a", 9), Unknown()))
	require.True(t, s.CompareAndSwap(MustOf("a", 4), Unknown()))
	require.True(t, s.Load().IsUnknown())
	s.Reset()
	require.True(t, s.CompareAndSwap(Unknown(), Unknown()), "a reset store holds Unknown")

	require.False(t, ResetCluster(s, "a"), "nothing to reset in an Unknown store")
	_, err := s.Advance(MustOf("b", 7))
	require.NoError(t, err)
	require.False(t, ResetCluster(s, "a"), "another cluster's token stays")
	require.Equal(t, MustOf("b", 7), s.Load())
	require.True(t, ResetCluster(s, "b"))
	require.True(t, s.Load().IsUnknown())
}

// TestResetClusterConcurrent has several clients leave cluster a for
// cluster b at once, as connections that all meet the new cluster do: each
// forgets a, then stores the offset it saw on b. However they interleave,
// the store must end at the highest offset seen on b; a reset made on a
// stale check would wipe a newer token and let a lower one win.
func TestResetClusterConcurrent(t *testing.T) {
	const clients, trials = 4, 3000
	for trial := range trials {
		s := yieldingStore{NewMemoryStore()}
		_, err := s.Advance(MustOf("a", 10))
		require.NoError(t, err)
		var start, done sync.WaitGroup
		start.Add(1)
		for i := range clients {
			done.Go(func() {
				start.Wait()
				ResetCluster(s, "a")
				if _, err := s.Advance(MustOf("b", int64(100*(i+1)))); err != nil {
					t.Error(err)
				}
			})
		}
		start.Done()
		done.Wait()
		if got := s.Load(); got != MustOf("b", 100*clients) {
			t.Fatalf("trial %d: store went backwards to %v, want b@%d", trial, got, 100*clients)
		}
	}
}

// yieldingStore lets other goroutines run between a Load and what its
// caller does with it, where a check-then-act race would strike.
type yieldingStore struct{ *MemoryStore }

func (s yieldingStore) Load() Token {
	c := s.MemoryStore.Load()
	runtime.Gosched()
	return c
}
