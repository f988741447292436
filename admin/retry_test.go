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

	"github.com/kconsist/kconsist/consistency"
)

var errBehind = fmt.Errorf("wire: broker answered INCONSISTENT_METADATA: %w", consistency.ErrInconsistentMetadata)

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
}

// TestRetryBudget: a call failing because a broker stays behind runs
// again after franz-go's backoff until franz-go's retry timeout, measured
// from the first try, and no longer; another failure, or the caller's
// context ending, stops it at once. Time is synctest's.
func TestRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }), kgo.RetryTimeout(time.Second))
		require.NoError(t, err)
		defer cl.Close()
		c := &Client{cl: cl, budget: budgetOf(cl)}
		ctx := context.Background()

		start, tries := time.Now(), 0
		_, err = retry(ctx, c, func() (int, error) { tries++; return 0, errBehind })
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.Equal(t, 11, tries, "tries at 0, 100, ..., 1000 ms (as franz-go's: a try may start at the budget's end); the next would start past it")
		require.Equal(t, time.Second, time.Since(start))

		tries = 0
		_, err = retry(ctx, c, func() (int, error) {
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
		err = retryErr(ctx, c, func() error { tries++; return other })
		require.Same(t, other, err)
		require.Equal(t, 1, tries)

		// RequestRetries bounds the tries too: the first and n more.
		cl3, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.RequestRetries(3),
			kgo.RetryBackoffFn(func(int) time.Duration { return time.Millisecond }))
		require.NoError(t, err)
		defer cl3.Close()
		tries = 0
		err = retryErr(ctx, &Client{cl: cl3, budget: budgetOf(cl3)}, func() error { tries++; return errBehind })
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.Equal(t, 4, tries, "as franz-go: a try may be retried while tries <= RequestRetries")

		cctx, cancel := context.WithCancel(ctx)
		tries = 0
		got := retryEach(cctx, c, func() kadm.FindCoordinatorResponses {
			if tries++; tries == 2 {
				cancel()
			}
			return kadm.FindCoordinatorResponses{"g": {Name: "g", Err: errBehind}}
		})
		require.ErrorIs(t, got["g"].Err, consistency.ErrInconsistentMetadata)
		require.Equal(t, 2, tries, "the caller's context ended the waiting")
	})
}
