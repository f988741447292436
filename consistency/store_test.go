package consistency

import (
	"math/rand/v2"
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
	require.NoError(t, err, "an older context is not an error")
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

// TestMemoryStoreConcurrent races 16 goroutines advancing with random offsets
// and checks that no update is lost: the store ends at the maximum offered.
func TestMemoryStoreConcurrent(t *testing.T) {
	const goroutines, perG = 16, 10000
	s := NewMemoryStore()
	maxes := make([]int64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 99))
			last := int64(-1)
			for range perG {
				off := r.Int64N(1 << 30)
				maxes[g] = max(maxes[g], off)
				got, err := s.Advance(MustOf("c", off))
				if err != nil {
					t.Error(err)
					return
				}
				if got.Offset() < off || got.Offset() < last {
					t.Errorf("advance to %d returned %v after %d", off, got, last)
					return
				}
				last = got.Offset()
				if l := s.Load().Offset(); l < last {
					t.Errorf("load %d went below %d", l, last)
					return
				}
			}
		})
	}
	wg.Wait()
	var want int64
	for _, m := range maxes {
		want = max(want, m)
	}
	require.Equal(t, MustOf("c", want), s.Load())
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
