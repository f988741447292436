package producer

import (
	"context"
	"sync/atomic"
)

// member is one producer on an engine. Producers of one factory with equal
// settings share an engine and its franz-go client (see link.Share); each
// is a member of it, with its own tags and its own epochs of records (see
// pending.go), so that its Flush waits for what it produced and nothing
// else.
type member struct {
	e *engine
	// closed: this producer's Close was called; its records fail with
	// kgo.ErrClientClosed even while others keep the shared client open.
	closed atomic.Bool
	// lastTag is the tag most recently made for this producer's records
	// (see tagFor).
	lastTag atomic.Pointer[tag]
	// eps counts this producer's records from Produce until their done
	// callback returned, in epochs that Flush seals.
	eps epochs
}

// begin counts x, a record of this producer, until its outcome is
// delivered.
func begin(x ref) { x.x.tag.ep.add(1) }

// beginAll counts xs, records of this producer, as begin does, with one
// count for a run of records of one epoch.
func beginAll(xs []ref) {
	for i := 0; i < len(xs); {
		ep, n := xs[i].x.tag.ep, 1
		for i+n < len(xs) && xs[i+n].x.tag.ep == ep {
			n++
		}
		ep.add(n)
		i += n
	}
}

// flush waits until every record this producer produced before the call
// has its outcome delivered (see Producer.Flush); records produced
// meanwhile are not waited for. franz-go's Flush of the client runs
// meanwhile, so that no partition lingers, and is cut short once this
// producer's records are done: the other producers' records are sent
// sooner, but not waited for.
func (m *member) flush(ctx context.Context) error {
	return m.e.await(ctx, m.eps.seal())
}

// close closes this producer (see Producer.Close): the last one on the
// engine closes the client; another flushes its own records.
func (m *member) close(ctx context.Context) error {
	// A second Close of a producer closes again what the first did.
	last := m.e.isReleased()
	if !m.closed.Swap(true) {
		last = m.e.leave()
	}
	if !last {
		err := m.flush(ctx)
		if err == nil {
			// Nothing of this producer is left for the last Close to
			// wait for: what it is given now is refused.
			m.e.forget(m)
		}
		return err
	}
	return m.e.close(ctx)
}
