package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/rebootstrap"
)

// TransactionEnd says how EndTransaction ends a transaction; it is
// franz-go's type, so kgo.TryCommit and kgo.TryAbort work too.
type TransactionEnd = kgo.TransactionEndTry

const (
	// TryCommit commits the transaction, unless something forces an abort.
	TryCommit = kgo.TryCommit
	// TryAbort aborts the transaction.
	TryAbort = kgo.TryAbort
)

// ErrNotTransactional is returned by BeginTransaction and EndTransaction of
// a producer made without factory.TransactionalID.
var ErrNotTransactional = errors.New("producer: not transactional (no transactional.id)")

// txnState is what a transactional engine knows of its transaction.
type txnState struct {
	on bool // the client has a transactional id; set once, before use

	mu   sync.Mutex // serializes Begin and End
	open bool       // under mu
	gen  uint64     // the cluster generation the open transaction began in
	// from is the cluster the transaction (or session) began on, when
	// known, and fromGen the watcher's generation then; read by whoever
	// notices a change.
	from    atomic.Pointer[string]
	fromGen atomic.Uint64
	// seq is the current.seq of the client the open transaction began on,
	// or -1: records meant for it must not go to a client made since.
	seq atomic.Int64
	// broken is set once a cluster change cut the open transaction short:
	// its records are refused until it ends.
	broken atomic.Pointer[ClusterChangedError]
}

func (t *txnState) init(cl *kgo.Client) {
	id, _ := cl.OptValue(kgo.TransactionalID).(string)
	t.on = id != ""
	t.seq.Store(-1)
}

// noteCluster remembers the cluster cluster names now as the one the
// transaction began on, in the watcher's generation gen.
func (t *txnState) noteCluster(cluster func() string, gen uint64) {
	from := ""
	if cluster != nil {
		from = cluster()
	}
	t.fromGen.Store(gen)
	t.from.Store(&from)
}

// txnRefusal is the error of a record that must not go to c: a cluster
// change cut its transaction short.
func (e *engine) txnRefusal(c *current) error {
	if b := e.txn.broken.Load(); b != nil {
		return b
	}
	if s := e.txn.seq.Load(); s >= 0 && uint32(s) != c.seq {
		return e.txnBroken()
	}
	return nil
}

// txnBroken marks the open transaction as cut short by a cluster change and
// returns the error that says so.
func (e *engine) txnBroken() *ClusterChangedError {
	if b := e.txn.broken.Load(); b != nil {
		return b
	}
	to := ""
	if e.follow.Cluster != nil {
		to = e.follow.Cluster()
	}
	from := ""
	if f := e.txn.from.Load(); f != nil {
		from = *f
		if from == "" && e.follow.ClusterOf != nil {
			// Begun before the cluster id was learnt: the watcher
			// knows it for that generation now.
			from = e.follow.ClusterOf(e.txn.fromGen.Load())
		}
	}
	b := &ClusterChangedError{Err: &rebootstrap.ClusterChangedError{From: from, To: to}}
	if !e.txn.broken.CompareAndSwap(nil, b) {
		return e.txn.broken.Load()
	}
	return b
}

// BeginTransaction begins a transaction: records produced from now until
// EndTransaction are written in it, and a read_committed consumer sees them
// only if it commits. The producer must have a transactional id (see
// factory.TransactionalID), and no transaction may be open. Producers that
// share the transactional id share the transaction.
//
// A transaction lives on one cluster. When the factory's bootstrap servers
// have come to name another cluster since the producer last sent, the
// transaction begins on that cluster, with a new franz-go client; a pinned
// producer returns the ClusterChangedError its records would fail with.
func (p *Producer[K, V]) BeginTransaction() error {
	if p.closed.Load() {
		return kgo.ErrClientClosed
	}
	return p.e.beginTxn()
}

