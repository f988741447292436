package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/rebootstrap"
)

// GroupTransactSession is a consume-transform-produce session (franz-go's
// kgo.GroupTransactSession): one client that consumes in a group and
// produces records of K keys and V values in transactions, so that the
// offsets of the records polled commit in the same transaction as the
// records produced from them. Make it with factory.NewGroupTransactSession.
//
// The loop is franz-go's:
//
//	for {
//		fetches := s.PollFetches(ctx)
//		// handle fetches.Errors()
//		if err := s.Begin(); err != nil { ... }
//		fetches.EachRecord(func(r *kgo.Record) { s.ProduceAsync(ctx, transform(r), nil) })
//		committed, err := s.End(ctx, producer.TryCommit)
//		// !committed: the records polled are polled again (by this member or
//		// another after a rebalance), and what was produced is aborted.
//	}
//
// A rebalance during a transaction makes End abort it (see
// kgo.NewGroupTransactSession). A cluster change makes End abort too, with
// an error satisfying errors.Is(err, rebootstrap.ErrClusterChanged), and the
// session fails from then on: polls and Begin return that error. The
// group, its offsets and the transaction's producer belong to the old
// cluster, so Close the session and make a new one.
//
// Poll, Begin, End and the Produce methods are meant for one goroutine,
// as with franz-go; records produced with ProduceAsync may complete on
// others.
type GroupTransactSession[K, V any] struct {
	s     *kgo.GroupTransactSession
	p     *Producer[K, V]
	watch link.ClusterWatch
	gen   uint64 // the generation the session began in
	// changed is set once the cluster changed: the session is over.
	changed atomic.Pointer[rebootstrap.ClusterChangedError]
	cancel  func()
}

// NewGroupTransactSession is made for package factory: make a session with
// factory.NewGroupTransactSession, which seals g. Code outside this module
// cannot name g's type, and a value of it that it reaches all the same
// (the zero value, by type inference; one filled by reflection with a
// franz-go session of its own, which carries no token) is not sealed and
// is refused with an error, as are a sealed g without a session and nil
// serializers.
//
// The session produces on g.Session's client, which it never replaces:
// g.Producer.Watch tells it of a cluster change, which ends it;
// g.Producer's Share, Clients and Pin are not used.
func NewGroupTransactSession[K, V any](g link.GroupTransact, keys Serializer[K], values Serializer[V]) (*GroupTransactSession[K, V], error) {
	if !g.Sealed() {
		return nil, errors.New("producer: NewGroupTransactSession is for factory.NewGroupTransactSession: the link.GroupTransact given was not made by a factory")
	}
	if g.Session == nil {
		return nil, errors.New("producer: NewGroupTransactSession is for factory.NewGroupTransactSession: no franz-go session")
	}
	if keys == nil || values == nil {
		return nil, errors.New("producer: NewGroupTransactSession needs a key and a value serializer")
	}
	l, s := g.Producer, g.Session
	// The engine keeps the session's client whatever happens: the session
	// watches for changes itself.
	e := newEngine(s.Client(), link.Producer{Clusters: l.Clusters, Marks: l.Marks, Auth: l.Auth})
	e.Join()
	gs := &GroupTransactSession[K, V]{s: s, p: newMember(e, keys, values), watch: l.Watch}
	if l.Watch != nil {
		gs.gen = l.Watch.Generation()
		gs.cancel = l.Watch.OnChange(func() { gs.fail() })
	}
	e.txn.noteCluster(l.Clusters, gs.gen)
	return gs, nil
}

// fail ends the session: the cluster changed.
func (s *GroupTransactSession[K, V]) fail() *rebootstrap.ClusterChangedError {
	if c := s.changed.Load(); c != nil {
		return c
	}
	b := s.p.e.txn.breakOff()
	s.changed.CompareAndSwap(nil, b)
	return s.changed.Load()
}

// failed reports the cluster change that ended the session, after waiting
// (bounded by ctx) for any check in flight.
func (s *GroupTransactSession[K, V]) failed(ctx context.Context) error {
	if c := s.changed.Load(); c != nil || s.watch == nil {
		return nilIfNone(c)
	}
	return s.failedIn(s.watch.Settle(ctx))
}

// failedNow is failed without waiting for checks in flight.
func (s *GroupTransactSession[K, V]) failedNow() error {
	if c := s.changed.Load(); c != nil || s.watch == nil {
		return nilIfNone(c)
	}
	return s.failedIn(s.watch.Generation())
}

// failedIn ends the session if gen is not the generation it began in.
func (s *GroupTransactSession[K, V]) failedIn(gen uint64) error {
	if gen != s.gen {
		return s.fail()
	}
	return nil
}

