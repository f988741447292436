package admin

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// Calls franz-go gives up at once.
//
// A broker behind the factory's token answers INCONSISTENT_METADATA (or
// closes the connection, where its answer has no room for the error), and
// franz-go sends the request again within its retry budget. Not every
// request, though: for the coordinator requests it shards (OffsetFetch,
// DescribeGroups, DeleteGroups, DescribeTransactions,
// ConsumerGroupDescribe, ShareGroupDescribe, DescribeShareGroupOffsets)
// franz-go looks the coordinators up (FindCoordinator) once per call, and
// fails a shard whose coordinator it could not load, with no retry. Right
// after a metadata change, a broker that has not applied it yet so fails
// FetchOffsets, DescribeGroups, Lag and every other call that sends one,
// which the factory's token is there to prevent. (The coordinator
// requests franz-go issues one at a time, an OffsetCommit or a LeaveGroup,
// look theirs up inside its retry loop.) So the methods that may send one
// (the generator reads them from kadm's and franz-go's source, kadm.go)
// run their kadm call again, after franz-go's
// backoff, while it failed because a broker was behind the token on a
// request franz-go does not retry (the lookup, or the handshake of a
// connection, which may have been opened for it) and nothing of it was
// done, within franz-go's retry budget for a FindCoordinator
// (RequestRetries tries, and RetryTimeout, 30s by default, counted from
// the first try: a run again gets what is left of it as its context's
// deadline) and the caller's context. The other methods are franz-go's
// alone: it retries every request of theirs within its budget, and
// running them again would spend it twice. A call that partly succeeded
// (a DeleteGroups whose groups have several coordinators, one of them
// behind) is returned as it is, its failed parts satisfying
// errors.Is(err, consistency.ErrInconsistentMetadata), since running it
// again would run the done parts twice.
//
// What a run cannot tell: a connection's handshake (its first request, an
// ApiVersions carrying the token) answered INCONSISTENT_METADATA fails
// whichever request opened the connection, and the wire layer ends a
// connection at such an answer, so each of franz-go's tries after the
// first opens a new one. A coordinator's call whose request to the
// coordinator (not the lookup) failed there, after franz-go's retries, is
// run again too: its runs together stay within RetryTimeout from the
// first try and RequestRetries runs, though franz-go counts its own tries
// anew in each run.

// retryBudget is franz-go's retry budget of a client.
type retryBudget struct {
	backoff func(int) time.Duration
	timeout time.Duration // 0: none
	tries   int           // retries after the first try, as franz-go's RequestRetries
}

// budgetOf reads cl's retry options, falling back to franz-go's defaults
// for a value it does not give.
func budgetOf(cl *kgo.Client) retryBudget {
	b := retryBudget{timeout: 30 * time.Second, tries: 20, backoff: func(int) time.Duration { return 250 * time.Millisecond }}
	if f, ok := cl.OptValue(kgo.RetryBackoffFn).(func(int) time.Duration); ok && f != nil {
		b.backoff = f
	}
	if f, ok := cl.OptValue(kgo.RetryTimeoutFn).(func(int16) time.Duration); ok && f != nil {
		// franz-go asks it with the key of the request it retries: the
		// calls run again here failed on a coordinator lookup.
		b.timeout = f(int16(kmsg.FindCoordinator))
	}
	switch n := cl.OptValue(kgo.RequestRetries).(type) { // franz-go keeps an int64
	case int64:
		b.tries = int(n)
	case int:
		b.tries = n
	}
	return b
}

// retry runs call with ctx and returns what it returns, running it again
// as the comment above says, each time with a context that ends with the
// budget's time. A run again that the budget's time ended, not ctx, gives
// way to the failure before it: the caller learns that a broker stayed
// behind, not that a deadline of its own passed.
func retry[R any](ctx context.Context, c *Client, call func(context.Context) (R, error)) (R, error) {
	start := time.Now()
	r, err := call(ctx)
	for try := 1; c.again(ctx, behind(err), start, try); try++ {
		rctx, cancel := c.budget.within(ctx, start)
		r2, err2 := call(rctx)
		spent := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if spent && endedUndone(err2) {
			return r, err
		}
		r, err = r2, err2
	}
	return r, err
}

// retryErr is retry for a call that returns only an error.
func retryErr(ctx context.Context, c *Client, call func(context.Context) error) error {
	_, err := retry(ctx, c, func(ctx context.Context) (struct{}, error) { return struct{}{}, call(ctx) })
	return err
}

