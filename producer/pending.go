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

// epoch counts a producer's records begun while it was the current one.
// Records are counted in by the goroutines that produce them and out by
// franz-go's promise goroutine: the two counts sit on cache lines of their
// own, so that neither side's add waits for the other's (one shared word
// moved between the cores at every record).
type epoch struct {
	begun atomic.Int64 // records counted in (add)
	_     [56]byte
	ended atomic.Int64 // records counted out (end)
	_     [56]byte
	// sealed: the epoch is no longer current; done closes once ended
	// reaches begun.
	sealed atomic.Bool
	done   chan struct{} // closed once sealed with no record left
	shut   atomic.Bool   // done is closed
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
func (ep *epoch) add(n int) { ep.begun.Add(int64(n)) }

// end counts one record off ep, once its callback returned. Against seal
// it is the other half of a pair of store-then-load sequences (seal stores
// sealed and loads the counts; end adds to ended and loads sealed): with
// Go's sequentially consistent atomics at least one of the two sees the
// other, so the last record's end and a seal racing it never both miss
// that the epoch is done.
func (ep *epoch) end() {
	if e := ep.ended.Add(1); ep.sealed.Load() && e == ep.begun.Load() {
		ep.finish()
	}
}

// seal marks ep as no longer current: done closes once every record
// counted in was counted out.
func (ep *epoch) seal() {
	ep.sealed.Store(true)
	if ep.ended.Load() == ep.begun.Load() {
		ep.finish()
	}
}

// finish closes done, once: a record counted after ep was sealed and done
// may bring the counts level again.
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