// nilIfNone keeps a nil *rebootstrap.ClusterChangedError from becoming a
// non-nil error.
func nilIfNone(c *rebootstrap.ClusterChangedError) error {
	if c == nil {
		return nil
	}
	return c
}

// PollFetches polls as kgo.GroupTransactSession.PollFetches does; once the
// cluster changed, it returns a fetch error satisfying errors.Is(err,
// rebootstrap.ErrClusterChanged) instead.
func (s *GroupTransactSession[K, V]) PollFetches(ctx context.Context) kgo.Fetches {
	return s.PollRecords(ctx, 0)
}

// PollRecords is PollFetches returning at most max records (0: no limit).
func (s *GroupTransactSession[K, V]) PollRecords(ctx context.Context, max int) kgo.Fetches {
	if err := s.failedNow(); err != nil {
		return kgo.NewErrFetch(err)
	}
	fs := s.s.PollRecords(ctx, max)
	if err := s.failedNow(); err != nil {
		// Records polled from another cluster's group: not to be used.
		return kgo.NewErrFetch(err)
	}
	return fs
}

// Begin begins a transaction; see kgo.GroupTransactSession.Begin.
func (s *GroupTransactSession[K, V]) Begin() error {
	if err := s.failedNow(); err != nil {
		return err
	}
	if err := s.p.e.auth.refusal(""); err != nil {
		return err
	}
	if f := s.p.e.txn.from.Load(); f == nil || *f == "" {
		// Not known when the session was made; no change seen since.
		s.p.e.txn.noteCluster(s.p.e.txn.names, s.gen)
	}
	if err := s.s.Begin(); err != nil {
		return fmt.Errorf("producer: GroupTransactSession.Begin: %w", err)
	}
	return nil
}

// End ends the transaction, committing the records produced and the
// offsets polled if end is TryCommit, the group did not rebalance since
// Begin, and the cluster did not change (End waits for a cluster check in
// flight); otherwise it aborts. committed says whether it committed. Every
// done callback of the transaction's records has run when End returns. See
// kgo.GroupTransactSession.End for its errors; errors.As finds a
// *rebootstrap.ClusterChangedError in the error of a cluster change.
func (s *GroupTransactSession[K, V]) End(ctx context.Context, end TransactionEnd) (committed bool, err error) {
	e := s.p.e
	if end == TryCommit {
		if err := e.flush(ctx); err != nil {
			return false, fmt.Errorf("producer: GroupTransactSession.End: flush: %w", err)
		}
	}
	if moved := s.failed(ctx); moved != nil {
		_, aerr := s.s.End(ctx, TryAbort)
		_ = e.flush(ctx)
		if aerr != nil {
			return false, fmt.Errorf("producer: transaction aborted: %w (and aborting it: %w)", moved, aerr)
		}
		return false, fmt.Errorf("producer: transaction aborted: %w", moved)
	}
	committed, err = s.s.End(ctx, end)
	if werr := e.flush(ctx); err == nil && werr != nil {
		err = werr
	}
	return committed, err
}

// Produce produces r in the open transaction and waits for its
// acknowledgement; see Producer.Produce.
func (s *GroupTransactSession[K, V]) Produce(ctx context.Context, r Record[K, V]) (Result, error) {
	return s.p.Produce(ctx, r)
}

// ProduceSync produces records in the open transaction and waits for them;
// see Producer.ProduceSync.
func (s *GroupTransactSession[K, V]) ProduceSync(ctx context.Context, records ...Record[K, V]) (ProduceResults, error) {
	return s.p.ProduceSync(ctx, records...)
}

// ProduceAsync produces r in the open transaction; see
// Producer.ProduceAsync. End waits for it.
func (s *GroupTransactSession[K, V]) ProduceAsync(ctx context.Context, r Record[K, V], done func(Result, error)) error {
	return s.p.ProduceAsync(ctx, r, done)
}

// AllowRebalance allows a rebalance that kgo.BlockRebalanceOnPoll (through
// factory.KgoOpts) holds back; see kgo.Client.AllowRebalance.
func (s *GroupTransactSession[K, V]) AllowRebalance() { s.s.AllowRebalance() }

// Kgo returns the session's franz-go client, for what the session does
// not cover. Do not begin or end transactions or commit offsets on it.
func (s *GroupTransactSession[K, V]) Kgo() *kgo.Client { return s.s.Client() }

// Close flushes (bounded by ctx), leaves the group and closes the client.
// A transaction still open is not committed: end it first. Close returns
// as Producer.Close does.
func (s *GroupTransactSession[K, V]) Close(ctx context.Context) error {
	if s.cancel != nil {
		s.cancel()
	}
	return s.p.Close(ctx)
}
