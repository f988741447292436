package consumer

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/bridge"
)

// AuthError is the error of a poll that ended because the cluster refuses
// the consumer's credentials or TLS settings. It unwraps to the cause, so
// errors.Is(err, kerr.SaslAuthenticationFailed) or errors.As into an x509
// error work on it.
//
// franz-go retries a connection that fails SASL or certificate checks as
// it would a broker that is down, so a poll would wait for its whole
// context and the cause be only in the logs. The Java consumer's poll
// throws SaslAuthenticationException or SslAuthenticationException
// instead; a consumer of a factory whose security settings are its own
// does the same: Poll (and Records) return the failure as soon as it is
// found, and at once while it holds. The factory checks again now and
// then; polls consume again once the cluster accepts the client.
type AuthError struct{ Err error }

func (e *AuthError) Error() string {
	return fmt.Sprintf("consumer: the cluster refuses the client: %v", e.Err)
}

// Unwrap returns the cause.
func (e *AuthError) Unwrap() error { return e.Err }

// authState is a consumer's side of follow.Auth; used by the reading
// goroutine only.
type authState struct {
	watch bridge.AuthWatch
	// proven: a poll fetched something, so the client's connections
	// work; polls then no longer subscribe to failures (which costs a
	// context and a subscription per poll), a failure found later shows
	// at the next poll.
	proven bool
}

// poll is cl.PollRecords ending early, with the failure, if one is found
// while it waits.
func (c *Consumer[K, V]) poll(cl *kgo.Client, ctx context.Context, max int) (kgo.Fetches, error) {
	a := &c.auth
	if a.watch == nil {
		return cl.PollRecords(ctx, max), nil
	}
	if err := a.watch.AuthFailure(); err != nil {
		return nil, &AuthError{err}
	}
	if a.proven {
		return cl.PollRecords(ctx, max), nil
	}
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := a.watch.OnAuthFailure(func(err error) { cancel(&AuthError{err}) })
	defer stop()
	fs := cl.PollRecords(pctx, max)
	if ctx.Err() == nil && pctx.Err() != nil {
		return nil, context.Cause(pctx)
	}
	if fs.NumRecords() > 0 {
		a.proven = true
	}
	return fs, nil
}
