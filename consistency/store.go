package consistency

import (
	"fmt"
	"sync/atomic"
)

// Store keeps the latest consistency token seen by a group of clients. It
// is the Go form of KIP-1243's ConsistencyContextStore: every request a
// client sends carries [Store.Load], every response it receives is passed to
// [Store.Advance].
//
// Concurrency contract, which every implementation must meet:
//
//   - All methods are safe for concurrent use by any number of goroutines.
//   - Advance is an atomic read-modify-write: the stored token becomes
//     stored.Later(c). Concurrent advances never lose an update; the store
//     ends at the greatest offset it was advanced with, whatever the order.
//   - The stored offset never decreases, except through Reset.
//   - Advance with a known token of another cluster than the stored one
//     returns an error wrapping ErrClusterMismatch and changes nothing.
//   - Load never blocks on Advance for long and never returns a token that
//     was not stored at some point (no torn reads).
//   - Reset makes the store Unknown, so the next Advance adopts whatever
//     cluster it is given. Clients call it when a rebootstrap lands on a
//     different cluster: the offsets of one metadata log mean nothing in
//     another.
//   - CompareAndSwap replaces the stored token with next only if it
//     still equals old, atomically with respect to every other method. It
//     is how a client changes the store on a decision it made from an
//     earlier Load (forget cluster A, lower an offset the cluster never
//     reached) without undoing what another client stored meanwhile: a
//     check followed by a separate Reset could wipe a newer token.
//
// Load and Advance are on every request's path; implementations should keep
// them cheap and free of allocations when nothing changes.
type Store interface {
	// Load returns the current token.
	Load() Token
	// Advance merges c into the store and returns the resulting token.
	Advance(c Token) (Token, error)
	// Reset sets the store to Unknown.
	Reset()
	// CompareAndSwap sets the store to next if it holds old, and reports
	// whether it did. Unlike Advance it may move the offset down or change
	// the cluster: callers use it only to undo what they know is wrong.
	CompareAndSwap(old, next Token) bool
}

// ResetCluster makes s Unknown if it holds a token of the cluster
// clusterID, and reports whether this call did. A token of any other
// cluster, stored by another client meanwhile, is left alone.
func ResetCluster(s Store, clusterID string) bool {
	for {
		cur := s.Load()
		if cur.IsUnknown() || cur.ClusterID() != clusterID {
			return false
		}
		if s.CompareAndSwap(cur, Token{}) {
			return true
		}
	}
}

// MemoryStore is the lock-free in-process [Store]. The zero value is ready
// to use and Unknown.
type MemoryStore struct {
	p atomic.Pointer[Token]
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty (Unknown) in-process store.
func NewMemoryStore() *MemoryStore { return new(MemoryStore) }

var unknownToken = new(Token)

// Load returns the current token.
func (s *MemoryStore) Load() Token {
	if p := s.p.Load(); p != nil {
		return *p
	}
	return Token{}
}

// Advance merges c into the store with a compare-and-swap loop. When c is
// not later than the stored token it returns without allocating.
func (s *MemoryStore) Advance(c Token) (Token, error) {
	for {
		old := s.p.Load()
		cur := Token{}
		if old != nil {
			cur = *old
		}
		next, err := cur.Later(c)
		if err != nil {
			return cur, fmt.Errorf("advance store: %w", err)
		}
		if next == cur {
			return cur, nil
		}
		fresh := new(Token)
		*fresh = next
		if s.p.CompareAndSwap(old, fresh) {
			return next, nil
		}
	}
}

// Reset sets the store to Unknown.
func (s *MemoryStore) Reset() { s.p.Store(unknownToken) }

// CompareAndSwap sets the store to next if it holds old.
func (s *MemoryStore) CompareAndSwap(old, next Token) bool {
	for {
		p := s.p.Load()
		cur := Token{}
		if p != nil {
			cur = *p
		}
		if cur != old {
			return false
		}
		if cur == next {
			return true
		}
		fresh := unknownToken
		if !next.IsUnknown() {
			fresh = new(Token)
			*fresh = next
		}
		if s.p.CompareAndSwap(p, fresh) {
			return true
		}
	}
}