// retryEach is retry for a call whose errors are in its result, one per
// group or key (see eachBehind); a run again that the budget's time ended
// with nothing done gives way to the result before it, as in retry.
func retryEach[R any](ctx context.Context, c *Client, call func(context.Context) R) R {
	start := time.Now()
	r := call(ctx)
	for try := 1; c.again(ctx, eachBehind(r), start, try); try++ {
		rctx, cancel := c.budget.within(ctx, start)
		r2 := call(rctx)
		spent := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if spent && eachEndedUndone(r2) {
			return r
		}
		r = r2
	}
	return r
}

// endedUndone reports whether err is a run's failure at the budget's
// deadline with nothing of it done: the deadline's error, and no part of
// the call that succeeded (a *kadm.ShardErrors with AllFailed false).
func endedUndone(err error) bool {
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	se, ok := errors.AsType[*kadm.ShardErrors](err)
	return !ok || se.AllFailed
}

// within returns ctx ending at the budget's time, counted from start.
func (b retryBudget) within(ctx context.Context, start time.Time) (context.Context, context.CancelFunc) {
	if b.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithDeadline(ctx, start.Add(b.timeout))
}

// behind reports whether err says a broker was behind the token on a
// request franz-go does not retry, and nothing of the call was done.
func behind(err error) bool {
	if err == nil || !notRetried(err) {
		return false
	}
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && !se.AllFailed {
		return false
	}
	return true
}

// notRetried reports whether err holds a broker's INCONSISTENT_METADATA
// (or a close taken for it) on a request franz-go gives up at once: a
// FindCoordinator, which franz-go sends once per call, or the ApiVersions
// of a connection's handshake, which may have been opened for one (the
// connection cannot tell; for any other request a handshake failure was
// retried by franz-go, and a run again is then bounded by the budget's
// time). Any other request franz-go retried within its own budget.
//
// The error is the wire layer's, known here by its RequestKey method.
func notRetried(err error) bool {
	if k, ok := err.(interface{ RequestKey() int16 }); ok && errors.Is(err, consistency.ErrInconsistentMetadata) {
		key := k.RequestKey()
		return key == int16(kmsg.FindCoordinator) || key == int16(kmsg.ApiVersions)
	}
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		if u := e.Unwrap(); u != nil {
			return notRetried(u)
		}
	case interface{ Unwrap() []error }:
		for _, u := range e.Unwrap() {
			if u != nil && notRetried(u) {
				return true
			}
		}
	}
	return false
}

// eachBehind reports whether every part of r failed because a broker was
// behind the token. r is the result of one of kadm's methods that return
// no error of their own (TestRetryEachKnowsEveryResult lists them).
func eachBehind(r any) bool {
	errs := partErrs(r)
	for _, err := range errs {
		if !behind(err) {
			return false
		}
	}
	return len(errs) > 0
}

// partErrs returns the error of each part of r, a result of one of kadm's
// methods that return no error of their own.
func partErrs(r any) []error {
	var errs []error
	switch r := r.(type) {
	case kadm.FetchOffsetsResponses:
		for _, x := range r {
			errs = append(errs, x.Err)
		}
	case kadm.FindCoordinatorResponses:
		for _, x := range r {
			errs = append(errs, x.Err)
		}
	}
	return errs
}

// eachEndedUndone is endedUndone for a result eachBehind reads: every
// part of r failed, and the budget's deadline ended at least one of them
// (a part answered otherwise as the deadline came is news to keep).
func eachEndedUndone(r any) bool {
	deadline := false
	for _, err := range partErrs(r) {
		if err == nil {
			return false
		}
		deadline = deadline || errors.Is(err, context.DeadlineExceeded)
	}
	return deadline
}

// again reports whether a call that failed (or not: failed says) on its
// try-th try, first made at start, is to be made again, after waiting out
// the backoff.
func (c *Client) again(ctx context.Context, failed bool, start time.Time, try int) bool {
	if !failed || try > c.budget.tries {
		return false
	}
	d := c.budget.backoff(try)
	if c.budget.timeout > 0 && time.Since(start)+d >= c.budget.timeout {
		return false // the run would start with the budget spent
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		// A run that would start with the budget spent (the timer fired
		// late, or at its end) is not made: franz-go would still send
		// one more lookup under its client's context.
		return c.budget.timeout <= 0 || time.Since(start) < c.budget.timeout
	}
}
