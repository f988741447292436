package tokens

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/kconsist/kconsist/consistency"
)

// Kind names a change an [Owner] made, or refused.
type Kind uint8

const (
	// Advanced: the store moved forward, to a token a broker answered
	// with (Addr) or to the cluster's committed offset.
	Advanced Kind = iota + 1
	// Healed: the store held From, beyond its cluster's committed offset,
	// and was lowered to To; or held From, of a cluster the owner never
	// talked to, and was replaced by To, of the cluster it talks to.
	Healed
	// Moved: the bootstrap servers moved from cluster FromCluster to
	// ToCluster; StoreReset says whether this change reset the store.
	Moved
	// Conflict: the store holds From, of a cluster this owner never
	// talked to, while its brokers belong to ToCluster: another writer
	// shares the store across clusters. Reported once per pair.
	Conflict
)

// Change is what an [Owner] reports, in store order.
type Change struct {
	Kind     Kind
	From, To consistency.Token
	// Addr is the broker whose answer made the change, when one did.
	Addr string
	// FromCluster and ToCluster are the clusters of Moved and Conflict.
	FromCluster, ToCluster string
	// StoreReset: a Moved change reset the store.
	StoreReset bool
}

// Listener hears the advances one client's connections made; the owner
// calls it under its lock, in store order, so it must only queue.
type Listener interface {
	OnTokenAdvanced(from, to consistency.Token)
}

// Owner makes every change to one factory's consistency store; see the
// package doc. It is safe for concurrent use.
type Owner struct {
	store consistency.Store
	*shared
}

// shared is what an owner and the owners of its handed stores share.
type shared struct {
	mu   sync.Mutex // held across each change and the report of it
	emit func(Change)

	// known is the cluster this owner learnt from its brokers' answers
	// or its quorum's reports, with the highest offset it knows that
	// cluster committed (a broker applies only what was committed). Nil:
	// none yet.
	known atomic.Pointer[knownCommitted]

	// wrote is the cluster of the last token the owner stored; nil: it
	// stored none yet.
	wrote     atomic.Pointer[string]
	conflict  atomic.Pointer[[2]string] // the last Conflict reported
	lastMove  atomic.Pointer[[2]string] // the last Moved reported
	resets    atomic.Uint64
	heals     atomic.Uint64
	conflicts atomic.Uint64
}

type knownCommitted struct {
	cluster string
	offset  atomic.Int64
}

// New returns the owner of store. emit, called under the owner's lock in
// store order, hears every change; it must only queue (see Stream). It may
// be nil.
func New(store consistency.Store, emit func(Change)) *Owner {
	if emit == nil {
		emit = func(Change) {}
	}
	return &Owner{store: store, shared: &shared{emit: emit}}
}

// Handed returns the owner of a store handed over o's store (a
// consistency.HandedStore for one unit of work): it shares o's lock,
// reports and knowledge of the cluster.
func (o *Owner) Handed(store consistency.Store) *Owner {
	return &Owner{store: store, shared: o.shared}
}

// Store returns the store, for reading. Change it only through the owner.
func (o *Owner) Store() consistency.Store { return o.store }

// Load returns the store's token.
func (o *Owner) Load() consistency.Token { return o.store.Load() }

// Stats are an owner's counters.
type Stats struct{ Resets, Heals, Conflicts uint64 }

// Stats returns the owner's counters.
func (o *Owner) Stats() Stats {
	return Stats{Resets: o.resets.Load(), Heals: o.heals.Load(), Conflicts: o.conflicts.Load()}
}

// Learnt returns the cluster the owner learnt from its brokers' answers or
// its quorum's reports, or "" when none yet.
func (o *Owner) Learnt() string {
	if k := o.known.Load(); k != nil {
		return k.cluster
	}
	return ""
}

// Covered reports whether tok's cluster is known to have committed tok.
func (o *Owner) Covered(tok consistency.Token) bool {
	k := o.known.Load()
	return k != nil && !tok.IsUnknown() && k.cluster == tok.ClusterID() && tok.Offset() <= k.offset.Load()
}