func (e *engine) beginTxn() error {
	if !e.txn.on {
		return ErrNotTransactional
	}
	e.txn.mu.Lock()
	defer e.txn.mu.Unlock()
	if e.txn.open {
		return errors.New("producer: BeginTransaction: a transaction is open already; end it first")
	}
	if r := e.refused.Load(); r != nil && e.stillRefused() {
		return r
	}
	if err := e.authRefusal(""); err != nil {
		return err
	}
	c := e.cur.Load()
	if w := e.follow.Watch; w != nil && !e.follow.Pinned {
		if gen := w.Generation(); gen > c.gen {
			// The client talks to a cluster that is gone: begin on a
			// client of the new one.
			if err := e.followChange(gen, c.seq); err != nil {
				return err
			}
			c = e.cur.Load()
		}
	}
	if err := c.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("producer: BeginTransaction: %w", err)
	}
	e.txn.open = true
	e.txn.gen = c.gen
	e.txn.noteCluster(e.follow.Cluster, c.gen)
	e.txn.broken.Store(nil)
	e.txn.seq.Store(int64(c.seq))
	return nil
}

// EndTransaction ends the open transaction: TryCommit flushes every record
// of the transaction and commits it, TryAbort aborts the records not yet
// sent and aborts it. Without an open transaction it does nothing, as with
// franz-go. Every done callback of the transaction's records has run when
// it returns.
//
// A commit goes ahead only if the cluster is the one the transaction began
// on: before committing, EndTransaction waits for any cluster check in
// flight. If the cluster changed (or a record failed because it did), the
// transaction is aborted where it began (best effort: a cluster that is
// gone aborts it itself after transaction.timeout.ms) and the error is a
// *ClusterChangedError satisfying errors.Is(err,
// rebootstrap.ErrClusterChanged); nothing of it was committed, and the next
// BeginTransaction begins on the new cluster.
//
// Other errors are franz-go's (see kgo.Client.EndTransaction): when a
// commit fails, the transaction may still be open; end it with TryAbort.
// An ended context may leave the outcome unknown, as with franz-go.
func (p *Producer[K, V]) EndTransaction(ctx context.Context, end TransactionEnd) error {
	return p.e.endTxn(ctx, end)
}

func (e *engine) endTxn(ctx context.Context, end TransactionEnd) error {
	if !e.txn.on {
		return ErrNotTransactional
	}
	e.txn.mu.Lock()
	defer e.txn.mu.Unlock()
	if !e.txn.open {
		return nil
	}
	c := e.cur.Load()
	if end == TryCommit {
		if err := e.flush(ctx); err != nil {
			return fmt.Errorf("producer: EndTransaction: flush: %w", err)
		}
	} else if err := e.abortBuffered(ctx, c); err != nil {
		return fmt.Errorf("producer: EndTransaction: abort records: %w", err)
	}
	if moved := e.txnMoved(ctx); moved != nil {
		return e.abandonTxn(ctx, moved)
	}
	if err := c.cl.EndTransaction(ctx, end); err != nil {
		// franz-go keeps the transaction open when its end is unknown,
		// for a TryAbort to end it.
		return fmt.Errorf("producer: EndTransaction: %w", err)
	}
	e.closeTxn()
	return nil
}

// abortBuffered fails the records c holds without sending them, and waits
// for their done callbacks.
func (e *engine) abortBuffered(ctx context.Context, c *current) error {
	if err := c.cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	_, err := e.waitIdle(ctx)
	return err
}

// txnMoved reports a cluster change since the open transaction began, once
// any cluster check in flight is over.
func (e *engine) txnMoved(ctx context.Context) *ClusterChangedError {
	if b := e.txn.broken.Load(); b != nil {
		return b
	}
	if uint32(e.txn.seq.Load()) != e.cur.Load().seq {
		return e.txnBroken()
	}
	if w := e.follow.Watch; w != nil {
		if now, _ := e.settleWatch(ctx); now != e.txn.gen {
			return e.txnBroken()
		}
	}
	return nil
}

