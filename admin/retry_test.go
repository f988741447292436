package admin

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/wire"
)

// errBehind is a coordinator lookup's failure, as franz-go returns it:
// the wire layer's error, wrapped.
var errBehind = fmt.Errorf("unable to load coordinator: %w",
	&wire.InconsistentMetadataError{Addr: "b:9092", APIKey: int16(kmsg.FindCoordinator), Sent: 105, BrokerAt: 100})

// TestRetryEachKnowsEveryResult: every kadm method that returns a result
// and no error of its own is one whose parts eachBehind reads, so a kadm
// upgrade that adds one is looked at rather than never run again.
func TestRetryEachKnowsEveryResult(t *testing.T) {
	typ := reflect.TypeFor[*kadm.Client]()
	checked := 0
	for m := range typ.Methods() {
		ft := m.Type
		if ft.NumOut() != 1 || ft.Out(0) == reflect.TypeFor[error]() {
			continue
		}
		out := ft.Out(0)
		if out.Kind() != reflect.Map || out.Elem().Kind() != reflect.Struct {
			t.Errorf("kadm.Client.%s returns %v: eachBehind cannot read it", m.Name, out)
			continue
		}
		errField, ok := out.Elem().FieldByName("Err")
		if !ok || errField.Type != reflect.TypeFor[error]() {
			t.Errorf("kadm.Client.%s returns %v, whose parts have no Err", m.Name, out)
			continue
		}
		r := reflect.MakeMap(out)
		part := reflect.New(out.Elem()).Elem()
		part.FieldByIndex(errField.Index).Set(reflect.ValueOf(errBehind))
		r.SetMapIndex(reflect.ValueOf("k"), part)
		require.True(t, eachBehind(r.Interface()), "kadm.Client.%s: a result whose every part was behind is not run again", m.Name)
		part.FieldByIndex(errField.Index).Set(reflect.Zero(errField.Type))
		r.SetMapIndex(reflect.ValueOf("ok"), part)
		require.False(t, eachBehind(r.Interface()), "kadm.Client.%s: a result with a part done is run again", m.Name)
		checked++
	}
	require.Positive(t, checked)
}

// TestBehind: a call is run again only when it failed because a broker was
// behind the token and nothing of it was done.
func TestBehind(t *testing.T) {
	require.False(t, behind(nil))
	require.False(t, behind(errors.New("other")))
	require.True(t, behind(errBehind))
	require.True(t, behind(&kadm.ShardErrors{AllFailed: true, Errs: []kadm.ShardError{{Err: errBehind}}}))
	require.False(t, behind(&kadm.ShardErrors{AllFailed: false, Errs: []kadm.ShardError{{Err: errBehind}}}),
		"a call that partly succeeded would run its done parts twice")
	// A connection's handshake may have been opened for a coordinator
	// lookup: it is run again too (within the budget's time).
	require.True(t, behind(&wire.InconsistentMetadataError{APIKey: int16(kmsg.ApiVersions)}))
	// franz-go retried any other request within its own budget, spent by
	// the time the call returns: running it again would spend it twice.
	for _, key := range []kmsg.Key{kmsg.CreateTopics, kmsg.Metadata, kmsg.DescribeGroups, kmsg.OffsetFetch, kmsg.ListOffsets} {
		err := fmt.Errorf("wrapped: %w", &wire.InconsistentMetadataError{APIKey: int16(key)})
		require.True(t, errors.Is(err, consistency.ErrInconsistentMetadata))
		require.False(t, behind(err), "api key %v: franz-go retried it already", key)
		require.False(t, behind(&kadm.ShardErrors{AllFailed: true, Errs: []kadm.ShardError{{Err: err}}}), "api key %v", key)
	}
	require.False(t, behind(fmt.Errorf("no key: %w", consistency.ErrInconsistentMetadata)))
	require.True(t, behind(&kadm.ShardErrors{AllFailed: true, Errs: []kadm.ShardError{
		{Err: &wire.InconsistentMetadataError{APIKey: int16(kmsg.DescribeGroups)}}, {Err: errBehind}}}),
		"all failed, one of them on a coordinator lookup")
}

// TestRetryTimeoutIsFindCoordinators: franz-go asks RetryTimeoutFn with
// the key of the request it retries and never for Produce (key 0); the
// calls run again here failed on a coordinator lookup, so its timeout is
// FindCoordinator's, not Produce's 0 (which would take the time bound
// away).
func TestRetryTimeoutIsFindCoordinators(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.RetryTimeoutFn(func(key int16) time.Duration {
				switch key {
				case int16(kmsg.Produce):
					return 0
				case int16(kmsg.FindCoordinator):
					return time.Second
				}
				return time.Hour
			}))
		require.NoError(t, err)
		defer cl.Close()
		c := &Client{cl: cl, budget: budgetOf(cl)}
		start, tries := time.Now(), 0
		_, err = retry(context.Background(), c, func(context.Context) (int, error) { tries++; return 0, errBehind })
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.Equal(t, 900*time.Millisecond, time.Since(start))
		require.Equal(t, 10, tries)
	})
}

