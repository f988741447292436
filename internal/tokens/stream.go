package tokens

import (
	"sync"
	"sync/atomic"
)

// DefaultStreamLimit is how many undelivered events a [Stream] keeps before
// it drops events its Droppable says may go.
const DefaultStreamLimit = 4096

// Stream delivers a factory's events, one at a time and in the order they
// were emitted, on a goroutine of its own that runs while events are
// queued (none while idle): Emit never waits for the receiver. Events a receiver has not taken yet queue up to Limit; past
// it, events Droppable allows (token advances, whose latest says all) are
// dropped, and past four times Limit every event is, each counted in
// Dropped. The zero value is not usable: see NewStream.
type Stream[E any] struct {
	deliver   func(E)
	droppable func(E) bool
	limit     int

	mu      sync.Mutex
	drained sync.Cond // done moved, or the deliverer stopped
	queue   []E
	running bool // a deliverer runs
	closed  bool
	emitted uint64 // events queued in all
	done    uint64 // events delivered in all

	dropped atomic.Uint64
	wg      sync.WaitGroup // the deliverer
}

// NewStream returns a stream that calls deliver for each event. droppable
// may be nil (nothing is dropped before the hard limit); limit <= 0 means
// DefaultStreamLimit. Close waits for what is queued to be delivered.
func NewStream[E any](deliver func(E), droppable func(E) bool, limit int) *Stream[E] {
	if limit <= 0 {
		limit = DefaultStreamLimit
	}
	s := &Stream[E]{deliver: deliver, droppable: droppable, limit: limit}
	s.drained.L = &s.mu
	return s
}

// Emit queues ev for delivery. It never blocks on the receiver; after
// Close it drops ev.
func (s *Stream[E]) Emit(ev E) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if n := len(s.queue); n >= 4*s.limit || (n >= s.limit && s.droppable != nil && s.droppable(ev)) {
		s.dropped.Add(1)
		return
	}
	s.queue = append(s.queue, ev)
	s.emitted++
	if !s.running {
		s.running = true
		s.wg.Go(s.run)
	}
}

// Dropped returns how many events were dropped because the receiver fell
// behind.
func (s *Stream[E]) Dropped() uint64 { return s.dropped.Load() }

// Flush waits until every event emitted before the call was delivered, or
// the stream closed.
func (s *Stream[E]) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	target := s.emitted
	for s.done < target && s.running {
		s.drained.Wait()
	}
}

// Close waits until what is queued was delivered; later Emits are
// dropped. It is safe to call more than once, but not from the receiver.
func (s *Stream[E]) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.wg.Wait()
}

// run delivers until the queue is empty, then stops: the next Emit starts
// another. One runs at a time, so events keep their order.
func (s *Stream[E]) run() {
	var batch []E
	for {
		s.mu.Lock()
		if len(s.queue) == 0 {
			s.running = false
			s.drained.Broadcast()
			s.mu.Unlock()
			return
		}
		batch, s.queue = s.queue, batch[:0]
		s.mu.Unlock()
		for i, ev := range batch {
			s.deliver(ev)
			var zero E
			batch[i] = zero
		}
		s.mu.Lock()
		s.done += uint64(len(batch))
		s.drained.Broadcast()
		s.mu.Unlock()
	}
}