// abandonTxn aborts the open transaction, which a cluster change cut short,
// on the client it began on if that is still current (a replaced one was
// closed, which leaves the transaction to the coordinator's timeout), and
// moves an unpinned producer to a client of the new cluster.
func (e *engine) abandonTxn(ctx context.Context, moved *ClusterChangedError) error {
	defer e.closeTxn()
	c := e.cur.Load()
	var errs []error
	if uint32(e.txn.seq.Load()) == c.seq {
		if err := e.abortBuffered(ctx, c); err != nil {
			errs = append(errs, err)
		}
		if err := c.cl.EndTransaction(ctx, TryAbort); err != nil {
			errs = append(errs, err)
		}
		if w := e.follow.Watch; w != nil && !e.follow.Pinned {
			if err := e.followChange(w.Generation(), c.seq); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("producer: transaction aborted: %w (and aborting it where it began: %w)", moved, errors.Join(errs...))
	}
	return fmt.Errorf("producer: transaction aborted: %w", moved)
}

func (e *engine) closeTxn() {
	e.txn.open = false
	e.txn.seq.Store(-1)
	e.txn.broken.Store(nil)
}

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
	watch clusterWatch
	gen   uint64 // the generation the session began in
	// changed is set once the cluster changed: the session is over.
	changed atomic.Pointer[ClusterChangedError]
	cancel  func()
}

// initSession makes gs a session on s producing with keys and values (its
// Serializer[K] and Serializer[V]; see bridge.InitGroupTransactSession).
func (gs *GroupTransactSession[K, V]) initSession(s *kgo.GroupTransactSession, keys, values any, f follow) {
	k, _ := keys.(Serializer[K])
	v, _ := values.(Serializer[V])
	e := newEngine(s.Client())
	e.attach()
	gs.s, gs.watch = s, f.Watch
	// The engine keeps the session's client whatever happens: the session
	// watches for changes itself.
	e.withFollow(follow{
		Cluster:        f.Cluster,
		ClusterOf:      f.ClusterOf,
		Inconsistent:   f.Inconsistent,
		InconsistentOn: f.InconsistentOn,
		TopicHeldAt:    f.TopicHeldAt,
		Auth:           f.Auth,
	})
	gs.p = newView(e, k, v)
	if f.Watch != nil {
		gs.gen = f.Watch.Generation()
		gs.cancel = f.Watch.OnChange(func() { gs.fail() })
	}
	e.txn.noteCluster(f.Cluster, gs.gen)
}

// fail ends the session: the cluster changed.
func (s *GroupTransactSession[K, V]) fail() *ClusterChangedError {
	if c := s.changed.Load(); c != nil {
		return c
	}
	b := s.p.e.txnBroken()
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

// nilIfNone keeps a nil *ClusterChangedError from becoming a non-nil error.
func nilIfNone(c *ClusterChangedError) error {
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
	if err := s.p.e.authRefusal(""); err != nil {
		return err
	}
	if f := s.p.e.txn.from.Load(); f == nil || *f == "" {
		// Not known when the session was made; no change seen since.
		s.p.e.txn.noteCluster(s.p.e.follow.Cluster, s.gen)
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
// kgo.GroupTransactSession.End for its errors; a cluster change is a
// *ClusterChangedError.
func (s *GroupTransactSession[K, V]) End(ctx context.Context, end TransactionEnd) (committed bool, err error) {
	e := s.p.e
	if end == TryCommit {
		if err := e.flush(ctx); err != nil {
			return false, fmt.Errorf("producer: GroupTransactSession.End: flush: %w", err)
		}
	}
	if moved := s.failed(ctx); moved != nil {
		_, aerr := s.s.End(ctx, TryAbort)
		_, _ = e.waitIdle(ctx)
		if aerr != nil {
			return false, fmt.Errorf("producer: transaction aborted: %w (and aborting it: %w)", moved, aerr)
		}
		return false, fmt.Errorf("producer: transaction aborted: %w", moved)
	}
	committed, err = s.s.End(ctx, end)
	if _, werr := e.waitIdle(ctx); err == nil && werr != nil {
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
