package producer

import (
	"context"
	"fmt"
)

// outcome is a record's outcome waiting for its turn.
type outcome struct {
	r   ref
	err error
	// final: err is the verdict already, there is none to wait for.
	final bool
}

// settle delivers r's outcome, or queues it behind outcomes that wait.
func (e *engine) settle(r ref, err error) {
	if r.x.takeResent() {
		// The engine's flush waited for this promise: count it off once
		// the outcome is delivered or queued.
		defer e.end()
	}
	if err != nil {
		err = e.attribute(r.x, err)
	}
	if e.queued.Load() == 0 && (err == nil || !e.awaitsVerdict(r)) {
		// Nothing of this client's waits before it (this client's
		// promises run one at a time, and drain counts an outcome off
		// only after delivering it).
		deliver(r.x, err)
		return
	}
	e.enqueue(outcome{r: r, err: err})
}

// enqueue puts o behind the outcomes that wait; drain delivers it.
func (e *engine) enqueue(o outcome) {
	e.omu.Lock()
	if e.joined { // only for a record produced after Close
		e.omu.Unlock()
		deliver(o.r.x, o.err)
		return
	}
	e.queue = append(e.queue, o)
	e.queued.Add(1)
	e.beginLocked()
	if !e.draining {
		e.draining = e.goLocked(e.drain)
	}
	e.omu.Unlock()
}

// deliver hands x's final outcome to its callback, and then counts the
// record off its producer's outstanding records. Every outcome ends here.
func deliver(x *inflight, err error) {
	m := x.tag.m
	if err != nil {
		x.done(Result{}, err)
	} else {
		x.done(result(&x.rec), nil)
	}
	if m != nil {
		m.ended()
	}
}

// awaitsVerdict reports whether r, which failed, waits for the cluster
// verdict before its outcome is known.
func (e *engine) awaitsVerdict(r ref) bool {
	return e.sess.Watch != nil && r.ctx().Err() == nil && e.stop.Err() == nil
}

// drain works through the queue, in order, until it is empty.
func (e *engine) drain() {
	for {
		e.omu.Lock()
		if len(e.queue) == 0 {
			e.queue = nil
			e.draining = false
			e.omu.Unlock()
			return
		}
		o := e.queue[0]
		e.queue[0] = outcome{}
		e.queue = e.queue[1:]
		e.omu.Unlock()
		if o.err != nil && !o.final && e.awaitsVerdict(o.r) {
			e.afterFailure(o.r, o.err)
		} else {
			deliver(o.r.x, o.err)
		}
		e.queued.Add(-1)
		e.end()
	}
}

// beginLocked counts one more thing the engine's flush waits for; e.omu is
// held.
func (e *engine) beginLocked() {
	if e.outstanding == 0 {
		e.idle = make(chan struct{})
	}
	e.outstanding++
}

func (e *engine) end() {
	e.omu.Lock()
	e.outstanding--
	if e.outstanding == 0 {
		close(e.idle)
	}
	e.omu.Unlock()
}

// goLocked runs fn on a goroutine Close joins; e.omu is held. It reports
// false, running nothing, once Close has joined them.
func (e *engine) goLocked(fn func()) bool {
	if e.joined {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn()
	}()
	return true
}

// idleChan returns the channel closed when nothing counted by outstanding
// is left, and whether there is any now (if not, the channel is an old
// one).
func (e *engine) idleChan() (<-chan struct{}, bool) {
	e.omu.Lock()
	defer e.omu.Unlock()
	return e.idle, e.outstanding > 0
}

// waitIdle waits until nothing counted by outstanding is left; it reports
// whether there was any to wait for.
func (e *engine) waitIdle(ctx context.Context) (bool, error) {
	ch, busy := e.idleChan()
	if !busy {
		return false, nil
	}
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// flush waits until every record given to the engine, whichever producer
// gave it, has its outcome delivered: what a transaction's end and the
// last Close wait for.
func (e *engine) flush(ctx context.Context) error {
	// A failed record may wait for a cluster verdict and then go to a new
	// client, and a replaced client fails its records as it closes: flush,
	// wait for such records, and flush again until none is left, so that
	// every done callback has run when flush returns.
	for {
		if err := e.cur.Load().cl.Flush(ctx); err != nil {
			return err
		}
		waited, err := e.waitIdle(ctx)
		if err != nil {
			return err
		}
		if !waited {
			return nil
		}
	}
}

// close flushes and closes the client; see Producer.Close.
func (e *engine) close(ctx context.Context) error {
	e.closed.Store(true)
	if e.cancel != nil {
		e.cancel()
	}
	e.stopAuth()
	err := e.flush(ctx)
	// franz-go's Close can take a while of its own (it gives a last client
	// metrics push up to 1s, which a broker holding requests delays): the
	// caller's context bounds Close, and the rest finishes behind it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.mu.Lock() // no client swap in progress
		e.omu.Lock()
		e.shut = true
		e.omu.Unlock()
		e.stopNow()
		cl := e.cur.Load().cl
		e.mu.Unlock()
		closeClient(cl)
		// Nothing is sent again now and nothing waits for a verdict: what
		// is left ends without waiting on the network.
		_, _ = e.waitIdle(context.Background())
		e.omu.Lock()
		e.joined = true
		e.omu.Unlock()
		e.wg.Wait()
	}()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		if err == nil {
			err = context.Cause(ctx)
		}
		return fmt.Errorf("producer: close: the context ended first; the client finishes closing in the background: %w", err)
	}
}
