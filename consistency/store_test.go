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
