package admin

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
)

// Calls franz-go gives up at once.
//
// A broker behind the factory's token answers INCONSISTENT_METADATA (or
// closes the connection, where its answer has no room for the error), and
// franz-go sends the request again within its retry budget. Not every
// request, though: franz-go looks up a group's or a transaction's
// coordinator (FindCoordinator) once per call, and fails a call whose
// coordinator it could not load, with no retry. Right after a metadata
// change, a broker that has not applied it yet so fails FetchOffsets,
// DescribeGroups, CommitOffsets and every other call that needs a
// coordinator, which the factory's token is there to prevent. So every
// method runs its kadm call again, after franz-go's backoff, while the
// call failed because a broker was behind the token and nothing of it was
// done, within franz-go's retry budget (RequestRetries tries and
// RetryTimeout, 30s by default, from the first try) and the caller's
// context. A call that failed after franz-go's own retries spent that
// budget is not run again; one that partly succeeded (a DeleteGroups whose
// groups have several coordinators, one of them behind) is returned as it
// is, its failed parts satisfying errors.Is(err,
// consistency.ErrInconsistentMetadata), since running it again would run
// the done parts twice.

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
		b.timeout = f(0)
	}
	switch n := cl.OptValue(kgo.RequestRetries).(type) { // franz-go keeps an int64
	case int64:
		b.tries = int(n)
	case int:
		b.tries = n
	}
	return b
}

// retry runs call and returns what it returns, running it again as the
// comment above says.
func retry[R any](ctx context.Context, c *Client, call func() (R, error)) (R, error) {
	start := time.Now()
	for try := 1; ; try++ {
		r, err := call()
		if !c.again(ctx, behind(err), start, try) {
			return r, err
		}
	}
}

// retryErr is retry for a call that returns only an error.
func retryErr(ctx context.Context, c *Client, call func() error) error {
	_, err := retry(ctx, c, func() (struct{}, error) { return struct{}{}, call() })
	return err
}

// retryEach is retry for a call whose errors are in its result, one per
// group or key (see eachBehind).
func retryEach[R any](ctx context.Context, c *Client, call func() R) R {
	start := time.Now()
	for try := 1; ; try++ {
		r := call()
		if !c.again(ctx, eachBehind(r), start, try) {
			return r
		}
	}
}

// behind reports whether err says a broker was behind the token and
// nothing of the call was done.
func behind(err error) bool {
	if err == nil || !errors.Is(err, consistency.ErrInconsistentMetadata) {
		return false
	}
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && !se.AllFailed {
		return false
	}
	return true
}

// eachBehind reports whether every part of r failed because a broker was
// behind the token. r is the result of one of kadm's methods that return
// no error of their own (TestRetryEachKnowsEveryResult lists them).
func eachBehind(r any) bool {
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
	for _, err := range errs {
		if !behind(err) {
			return false
		}
	}
	return len(errs) > 0
}

// again reports whether a call that failed (or not: failed says) on its
// try-th try, first made at start, is to be made again, after waiting out
// the backoff.
func (c *Client) again(ctx context.Context, failed bool, start time.Time, try int) bool {
	if !failed || try > c.budget.tries {
		return false
	}
	d := c.budget.backoff(try)
	if c.budget.timeout > 0 && time.Since(start)+d > c.budget.timeout {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