// Answered merges next, the token a broker at addr answered with, into
// the store, and tells by when it moved (a client's listener, which
// reports it for the client), or reports it as Advanced when by is nil. It returns the
// store's token after the call; an error wrapping
// consistency.ErrClusterMismatch when the store holds another cluster's
// token. The caller checked that next is later than what it loaded; a
// call that changes nothing allocates nothing.
func (o *Owner) Answered(addr string, next consistency.Token, by Listener) (consistency.Token, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := o.store.Load()
	now, err := o.store.Advance(next)
	if err != nil {
		return now, err
	}
	o.noteCommitted(next.ClusterID(), next.Offset())
	if now != cur {
		o.stored(now.ClusterID())
		if by != nil {
			by.OnTokenAdvanced(cur, now) // the client's events: it reports
		} else {
			o.emit(Change{Kind: Advanced, From: cur, To: now, Addr: addr})
		}
	}
	return now, nil
}

// Committed merges c, the committed offset its cluster reported, into the
// store.
func (o *Owner) Committed(c consistency.Token) (consistency.Token, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.noteCommitted(c.ClusterID(), c.Offset())
	cur := o.store.Load()
	now, err := o.store.Advance(c)
	if err != nil {
		return now, fmt.Errorf("committed offset %v: %w", c, err)
	}
	if now != cur {
		o.stored(now.ClusterID())
		o.emit(Change{Kind: Advanced, From: cur, To: now})
	}
	return now, nil
}

// Reported records that c's cluster reported c as its committed offset,
// without changing the store.
func (o *Owner) Reported(c consistency.Token) {
	if c.IsUnknown() {
		return
	}
	o.mu.Lock()
	o.noteCommitted(c.ClusterID(), c.Offset())
	o.mu.Unlock()
}

// Hand merges tok, a token from outside that its caller checked against
// the cluster, into the store.
func (o *Owner) Hand(tok consistency.Token) (consistency.Token, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	cur := o.store.Load()
	now, err := o.store.Advance(tok)
	if err == nil && now != cur {
		o.stored(now.ClusterID())
		o.emit(Change{Kind: Advanced, From: cur, To: now})
	}
	return now, err
}

// Heal replaces judged by committed, the committed offset its cluster
// reported, if the store still holds judged and judged is impossible:
// beyond committed, of committed's cluster; or of a cluster the owner
// never talked to (Judge says Foreign). The caller must have loaded judged
// before it asked for committed: a token in the store then was committed
// then, unless it is impossible, so a write that advanced the store while
// the question was in flight is never taken for a future token. It
// reports whether it changed the store.
func (o *Owner) Heal(judged, committed consistency.Token) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if judged.IsUnknown() || committed.IsUnknown() {
		return false
	}
	if judged.ClusterID() == committed.ClusterID() {
		if judged.Offset() <= committed.Offset() {
			return false
		}
	} else if o.judgeLocked(judged, committed.ClusterID()) != Foreign {
		return false
	}
	if !o.store.CompareAndSwap(judged, committed) {
		return false
	}
	// What was known committed beyond this came from before a restore.
	n := &knownCommitted{cluster: committed.ClusterID()}
	n.offset.Store(committed.Offset())
	o.known.Store(n)
	o.stored(committed.ClusterID())
	o.heals.Add(1)
	o.emit(Change{Kind: Healed, From: judged, To: committed})
	return true
}

// ReplaceForeign replaces judged, a token of a cluster the owner never
// talked to, by next, the token a bootstrap server at addr answered with
// for its own cluster, if the store still holds judged. It reports whether
// it did.
func (o *Owner) ReplaceForeign(addr string, judged, next consistency.Token) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if judged.IsUnknown() || judged.ClusterID() == next.ClusterID() || o.judgeLocked(judged, next.ClusterID()) != Foreign {
		return false
	}
	if !o.store.CompareAndSwap(judged, next) {
		return false
	}
	o.noteCommitted(next.ClusterID(), next.Offset())
	o.stored(next.ClusterID())
	o.heals.Add(1)
	o.emit(Change{Kind: Healed, From: judged, To: next, Addr: addr})
	return true
}

