package wire

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Questions to the cluster.
//
// The Emulator's questions (DescribeQuorum, a broker's ApiVersions) run on
// goroutines of the Emulator's own, never on the goroutine of the
// connection that needs the answer: that goroutine is kgo's, writing or
// reading for every request of the connection. A connection waits for an
// answer until its own bound (the request's write deadline, the wait
// bounds of emulate_policy.go) and goes on without it; the question goes on
// too, bounded by EmulationConfig.AskTimeout, and what it learns still
// reaches the store and the brokers' views.
//
// A question is asked by at most one goroutine at a time. A caller joins
// the flight under way; a caller that needs an answer given after its call
// began (a write's answer needs a committed offset read after it) joins the
// next flight, which starts when the one under way ends. So a hung
// DescribeQuorum costs one goroutine, not one per request.

// question is one kind of question: run asks it, applies the answer and
// reports whether it got one.
type question struct {
	run func(ctx context.Context) bool

	mu      sync.Mutex
	running *flight // the flight under way; nil: none
	next    *flight // the flight to start after it; nil: none
}

// flight is one asking of a question. done is closed when it ends; ok,
// read after done is closed, reports whether it got an answer.
type flight struct {
	done chan struct{}
	ok   bool
}

func newFlight() *flight { return &flight{done: make(chan struct{})} }

// asker runs questions; one per Emulator.
type asker struct {
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc

	mu     sync.Mutex // after question.mu
	closed bool
	wg     sync.WaitGroup
}

func newAsker(timeout time.Duration) *asker {
	ctx, cancel := context.WithCancel(context.Background())
	return &asker{timeout: timeout, ctx: ctx, cancel: cancel}
}

// closedFlight is what a question asked after close returns: over,
// without an answer.
var closedFlight = func() *flight {
	f := newFlight()
	close(f.done)
	return f
}()

// ask returns the flight that answers q: the one under way, or, when
// fresh, one that starts after this call.
func (a *asker) ask(q *question, fresh bool) *flight {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.running == nil:
		f := newFlight()
		if !a.start(q, f) {
			return closedFlight
		}
		q.running = f
		return f
	case !fresh:
		return q.running
	case q.next == nil:
		q.next = newFlight()
	}
	return q.next
}

// joinRunning returns the flight of q under way, or nil.
func (a *asker) joinRunning(q *question) *flight {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running == nil {
		return nil
	}
	return q.running
}

// start runs flight f of q, and the flights queued behind it, on a
// goroutine Close waits for. q.mu is held.
func (a *asker) start(q *question, f *flight) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		for f != nil {
			ctx, cancel := context.WithTimeout(a.ctx, a.timeout)
			f.ok = q.run(ctx)
			cancel()
			close(f.done)
			q.mu.Lock()
			f = q.next
			q.running, q.next = f, nil
			q.mu.Unlock()
		}
	}()
	return true
}

// spawn runs fn on a goroutine Close waits for, with a context Close
// cancels; it reports false, and runs nothing, after close.
func (a *asker) spawn(fn func(ctx context.Context)) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		fn(a.ctx)
	}()
	return true
}

// close ends the questions under way and waits for their goroutines;
// later questions are not asked.
func (a *asker) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// closing reports whether close began: the questions' context is
// canceled.
func (a *asker) closing() bool { return a.ctx.Err() != nil }

// errBound: a wait reached its bound before the answer came.
var errBound = errors.New("wire: no answer within the request's bound")

// await waits for done until end (zero: no end). With stop, it also looks
// every stopEvery whether the wait must end for its connection (closed,
// its write deadline passed) and returns stop's error.
func await(done <-chan struct{}, end time.Time, stop func() error) error {
	select {
	case <-done:
		return nil
	default:
	}
	for {
		step := stopEvery
		if !end.IsZero() {
			left := time.Until(end)
			if left <= 0 {
				return errBound
			}
			if stop == nil || left < step {
				step = left
			}
		}
		t := time.NewTimer(step)
		select {
		case <-done:
			t.Stop()
			return nil
		case <-t.C:
		}
		if stop != nil {
			if err := stop(); err != nil {
				return err
			}
		}
	}
}
