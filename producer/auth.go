package producer

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// AuthError is returned for a record that failed because the cluster
// refuses the producer's credentials or TLS settings. It unwraps to the
// cause, so errors.Is(err, kerr.SaslAuthenticationFailed) or errors.As into
// an x509 error work on it.
//
// franz-go retries a connection that fails SASL or certificate checks as
// it would a broker that is down, so records wait until their delivery
// timeout and fail with ErrRecordTimeout, the cause only in the logs. The
// Java client fails the send at once with SaslAuthenticationException or
// SslAuthenticationException; a producer of a factory whose security
// settings are its own does the same: records buffered when the failure is
// found fail with it, and records produced while it holds fail at once,
// without reaching the client. The factory checks again now and then, and
// records go through once the cluster accepts the client.
type AuthError struct {
	Topic string
	Err   error // the authentication or TLS failure
	// Gave is what franz-go failed the record with (ErrAborting when the
	// failure was found while it held the record), or nil if the record
	// was never given to it.
	Gave error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("producer: record to %s not delivered: the cluster refuses the client: %v", e.Topic, e.Err)
}

// Unwrap returns the cause and, if any, franz-go's error.
func (e *AuthError) Unwrap() []error {
	if e.Gave == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Gave}
}

// authState is a producer's side of follow.Auth.
type authState struct {
	cancel func() // ends the subscription
	// aborting is set (under engine.omu) while buffered records are
	// being failed for a failure.
	aborting bool
}

// watchAuth subscribes e to a's failures.
func (e *engine) watchAuth(a authWatch) {
	if a != nil {
		e.auth.cancel = a.OnAuthFailure(e.authFailed)
	}
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
func (e *engine) authFailed(error) {
	e.omu.Lock()
	defer e.omu.Unlock()
	if e.auth.aborting || e.shut {
		return
	}
	cl := e.cur.Load().cl
	e.auth.aborting = e.goLocked(func() {
		// Close ends the wait (stop) and then closes the client.
		_ = cl.AbortBufferedRecords(e.stop)
		e.omu.Lock()
		e.auth.aborting = false
		e.omu.Unlock()
	})
}

// authRefusal returns the error to fail a record to topic with, unsent,
// while the cluster refuses the client, or nil.
func (e *engine) authRefusal(topic string) error {
	if e.follow.Auth == nil {
		return nil
	}
	if err := e.follow.Auth.AuthFailure(); err != nil {
		return &AuthError{Topic: topic, Err: err}
	}
	return nil
}

// authAttributed returns the error to report for x, which franz-go gave up
// with err, if the cluster refuses the client; nil otherwise.
func (e *engine) authAttributed(x *inflight, err error) error {
	if e.follow.Auth == nil || !givenUp(err) {
		return nil
	}
	if cause := e.follow.Auth.AuthFailure(); cause != nil {
		return &AuthError{Topic: x.rec.Topic, Err: cause, Gave: err}
	}
	return nil
}

// authCause adds the failure that holds, if any, to err, the error of a
// Produce whose context ended first.
func (e *engine) authCause(err error) error {
	if e.follow.Auth == nil {
		return err
	}
	if cause := e.follow.Auth.AuthFailure(); cause != nil {
		return fmt.Errorf("%w: the cluster refuses the client: %w", err, cause)
	}
	return err
}

// givenUp reports whether err is franz-go giving a record up without a
// broker's answer: what an authentication failure shows as.
func givenUp(err error) bool {
	return errors.Is(err, kgo.ErrAborting) || errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries)
}
