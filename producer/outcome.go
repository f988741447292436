package producer

import (
	"context"
	"fmt"
)

// outcome is a record's outcome waiting for its turn.
type outcome struct {
	r   ref
	err error
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
	if e.joined { // only for a record a closed client gave back late
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
// record off its producer's epoch. Every outcome ends here.
func deliver(x *inflight, err error) {
	ep := x.tag.ep
	if err != nil {
		x.done(Result{}, err)
	} else {
		x.done(result(&x.rec), nil)
	}
	if ep != nil {
		ep.end()
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
		if o.err != nil && e.awaitsVerdict(o.r) {
			e.afterFailure(o.r, o.err)
		} else {
			deliver(o.r.x, o.err)
		}
		e.queued.Add(-1)
		e.end()
	}
}

// beginLocked counts one more piece of the engine's own work (see
// outstanding); e.omu is held.
func (e *engine) beginLocked() {
	if e.outstanding == 0 {
		e.flipLocked()
	}
	e.outstanding++
}

// end counts one piece of the engine's own work off.
func (e *engine) end() {
	e.omu.Lock()
	e.outstanding--
	if e.outstanding == 0 {
		e.flipLocked()
	}
	e.omu.Unlock()
}

// flipLocked wakes whoever waits for outstanding to go from zero to more
// or back; e.omu is held.
func (e *engine) flipLocked() {
	close(e.flip)
	e.flip = make(chan struct{})
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

// flipChan returns the channel closed when outstanding next goes from
// zero to more or back, and whether it is more than zero now.
func (e *engine) flipChan() (<-chan struct{}, bool) {
	e.omu.Lock()
	defer e.omu.Unlock()
	return e.flip, e.outstanding > 0
}

// waitIdle waits until the engine's own work (outstanding) is over.
func (e *engine) waitIdle(ctx context.Context) error {
	for {
		ch, busy := e.flipChan()
		if !busy {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// flush waits until every record given to the engine before the call,
// whichever producer gave it, has its outcome delivered: what a
// transaction's end and the last Close wait for. Records given meanwhile
// are not waited for.
func (e *engine) flush(ctx context.Context) error {
	return e.await(ctx, e.sealAll()...)
}

// await waits until the records of eps, sealed epochs, and of the epochs
// sealed before them have their outcomes delivered, flushing the current
// client meanwhile so that none lingers.
func (e *engine) await(ctx context.Context, eps ...*epoch) error {
	for _, ep := range eps {
		for _, x := range ep.chain() {
			if err := e.awaitOne(ctx, x); err != nil {
				return err
			}
		}
		ep.settled()
	}
	return nil
}

// awaitOne waits until ep is done. franz-go's Flush of the client runs
// meanwhile and is cut short once ep is done: records given by others
// since are sent sooner, but not waited for. A record may be done only
// after the client holds nothing of it: its promise runs after the client
// let it go (a record franz-go failed before buffering it, a replaced
// client's), it waits for a cluster verdict, goes to a new client, or its
// callback runs; the client is flushed again whenever the engine's own
// work on records ends or begins, as a new client may hold them.
func (e *engine) awaitOne(ctx context.Context, ep *epoch) error {
	for {
		select {
		case <-ep.done:
			return nil
		default:
		}
		cl := e.cur.Load().cl
		fctx, cancel := context.WithCancel(ctx)
		flushed := make(chan error, 1)
		go func() { flushed <- cl.Flush(fctx) }()
		select {
		case <-ep.done:
			cancel()
			<-flushed
			return nil
		case err := <-flushed:
			cancel()
			if err != nil {
				return err // ctx ended
			}
		}
		flip, _ := e.flipChan()
		select {
		case <-ep.done:
			return nil
		case <-flip:
		case <-ctx.Done():
			return ctx.Err()
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
		_ = e.waitIdle(context.Background())
		e.omu.Lock()
		e.joined = true
		e.omu.Unlock()
		e.wg.Wait()
		e.refusals.join()
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
