package producer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Outcome ordering: the outcomes of records a client gave back are
// delivered in the order franz-go gives them, which keeps its
// per-partition order. The promise delivers one itself only while nothing
// waits in the queue; otherwise it joins the queue, which one goroutine
// (drain) works through. A failed record may wait there for a cluster
// verdict, which a promise must not do. What the verdict is, and what a
// failed record becomes, is the follower's (follow.go), met through
// verdicts.

// verdicts is what the outcome queue asks of the part that follows
// cluster changes (the engine, follow.go).
type verdicts interface {
	// awaitsVerdict reports whether r, which failed, waits for the
	// cluster verdict before its outcome is known.
	awaitsVerdict(r ref) bool
	// afterFailure decides, once the verdict is in, what r becomes, and
	// delivers its outcome or sends it again.
	afterFailure(r ref, err error)
}

// outcome is a record's outcome waiting for its turn.
type outcome struct {
	r   ref
	err error
}

// outcomes is the queue of outcomes and its goroutine.
type outcomes struct {
	v     verdicts
	work  *work  // counts each outcome in queue as the engine's own work
	tasks *tasks // runs drain

	// queued counts outcomes in queue or being handled by drain: read
	// for every record, so an atomic, changed under mu.
	queued atomic.Int64

	mu       sync.Mutex // guards queue and draining
	queue    []outcome
	draining bool // a drain goroutine runs
}

// settle delivers r's outcome, err already attributed, or queues it behind
// outcomes that wait.
func (o *outcomes) settle(r ref, err error) {
	if o.queued.Load() == 0 && (err == nil || !o.v.awaitsVerdict(r)) {
		// Nothing of this client's waits before it (this client's
		// promises run one at a time, and drain counts an outcome off
		// only after delivering it).
		deliver(r.x, err)
		return
	}
	o.enqueue(outcome{r: r, err: err})
}

// enqueue puts oc behind the outcomes that wait; drain delivers it.
func (o *outcomes) enqueue(oc outcome) {
	o.mu.Lock()
	if !o.draining {
		if !o.tasks.start(o.drain) {
			// Close joined its goroutines: only for a record a closed
			// client gave back late. Nothing waits in queue.
			o.mu.Unlock()
			deliver(oc.r.x, oc.err)
			return
		}
		o.draining = true
	}
	o.queue = append(o.queue, oc)
	o.queued.Add(1)
	o.work.begin()
	o.mu.Unlock()
}

// drain works through the queue, in order, until it is empty.
func (o *outcomes) drain() {
	for {
		o.mu.Lock()
		if len(o.queue) == 0 {
			o.queue = nil
			o.draining = false
			o.mu.Unlock()
			return
		}
		oc := o.queue[0]
		o.queue[0] = outcome{}
		o.queue = o.queue[1:]
		o.mu.Unlock()
		if oc.err != nil && o.v.awaitsVerdict(oc.r) {
			o.v.afterFailure(oc.r, oc.err)
		} else {
			deliver(oc.r.x, oc.err)
		}
		o.queued.Add(-1)
		o.work.end()
	}
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

// work counts the engine's own work on records: outcomes of records a
// client gave back waiting in queue, records sent again until their
// promise ran, and replaced clients until every promise of theirs ran. A
// flush whose client holds nothing of its records flushes again once that
// work ends or begins; records refused unsent are not counted, as nothing
// is to be flushed for them.
type work struct {
	mu sync.Mutex // guards the fields below
	n  int
	// flip is closed and replaced whenever n goes from zero to more or
	// back.
	flip chan struct{}
	// shut: Close closes the last client, and nothing is sent again.
	shut bool
}

func newWork() *work { return &work{flip: make(chan struct{})} }

// begin counts one more piece of work.
func (w *work) begin() {
	w.mu.Lock()
	w.beginLocked()
	w.mu.Unlock()
}

// beginUnlessShut counts one more record sent again, unless Close closes
// the last client; it reports whether it counted it.
func (w *work) beginUnlessShut() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.shut {
		return false
	}
	w.beginLocked()
	return true
}

func (w *work) beginLocked() {
	if w.n == 0 {
		w.flipLocked()
	}
	w.n++
}

// end counts one piece of work off.
func (w *work) end() {
	w.mu.Lock()
	w.n--
	if w.n == 0 {
		w.flipLocked()
	}
	w.mu.Unlock()
}

func (w *work) flipLocked() {
	close(w.flip)
	w.flip = make(chan struct{})
}

// shutDown marks that Close closes the last client: no record is sent
// again.
func (w *work) shutDown() {
	w.mu.Lock()
	w.shut = true
	w.mu.Unlock()
}

// state returns the channel closed when the work next goes from none to
// some or back, and whether there is some now.
func (w *work) state() (<-chan struct{}, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flip, w.n > 0
}

// wait waits until no work is left.
func (w *work) wait(ctx context.Context) error {
	for {
		ch, busy := w.state()
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

// tasks are the goroutines an engine starts, which its last Close joins.
type tasks struct {
	mu     sync.Mutex // guards joined
	joined bool       // Close joined them: no goroutine starts
	wg     sync.WaitGroup
}

// start runs fn on a goroutine Close joins. It reports false, running
// nothing, once Close has joined them.
func (t *tasks) start(fn func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.joined {
		return false
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		fn()
	}()
	return true
}

// join waits for every goroutine started; none starts afterwards.
func (t *tasks) join() {
	t.mu.Lock()
	t.joined = true
	t.mu.Unlock()
	t.wg.Wait()
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
		flip, _ := e.work.state()
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
	if e.pin.cancel != nil {
		e.pin.cancel()
	}
	e.auth.stopWatch()
	err := e.flush(ctx)
	// franz-go's Close can take a while of its own (it gives a last client
	// metrics push up to 1s, which a broker holding requests delays): the
	// caller's context bounds Close, and the rest finishes behind it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.mu.Lock() // no client swap in progress
		e.work.shutDown()
		e.stopNow()
		cl := e.cur.Load().cl
		e.mu.Unlock()
		closeClient(cl)
		// Nothing is sent again now and nothing waits for a verdict: what
		// is left ends without waiting on the network.
		_ = e.work.wait(context.Background())
		e.tasks.join()
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
