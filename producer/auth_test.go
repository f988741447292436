package producer

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/rebootstrap"
)

// names is a link.ClusterNames that says what it is given.
type names struct {
	now string
	of  map[uint64]string
}

func (n names) Cluster() string             { return n.now }
func (n names) ClusterOf(gen uint64) string { return n.of[gen] }

// racingAuth is an AuthWatch whose failure is stored, and its subscribers
// run to the end, just after the first check of a send read nil: the
// record reaches the client only after the abort made for the failure
// ended.
type racingAuth struct {
	e      *engine
	cause  error
	failed atomic.Bool
	once   sync.Once
	mu     sync.Mutex
	subs   []func(error)
}

func (a *racingAuth) AuthFailure() error {
	if a.failed.Load() {
		return a.cause
	}
	a.once.Do(func() {
		a.failed.Store(true)
		a.mu.Lock()
		subs := slices.Clone(a.subs)
		a.mu.Unlock()
		for _, fn := range subs {
			fn(a.cause)
		}
		// Wait for the abort those started, so that it ends before
		// the record reaches the client. (One that goes on for
		// synchronous sends still checking, as it should, ends
		// only once the record came: wait for it a little.)
		for range 50 {
			a.e.auth.mu.Lock()
			busy := a.e.auth.aborting
			a.e.auth.mu.Unlock()
			if !busy {
				break
			}
			time.Sleep(time.Millisecond)
		}
	})
	return nil // this check read before the failure was stored
}

// Failing is always set: every check of a send asks AuthFailure, whose
// first answer is the racing one.
func (a *racingAuth) Failing() *atomic.Bool {
	var f atomic.Bool
	f.Store(true)
	return &f
}

func (a *racingAuth) OnAuthFailure(fn func(error)) func() {
	a.mu.Lock()
	a.subs = append(a.subs, fn)
	a.mu.Unlock()
	return func() {}
}

// deadSeed is a loopback address nothing listens on: the client never
// learns the topic, so a record waits in it until it is failed.
func deadSeed(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestAuthFailureRacingASend: a failure found while a record is between
// its send's check and the client fails the record at once with the cause,
// asynchronous or synchronous, instead of leaving it until its context or
// delivery timeout ends (a flake of TestUntrustedCAFailsFast in factory).
func TestAuthFailureRacingASend(t *testing.T) {
	for _, isSync := range []bool{false, true} {
		name := "async"
		if isSync {
			name = "sync"
		}
		t.Run(name, func(t *testing.T) {
			cl, err := kgo.NewClient(kgo.SeedBrokers(deadSeed(t)), kgo.RecordDeliveryTimeout(time.Minute))
			require.NoError(t, err)
			p := newProducer(cl, String(), String())
			auth := &racingAuth{e: p.e, cause: errors.New("x509: certificate signed by unknown authority")}
			p.withFollow(link.Producer{Watch: settledWatch(), Auth: auth})
			defer p.Close(context.Background())

			// The record's context and delivery timeout are a minute: a
			// record left in the client would fail only then.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			t0 := time.Now()
			if isSync {
				_, err = p.Produce(ctx, Record[string, string]{Topic: "t", Value: "v"})
			} else {
				done := make(chan error, 1)
				require.NoError(t, p.ProduceAsync(ctx, Record[string, string]{Topic: "t", Value: "v"}, func(_ Result, err error) { done <- err }))
				select {
				case err = <-done:
				case <-ctx.Done():
					err = ctx.Err()
				}
			}
			var ae *kconsist.AuthError
			require.ErrorAs(t, err, &ae, "the record fails with the cause")
			require.ErrorIs(t, err, auth.cause)
			took := time.Since(t0)
			t.Logf("failed after %v", took)
			// A generous bound on a measured time: it takes milliseconds,
			// and a record the abort missed fails only at the minute of
			// its context and delivery timeout (that error is no
			// AuthError either). 20 s leaves a loaded machine room and
			// still tells the two apart.
			require.Less(t, took, 20*time.Second, "at once, not at the context's end")
		})
	}
}

// TestTxnBrokenNamesFirstCluster: a transaction begun before the cluster id
// was learnt (the factory's first probe still running) reports, when a
// change cuts it short, the cluster the watcher knew in its generation,
// not "" (a TestTransactionClusterChange flake on a loaded machine).
func TestTxnBrokenNamesFirstCluster(t *testing.T) {
	e := &engine{}
	e.txn.on = true
	e.txn.names = names{now: "b", of: map[uint64]string{3: "a"}}
	e.txn.noteCluster(names{}, 3)
	var moved *rebootstrap.ClusterChangedError
	require.ErrorAs(t, e.txn.breakOff(), &moved)
	require.Equal(t, "a", moved.From)
	require.Equal(t, "b", moved.To)

	// Known when it began: that is what it names.
	e = &engine{}
	e.txn.on = true
	e.txn.names = names{now: "b", of: map[uint64]string{3: "x"}}
	e.txn.noteCluster(names{now: "a"}, 3)
	require.ErrorAs(t, e.txn.breakOff(), &moved)
	require.Equal(t, "a", moved.From)
}
