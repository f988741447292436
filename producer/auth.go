package producer

import (
	"sync"
	"sync/atomic"
	"time"

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
// *kconsist.AuthError (authFailed), and records produced while it holds
// fail at once, without reaching the client (authRefusal).
type authState struct {
	cancel func() // ends the subscription
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

// watchAuth subscribes e to a's failures.
func (e *engine) watchAuth(a link.AuthWatch) {
	if a != nil {
		e.auth.failing = a.Failing()
		e.auth.cancel = a.OnAuthFailure(e.authFailed)
	}
}

// authFailing reports whether a failure may hold: false without a watch,
// and false at the cost of one atomic load while the cluster accepts the
// client. Only when it is true need authRefusal or authRecheck be asked.
func (e *engine) authFailing() bool {
	f := e.auth.failing
	return f != nil && f.Load()
}

// stopAuth ends the subscription (Close).
func (e *engine) stopAuth() {
	if e.auth.cancel != nil {
		e.auth.cancel()
	}
}

// authFailed fails the records the current client holds: the cluster
// refuses the client, and franz-go would keep them until their delivery
// timeout. kgo's AbortBufferedRecords fails them once none is in flight
// (records sent before the failure keep their outcome, so sequence numbers
// stay exact); attribute turns its ErrAborting into an AuthError.
//
// A record may pass its send's check of the failure just before the failure
// is stored and reach the client only after the abort made for it ended; it
// would then wait for its delivery timeout. So an asynchronous send checks
// again once its record is in the client (authRecheck), which asks for
// another round here, and rounds go on while synchronous sends that checked
// before the failure may still be giving the client records.
func (e *engine) authFailed(error) {
	e.auth.mu.Lock()
	defer e.auth.mu.Unlock()
	if e.stop.Err() != nil { // Close closes the client
		return
	}
	if e.auth.aborting {
		e.auth.again = true
		return
	}
	cl := e.cur.Load().cl
	e.auth.aborting = e.tasks.start(func() {
		for abort := true; ; {
			if abort {
				// Close ends the wait (stop) and then closes the client.
				_ = cl.AbortBufferedRecords(e.stop)
			}
			syncing := e.auth.syncing.Load() > 0 && e.sess.Auth.AuthFailure() != nil
			again, goOn := e.nextAbortRound(syncing)
			if !goOn || !e.authPause() { // a failed pause: the producer is closing
				return
			}
			// A send refused at its check counts as syncing for a
			// moment too: abort (and have franz-go log it) only when
			// records did reach the client.
			abort = again || cl.BufferedProduceRecords() > 0
		}
	})
}

// nextAbortRound reports whether an abort goes on, and whether a round was
// asked for (again); syncing says synchronous sends may still be adding
// records. It decides under the lock authFailed takes, so a failure after
// an abort ended starts a new one.
func (e *engine) nextAbortRound(syncing bool) (again, goOn bool) {
	e.auth.mu.Lock()
	defer e.auth.mu.Unlock()
	again, e.auth.again = e.auth.again, false
	if e.stop.Err() != nil || !again && !syncing {
		e.auth.aborting = false
		return again, false
	}
	return again, true
}

// authPause spaces the rounds of an abort that synchronous sends keep going:
// their records reach the client within microseconds of their check. It
// reports false when the producer is closing.
func (e *engine) authPause() bool {
	t := time.NewTimer(authPauseEvery)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.stop.Done():
		return false
	}
}

// authRecheck runs after a record was given to the client, when
// authFailing says so: a failure stored since the send's check may have
// been aborted for before the record arrived.
func (e *engine) authRecheck() {
	if e.sess.Auth.AuthFailure() != nil {
		e.authFailed(nil)
	}
}

// authRefusal returns the error to fail a record to topic with, unsent,
// while the cluster refuses the client, or nil.
func (e *engine) authRefusal(topic string) error {
	if e.sess.Auth == nil {
		return nil
	}
	if err := e.sess.Auth.AuthFailure(); err != nil {
		return &kconsist.AuthError{Topic: topic, Err: err}
	}
	return nil
}
