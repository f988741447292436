package producer

import (
	"context"
	"sync"
	"sync/atomic"
)

// member is one producer on an engine. Producers of one factory with equal
// settings share an engine and its franz-go client (see link.Share); each
// is a member of it, with its own tags and its own outstanding records, so
// that its Flush waits for what it produced and nothing else.
type member struct {
	e *engine
	// closed: this producer's Close was called; its records fail with
	// kgo.ErrClientClosed even while others keep the shared client open.
	closed atomic.Bool
	// lastTag is the tag most recently made for this producer's records
	// (see tagFor).
	lastTag atomic.Pointer[tag]
	// outstanding counts this producer's records from Produce until their
	// done callback returned; flushing counts the Flush calls waiting for
	// it to drop to zero, so that a record's end looks for one to wake
	// only when one waits.
	outstanding atomic.Int64
	flushing    atomic.Int32

	mu   sync.Mutex    // guards idle
	idle chan struct{} // closed (and dropped) when outstanding drops to zero while Flush waits
}

// begin counts n more records of this producer.
func (m *member) begin(n int) { m.outstanding.Add(int64(n)) }

// ended counts one record off, once its done callback returned.
func (m *member) ended() {
	if m.outstanding.Add(-1) == 0 && m.flushing.Load() > 0 {
		m.mu.Lock()
		if m.idle != nil {
			close(m.idle)
			m.idle = nil
		}
		m.mu.Unlock()
	}
}

// idleChan returns a channel closed once outstanding is zero (at once if
// it is now). The caller counts itself in flushing first: a record that
// ends after the check below then closes the channel.
func (m *member) idleChan() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.idle == nil {
		m.idle = make(chan struct{})
	}
	ch := m.idle
	if m.outstanding.Load() == 0 {
		close(ch)
		m.idle = nil
	}
	return ch
}

// flush waits until every record this producer produced so far has its
// outcome delivered (see Producer.Flush). franz-go's Flush of the client
// runs meanwhile, so that no partition lingers, and is cut short once this
// producer's records are done: the other producers' records are sent
// sooner, but not waited for.
func (m *member) flush(ctx context.Context) error {
	m.flushing.Add(1)
	defer m.flushing.Add(-1)
	idle := m.idleChan()
	for {
		select {
		case <-idle:
			return nil
		default:
		}
		cl := m.e.cur.Load().cl
		fctx, cancel := context.WithCancel(ctx)
		flushed := make(chan error, 1)
		go func() { flushed <- cl.Flush(fctx) }()
		select {
		case <-idle:
			cancel()
			<-flushed
			return nil
		case err := <-flushed:
			cancel()
			if err != nil {
				return err // ctx ended
			}
		}
		// The client holds nothing any more, yet records of this producer
		// are not done: they wait for a cluster verdict, went to a new
		// client, or their callback runs. Flush again once what the
		// engine waits for is over (a new client may hold them).
		engineIdle, busy := m.e.idleChan()
		if !busy {
			engineIdle = nil // only this producer's records to wait for
		}
		select {
		case <-idle:
			return nil
		case <-engineIdle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
		return m.flush(ctx)
	}
	return m.e.close(ctx)
}
