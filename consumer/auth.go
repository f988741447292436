package consumer

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/internal/link"
)

// authState is a consumer's side of link.Consumer.Auth; used by the reading
// goroutine only.
type authState struct {
	watch link.AuthWatch
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
		return nil, &kconsist.AuthError{Err: err}
	}
	if a.proven {
		return cl.PollRecords(ctx, max), nil
	}
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := a.watch.OnAuthFailure(func(err error) { cancel(&kconsist.AuthError{Err: err}) })
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