// Verdict is what a token of another cluster than the one the bootstrap
// servers name means (see Judge).
type Verdict int8

const (
	// Foreign: the token came from outside (a store handed to a fresh
	// factory, or the owner never stored one); a heal replaces it.
	Foreign Verdict = iota + 1
	// Move: the owner learnt the token from its brokers, so the bootstrap
	// servers moved to another cluster: a reset, reported as Moved.
	Move
	// Shared: the owner stored tokens of the bootstrap servers' cluster,
	// and another writer put a token of another cluster in the store: it
	// is shared across clusters. Reported once as Conflict; nothing is
	// healed.
	Shared
)

// Judge tells what cur, a token of another cluster than cluster, the one
// the bootstrap servers name, means; see Verdict. A Shared verdict is
// reported (Conflict) once per pair of clusters.
func (o *Owner) Judge(cur consistency.Token, cluster string) Verdict {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.judgeLocked(cur, cluster)
}

func (o *Owner) judgeLocked(cur consistency.Token, cluster string) Verdict {
	w := o.wrote.Load()
	switch {
	case w == nil:
		return Foreign
	case *w == cur.ClusterID():
		return Move
	case *w != cluster:
		return Foreign // written here for a third cluster, then moved away from
	}
	pair := [2]string{cur.ClusterID(), cluster}
	if p := o.conflict.Load(); p == nil || *p != pair {
		o.conflict.Store(&pair)
		o.conflicts.Add(1)
		o.emit(Change{Kind: Conflict, From: cur, FromCluster: cur.ClusterID(), ToCluster: cluster})
	}
	return Shared
}

// stored notes that the owner put a token of cluster in the store. It
// allocates only when the cluster changes. Called under mu.
func (o *Owner) stored(cluster string) {
	if w := o.wrote.Load(); w == nil || *w != cluster {
		o.wrote.Store(&cluster)
	}
}

// Moved reports that the bootstrap servers moved from cluster from to
// cluster to (addr: the server whose answer showed it, or ""). With
// follow (the clients are not pinned) it resets the store unless it is
// Unknown or holds a token of to already: the old cluster's offsets mean
// nothing on the new one. The move is reported once, whoever saw it first
// (a connection's answer or the watcher's check), unless this call reset
// the store; it reports whether this call reset the store.
func (o *Owner) Moved(addr, from, to string, follow bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	reset := false
	for follow {
		cur := o.store.Load()
		if cur.IsUnknown() || cur.ClusterID() == to {
			break
		}
		if o.store.CompareAndSwap(cur, consistency.Unknown()) {
			reset = true
			break
		}
	}
	if follow {
		if k := o.known.Load(); k != nil && k.cluster != to {
			o.known.Store(nil) // what the old cluster committed says nothing of the new one
		}
		o.conflict.Store(nil)
	}
	if reset {
		o.resets.Add(1)
	}
	pair := [2]string{from, to}
	if p := o.lastMove.Load(); !reset && p != nil && *p == pair {
		return false
	}
	o.lastMove.Store(&pair)
	o.emit(Change{Kind: Moved, FromCluster: from, ToCluster: to, Addr: addr, StoreReset: reset})
	return reset
}

// noteCommitted records that cluster committed offset; it allocates only
// when the cluster is not the one known. Called under mu.
func (o *Owner) noteCommitted(cluster string, offset int64) {
	k := o.known.Load()
	if k == nil || k.cluster != cluster {
		n := &knownCommitted{cluster: cluster}
		n.offset.Store(offset)
		o.known.Store(n)
		return
	}
	if offset > k.offset.Load() {
		k.offset.Store(offset)
	}
}
