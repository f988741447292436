package producer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/internal/link"
)

// authPauseEvery spaces the rounds of an abort that synchronous sends keep
// going (see authPause).
const authPauseEvery = 5 * time.Millisecond

// authState is a producer's side of its session's link.AuthWatch.
//
// franz-go retries a connection that fails SASL or certificate checks as
// it would a broker that is down, so records would wait until their
// delivery timeout. Records buffered when the failure is found fail with a
// *kconsist.AuthError (failed), and records produced while it holds
// fail at once, without reaching the client (refusal).
//
// It meets the engine through three values set once (watch): the current
// client, the goroutines Close joins, and the context Close ends.
type authState struct {
	w      link.AuthWatch     // nil without a watch
	client func() *kgo.Client // the current client
	tasks  *tasks
	stop   context.Context // done once Close closes the last client
	cancel func()          // ends the subscription
	// failing is the watch's flag (nil without a watch): set whenever a
	// failure holds, so that a record costs one atomic load and calls
	// the watch only while the flag is set.
	failing *atomic.Bool
	// mu guards aborting and again. aborting is set while buffered
	// records are being failed for a failure; again, that another
	// failure or a record given to the client meanwhile asks for one
	// more round.
	mu              sync.Mutex
	aborting, again bool
	// syncing counts synchronous sends between their check of the
	// failure and the end of their ProduceSync: their records may reach
	// the client only after an abort made for them ended.
	syncing atomic.Int32
}

// watch subscribes a to w's failures, which it meets with the engine's
// current client, goroutines and stop; before the engine is used.
func (a *authState) watch(w link.AuthWatch, client func() *kgo.Client, t *tasks, stop context.Context) {
	a.w, a.client, a.tasks, a.stop = w, client, t, stop
	if w != nil {
		a.failing = w.Failing()
		a.cancel = w.OnAuthFailure(a.failed)
	}
}

// mayFail reports whether a failure may hold: false without a watch, and
// false at the cost of one atomic load while the cluster accepts the
// client. Only when it is true need refusal or recheck be asked.
func (a *authState) mayFail() bool {
	f := a.failing
	return f != nil && f.Load()
}

// stopWatch ends the subscription (Close).
func (a *authState) stopWatch() {
	if a.cancel != nil {
		a.cancel()
	}
}

// failed fails the records the current client holds: the cluster
// refuses the client, and franz-go would keep them until their delivery
// timeout. kgo's AbortBufferedRecords fails them once none is in flight
// (records sent before the failure keep their outcome, so sequence numbers
// stay exact); attribute turns its ErrAborting into an AuthError.
//
// A record may pass its send's check of the failure just before the failure
// is stored and reach the client only after the abort made for it ended; it
// would then wait for its delivery timeout. So an asynchronous send checks
// again once its record is in the client (recheck), which asks for
// another round here, and rounds go on while synchronous sends that checked
// before the failure may still be giving the client records.
func (a *authState) failed(error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stop.Err() != nil { // Close closes the client
		return
	}
	if a.aborting {
		a.again = true
		return
	}
	cl := a.client()
	a.aborting = a.tasks.start(func() {
		for abort := true; ; {
			if abort {
				// Close ends the wait (stop) and then closes the client.
				_ = cl.AbortBufferedRecords(a.stop)
			}
			syncing := a.syncing.Load() > 0 && a.w.AuthFailure() != nil
			again, goOn := a.nextRound(syncing)
			if !goOn || !a.pause() { // a failed pause: the producer is closing
				return
			}
			// A send refused at its check counts as syncing for a
			// moment too: abort (and have franz-go log it) only when
			// records did reach the client.
			abort = again || cl.BufferedProduceRecords() > 0
		}
	})
}

// nextRound reports whether an abort goes on, and whether a round was
// asked for (again); syncing says synchronous sends may still be adding
// records. It decides under the lock failed takes, so a failure after an
// abort ended starts a new one.
func (a *authState) nextRound(syncing bool) (again, goOn bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	again, a.again = a.again, false
	if a.stop.Err() != nil || !again && !syncing {
		a.aborting = false
		return again, false
	}
	return again, true
}

// pause spaces the rounds of an abort that synchronous sends keep going:
// their records reach the client within microseconds of their check. It
// reports false when the producer is closing.
func (a *authState) pause() bool {
	t := time.NewTimer(authPauseEvery)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-a.stop.Done():
		return false
	}
}

// recheck runs after a record was given to the client, when mayFail says
// so: a failure stored since the send's check may have been aborted for
// before the record arrived.
func (a *authState) recheck() {
	if a.w.AuthFailure() != nil {
		a.failed(nil)
	}
}

// refusal returns the error to fail a record to topic with, unsent, while
// the cluster refuses the client, or nil.
func (a *authState) refusal(topic string) error {
	if a.w == nil {
		return nil
	}
	if err := a.w.AuthFailure(); err != nil {
		return &kconsist.AuthError{Topic: topic, Err: err}
	}
	return nil
}
