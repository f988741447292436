package producer

import (
	"sync"
	"sync/atomic"
)

// What a Flush waits for: the records produced before it began, never
// the ones produced after, so that Flush and Close end while other
// goroutines keep producing.
//
// Each producer counts its records in an epoch, from Produce until their
// done callback returned (deliver). Flush seals the producer's current
// epoch, puts a new one in its place, and waits until the sealed one and
// every epoch sealed before it are done. A record counts in the epoch of
// its tag, which it keeps when sent again; a record begun while a Flush
// sealed its epoch may count in either, as a call that overlaps Flush may.

// sealedBit is added to an epoch's count when it is sealed: the count is
// back at sealedBit exactly when every record of the epoch ended.
const sealedBit = 1 << 62

// epoch counts a producer's records begun while it was the current one.
type epoch struct {
	n    atomic.Int64  // records counted and not ended, plus sealedBit once sealed
	done chan struct{} // closed once sealed with no record left
	shut atomic.Bool   // done is closed
	// prev is the epoch sealed before this one: Flush waits for it too.
	// It is nil once every epoch before this one is known to be done.
	prev atomic.Pointer[epoch]
}

func newEpoch(prev *epoch) *epoch {
	ep := &epoch{done: make(chan struct{})}
	ep.prev.Store(prev)
	return ep
}

// add counts n more records in ep.
func (ep *epoch) add(n int) { ep.n.Add(int64(n)) }

// end counts one record off ep, once its callback returned.
func (ep *epoch) end() {
	if ep.n.Add(-1) == sealedBit {
		ep.finish()
	}
}

// seal marks ep as no longer current: done closes once its count is zero.
func (ep *epoch) seal() {
	if ep.n.Add(sealedBit) == sealedBit {
		ep.finish()
	}
}

// finish closes done, once: a record counted after ep was sealed and done
// may bring the count back to sealedBit again.
func (ep *epoch) finish() {
	if ep.shut.CompareAndSwap(false, true) {
		close(ep.done)
	}
}

// complete reports whether ep and every epoch before it are done.
func (ep *epoch) complete() bool {
	return ep.shut.Load() && ep.prev.Load() == nil
}

// chain returns ep and the epochs sealed before it that may not be done,
// newest first, dropping the links to those known done.
func (ep *epoch) chain() []*epoch {
	var eps []*epoch
	for x := ep; x != nil; {
		eps = append(eps, x)
		p := x.prev.Load()
		if p != nil && p.complete() {
			x.prev.CompareAndSwap(p, nil)
			break
		}
		x = p
	}
	return eps
}

// settled records that every epoch before ep is done: a wait for them
// all ended.
func (ep *epoch) settled() { ep.prev.Store(nil) }

// epochs is a producer's current epoch and the sealing of it.
type epochs struct {
	mu  sync.Mutex // serializes seal
	cur atomic.Pointer[epoch]
}

func (es *epochs) init() { es.cur.Store(newEpoch(nil)) }

// current returns the epoch records produced now count in.
func (es *epochs) current() *epoch { return es.cur.Load() }

// seal replaces the current epoch and returns it sealed: what a Flush
// beginning now waits for (with the epochs before it).
func (es *epochs) seal() *epoch {
	es.mu.Lock()
	old := es.cur.Load()
	es.cur.Store(newEpoch(old))
	es.mu.Unlock()
	old.seal()
	return old
}