// TestRetryWithinBudgetTime: a run again gets what is left of the budget's
// time as its context's deadline (franz-go would otherwise start a
// timeout of its own for each run), and when that deadline, not the
// caller's context, ends a run that failed, the failure before it is what
// the caller gets: a broker stayed behind. A run that succeeded as the
// deadline came is returned.
func TestRetryWithinBudgetTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := budgetClient(t)
		ctx := context.Background()
		var err error

		start, tries := time.Now(), 0
		var deadlines []time.Duration
		_, err = retry(ctx, c, func(ctx context.Context) (int, error) {
			if tries++; tries == 1 {
				_, ok := ctx.Deadline()
				require.False(t, ok, "the first run has the caller's context")
				return 0, errBehind
			}
			dl, ok := ctx.Deadline()
			require.True(t, ok)
			deadlines = append(deadlines, dl.Sub(start))
			<-ctx.Done() // a run that franz-go keeps retrying, until the deadline
			return 0, fmt.Errorf("retrying: %w", ctx.Err())
		})
		require.Same(t, errBehind, err, "the failure before the run the deadline ended")
		require.Equal(t, 2, tries)
		require.Equal(t, []time.Duration{time.Second}, deadlines)
		require.Equal(t, time.Second, time.Since(start))

		tries = 0
		n, err := retry(ctx, c, func(ctx context.Context) (int, error) {
			if tries++; tries == 1 {
				return 0, errBehind
			}
			<-ctx.Done()
			return 7, nil
		})
		require.NoError(t, err)
		require.Equal(t, 7, n)

		// The caller's own deadline is the caller's error.
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		tries = 0
		_, err = retry(cctx, c, func(ctx context.Context) (int, error) {
			if tries++; tries == 1 {
				return 0, errBehind
			}
			<-ctx.Done()
			return 0, ctx.Err()
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)

		// A run the deadline ended after part of it was done is returned:
		// its done part is what the caller must learn.
		tries = 0
		partly := &kadm.ShardErrors{Name: "groups", AllFailed: false, Errs: []kadm.ShardError{{Err: context.DeadlineExceeded}}}
		_, err = retry(ctx, c, func(ctx context.Context) (int, error) {
			if tries++; tries == 1 {
				return 0, errBehind
			}
			<-ctx.Done()
			return 1, partly
		})
		require.Same(t, partly, err)
		// So is another answer that came as the deadline did.
		tries = 0
		notFound := errors.New("GROUP_ID_NOT_FOUND")
		_, err = retry(ctx, c, func(ctx context.Context) (int, error) {
			if tries++; tries == 1 {
				return 0, errBehind
			}
			<-ctx.Done()
			return 0, notFound
		})
		require.Same(t, notFound, err)

		// No run starts with the budget spent: with a backoff that lands
		// on the budget's end, every run again has time left.
		tries = 0
		_, _ = retry(ctx, c, func(ctx context.Context) (int, error) {
			tries++
			require.NoError(t, ctx.Err(), "run %d started with its context done", tries)
			return 0, errBehind
		})
		require.Equal(t, 10, tries)

		// retryEach: a run the deadline ended with nothing done gives way
		// to the result before it.
		tries = 0
		first := kadm.FindCoordinatorResponses{"g": {Name: "g", Err: errBehind}}
		got := retryEach(ctx, c, func(ctx context.Context) kadm.FindCoordinatorResponses {
			if tries++; tries == 1 {
				return first
			}
			<-ctx.Done()
			return kadm.FindCoordinatorResponses{"g": {Name: "g", Err: ctx.Err()}}
		})
		require.Same(t, errBehind, got["g"].Err)
		// ... but a part answered otherwise as the deadline came is kept.
		tries = 0
		got = retryEach(ctx, c, func(ctx context.Context) kadm.FindCoordinatorResponses {
			if tries++; tries == 1 {
				return first
			}
			<-ctx.Done()
			return kadm.FindCoordinatorResponses{"g": {Name: "g", Err: notFound}}
		})
		require.Same(t, notFound, got["g"].Err)
	})
}

// TestRetryBudget: a call failing because a broker stays behind runs
// again after franz-go's backoff until franz-go's retry timeout, measured
// from the first try, and no longer; another failure, or the caller's
// context ending, stops it at once. Time is synctest's.
func TestRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := budgetClient(t)
		ctx := context.Background()
		var err error

		start, tries := time.Now(), 0
		_, err = retry(ctx, c, func(context.Context) (int, error) { tries++; return 0, errBehind })
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.Equal(t, 10, tries, "tries at 0, 100, ..., 900 ms; one at 1000 ms would start with the budget spent")
		require.Equal(t, 900*time.Millisecond, time.Since(start), "no backoff is waited out for a run that would not be made")

		tries = 0
		_, err = retry(ctx, c, func(context.Context) (int, error) {
			tries++
			if tries < 3 {
				return 0, errBehind
			}
			return 7, nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, tries)

		tries = 0
		other := errors.New("other")
		err = retryErr(ctx, c, func(context.Context) error { tries++; return other })
		require.Same(t, other, err)
		require.Equal(t, 1, tries)

		// RequestRetries bounds the tries too: the first and n more.
		cl3, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RequestRetries(3),
			kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }))
		require.NoError(t, err)
		defer cl3.Close()
		tries = 0
		err = retryErr(ctx, &Client{cl: cl3, budget: budgetOf(cl3)}, func(context.Context) error { tries++; return errBehind })
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.Equal(t, 4, tries, "as franz-go: a try may be retried while tries <= RequestRetries")

		cctx, cancel := context.WithCancel(ctx)
		tries = 0
		got := retryEach(cctx, c, func(context.Context) kadm.FindCoordinatorResponses {
			if tries++; tries == 2 {
				cancel()
			}
			return kadm.FindCoordinatorResponses{"g": {Name: "g", Err: errBehind}}
		})
		require.ErrorIs(t, got["g"].Err, consistency.ErrInconsistentMetadata)
		require.Equal(t, 2, tries, "the caller's context ended the waiting")
	})
}

// budgetClient is a Client whose budget is a backoff of 100 ms and a retry
// timeout of 1 s; its franz-go client is closed when t ends.
func budgetClient(t *testing.T) *Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }), kgo.RetryTimeout(time.Second))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return &Client{cl: cl, budget: budgetOf(cl)}
}
