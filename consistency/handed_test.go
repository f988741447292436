package consistency

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHandedStoreConfinesHandedToken(t *testing.T) {
	shared := NewMemoryStore()
	_, err := shared.Advance(MustOf("c", 10))
	require.NoError(t, err)
	s := NewHandedStore(shared, MustOf("c", 40))
	require.Equal(t, MustOf("c", 40), s.Load(), "the session waits for what its sender saw")
	require.Equal(t, MustOf("c", 10), shared.Load(), "the handed token does not raise the shared store")

	got, err := s.Advance(MustOf("c", 20))
	require.NoError(t, err)
	require.Equal(t, MustOf("c", 40), got)
	require.Equal(t, MustOf("c", 20), shared.Load(), "what brokers answer goes to the shared store")

	_, err = s.Advance(MustOf("c", 55))
	require.NoError(t, err)
	require.Equal(t, MustOf("c", 55), s.Load(), "the shared store overtook the handed token")

	foreign := NewHandedStore(shared, MustOf("other", 99))
	require.Equal(t, MustOf("c", 55), foreign.Load(), "a token of another cluster is ignored")
	fresh := NewHandedStore(NewMemoryStore(), MustOf("c", 7))
	require.Equal(t, MustOf("c", 7), fresh.Load())
	require.True(t, NewHandedStore(NewMemoryStore(), Unknown()).Load().IsUnknown())
}

func TestHandedStoreCompareAndSwapDropsImpossibleToken(t *testing.T) {
	shared := NewMemoryStore()
	_, err := shared.Advance(MustOf("c", 10))
	require.NoError(t, err)
	s := NewHandedStore(shared, MustOf("c", 9_000_000_000))
	require.False(t, s.CompareAndSwap(MustOf("c", 10), MustOf("c", 12)), "the session reads as the handed token")
	require.True(t, s.CompareAndSwap(MustOf("c", 9_000_000_000), MustOf("c", 12)))
	require.True(t, s.Handed().IsUnknown())
	require.Equal(t, MustOf("c", 12), s.Load())
	require.Equal(t, MustOf("c", 12), shared.Load(), "the committed offset is true for everyone")

	s = NewHandedStore(shared, MustOf("c", 500))
	require.True(t, s.CompareAndSwap(MustOf("c", 500), MustOf("c", 11)))
	require.Equal(t, MustOf("c", 12), shared.Load(), "the shared store is never lowered for a handed token")

	poisoned := NewMemoryStore()
	_, err = poisoned.Advance(MustOf("c", 9_000_000_000))
	require.NoError(t, err)
	s = NewHandedStore(poisoned, Unknown())
	require.True(t, s.CompareAndSwap(MustOf("c", 9_000_000_000), MustOf("c", 12)))
	require.Equal(t, MustOf("c", 12), poisoned.Load(), "a poisoned shared store heals through a session too")

	s.Reset()
	require.True(t, poisoned.Load().IsUnknown())
}

// TestHandedStoreSwapToUnknown: swapping what a HandedStore reads to
// Unknown (a client moving to another cluster) resets the shared store
// too; it once reported true and left the shared store as it was, so the
// client's next swap failed as a mismatch.
func TestHandedStoreSwapToUnknown(t *testing.T) {
	shared := NewMemoryStore()
	_, err := shared.Advance(MustOf("a", 10))
	require.NoError(t, err)
	s := NewHandedStore(shared, MustOf("a", 500))
	require.True(t, s.CompareAndSwap(MustOf("a", 500), Unknown()))
	require.True(t, s.Load().IsUnknown())
	require.True(t, shared.Load().IsUnknown())
	require.True(t, s.CompareAndSwap(Unknown(), MustOf("b", 3)), "the move to the new cluster")
	require.Equal(t, MustOf("b", 3), shared.Load())
}
