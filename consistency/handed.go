package consistency

import "sync/atomic"

// HandedStore is a [Store] for one unit of work that came with a token of its
// own: a request from another service, a job, one call. It reads as the
// later of a shared store and the handed token, so the work waits for
// what its sender wrote; but everything it learns from brokers goes to
// the shared store, and the handed token never raises the shared store
// for other callers.
//
// This is how MongoDB drivers treat a cluster time handed in from outside:
// it is confined to the session it came with, and the client-wide value
// advances only from server replies. A bad token then harms one unit of
// work, not the process; and a session that finds its token impossible
// (see CompareAndSwap) drops it.
type HandedStore struct {
	shared Store
	handed atomic.Pointer[Token]
}

var _ Store = (*HandedStore)(nil)

// NewHandedStore returns a HandedStore over shared holding handed. An Unknown
// handed token makes the store read exactly as shared.
func NewHandedStore(shared Store, handed Token) *HandedStore {
	s := &HandedStore{shared: shared}
	if !handed.IsUnknown() {
		s.handed.Store(&handed)
	}
	return s
}

// Handed returns the token the store still holds from outside, or
// Unknown once it was dropped or overtaken.
func (s *HandedStore) Handed() Token {
	if p := s.handed.Load(); p != nil {
		return *p
	}
	return Token{}
}

// Load returns the later of the shared token and the handed token. A
// handed token of another cluster than the shared store's is ignored: the
// shared store follows the cluster the clients talk to.
func (s *HandedStore) Load() Token {
	cur := s.shared.Load()
	p := s.handed.Load()
	if p == nil {
		return cur
	}
	h := *p
	if cur.IsUnknown() {
		return h
	}
	if h.clusterID != cur.clusterID || h.offset <= cur.offset {
		return cur
	}
	return h
}

// Advance advances the shared store: what brokers answer is true for
// everyone.
func (s *HandedStore) Advance(c Token) (Token, error) {
	if _, err := s.shared.Advance(c); err != nil {
		return s.Load(), err
	}
	return s.Load(), nil
}

// Reset drops the handed token and resets the shared store.
func (s *HandedStore) Reset() {
	s.handed.Store(nil)
	s.shared.Reset()
}

// CompareAndSwap sets the store to next if it reads as old. The handed
// token is dropped, and the shared store is swapped from what it held to
// next when it is not later than next already.
func (s *HandedStore) CompareAndSwap(old, next Token) bool {
	p := s.handed.Load()
	cur := s.shared.Load()
	read := cur
	if p != nil {
		if h := *p; cur.IsUnknown() || (h.clusterID == cur.clusterID && h.offset > cur.offset) {
			read = h
		}
	}
	if read != old {
		return false
	}
	if p != nil && !s.handed.CompareAndSwap(p, nil) {
		return false
	}
	if cur == next {
		return true
	}
	if !next.IsUnknown() && !cur.IsUnknown() && read != cur {
		if l, err := cur.Later(next); err == nil && l == cur {
			// Only the handed token was above next: dropping it is
			// the swap. (An Unknown next is a reset, which must reach
			// the shared store: a client that moves to another
			// cluster swaps to Unknown first.)
			return true
		}
	}
	return s.shared.CompareAndSwap(cur, next)
}
