package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
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

// txnState is what a transactional engine knows of its transaction: the
// transactions part of the engine. Beginning and ending one (beginTxn,
// endTxn) are the engine's, as they flush and may replace the client;
// what the transaction is, and whether a cluster change broke it, is
// txnState's.
type txnState struct {
	on    bool              // the client has a transactional id; set once, before use
	names link.ClusterNames // the session's cluster names; set before use

	// mu serializes Begin and End (first in the lock order: they take
	// engine.mu to swap clients) and guards open and gen.
	mu   sync.Mutex
	open bool   // a transaction is open
	gen  uint64 // the cluster generation the open transaction began in
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
	broken atomic.Pointer[rebootstrap.ClusterChangedError]
}

func (t *txnState) init(cl *kgo.Client) {
	id, _ := cl.OptValue(kgo.TransactionalID).(string)
	t.on = id != ""
	t.seq.Store(-1)
}

// noteCluster remembers the cluster names says the bootstrap servers name
// now as the one the transaction began on, in the watcher's generation gen.
func (t *txnState) noteCluster(names link.ClusterNames, gen uint64) {
	from := ""
	if names != nil {
		from = names.Cluster()
	}
	t.fromGen.Store(gen)
	t.from.Store(&from)
}

// refusal is the error of a record that must not go to the client
// numbered seq: a cluster change cut its transaction short.
func (t *txnState) refusal(seq uint32) *rebootstrap.ClusterChangedError {
	if b := t.broken.Load(); b != nil {
		return b
	}
	if s := t.seq.Load(); s >= 0 && uint32(s) != seq {
		return t.breakOff()
	}
	return nil
}

// breakOff marks the open transaction as cut short by a cluster change and
// returns the error that says so.
func (t *txnState) breakOff() *rebootstrap.ClusterChangedError {
	if b := t.broken.Load(); b != nil {
		return b
	}
	to, from := "", ""
	if t.names != nil {
		to = t.names.Cluster()
	}
	if f := t.from.Load(); f != nil {
		from = *f
		if from == "" && t.names != nil {
			// Begun before the cluster id was learnt: the watcher
			// knows it for that generation now.
			from = t.names.ClusterOf(t.fromGen.Load())
		}
	}
	b := &rebootstrap.ClusterChangedError{From: from, To: to}
	if !t.broken.CompareAndSwap(nil, b) {
		return t.broken.Load()
	}
	return b
}

// begun notes a transaction begun on c, whose cluster names says now.
func (t *txnState) begun(c *current) {
	t.open = true
	t.gen = c.gen
	t.noteCluster(t.names, c.gen)
	t.broken.Store(nil)
	t.seq.Store(int64(c.seq))
}

// ended notes the transaction's end.
func (t *txnState) ended() {
	t.open = false
	t.seq.Store(-1)
	t.broken.Store(nil)
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
// producer returns the cluster change its records would fail with.
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
	if r := e.pin.refused.Load(); r != nil && e.pin.stillRefused() {
		return fmt.Errorf("producer: BeginTransaction: %w", r)
	}
	if err := e.auth.refusal(""); err != nil {
		return err
	}
	c := e.cur.Load()
	if w := e.sess.Watch; w != nil && !e.pinned() {
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
	e.txn.begun(c)
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
// gone aborts it itself after transaction.timeout.ms) and errors.As finds a
// *rebootstrap.ClusterChangedError in the error (errors.Is(err,
// rebootstrap.ErrClusterChanged)); nothing of it was committed, and the
// next BeginTransaction begins on the new cluster.
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
	e.txn.ended()
	return nil
}

// abortBuffered fails the records c holds without sending them, and waits
// for their done callbacks.
func (e *engine) abortBuffered(ctx context.Context, c *current) error {
	if err := c.cl.AbortBufferedRecords(ctx); err != nil {
		return err
	}
	return e.flush(ctx)
}

// txnMoved reports a cluster change since the open transaction began, once
// any cluster check in flight is over.
func (e *engine) txnMoved(ctx context.Context) *rebootstrap.ClusterChangedError {
	if b := e.txn.broken.Load(); b != nil {
		return b
	}
	if uint32(e.txn.seq.Load()) != e.cur.Load().seq {
		return e.txn.breakOff()
	}
	if w := e.sess.Watch; w != nil {
		if now, _ := e.settleWatch(ctx); now != e.txn.gen {
			return e.txn.breakOff()
		}
	}
	return nil
}

// abandonTxn aborts the open transaction, which a cluster change cut short,
// on the client it began on if that is still current (a replaced one was
// closed, which leaves the transaction to the coordinator's timeout), and
// moves an unpinned producer to a client of the new cluster.
func (e *engine) abandonTxn(ctx context.Context, moved *rebootstrap.ClusterChangedError) error {
	defer e.txn.ended()
	c := e.cur.Load()
	var errs []error
	if uint32(e.txn.seq.Load()) == c.seq {
		if err := e.abortBuffered(ctx, c); err != nil {
			errs = append(errs, err)
		}
		if err := c.cl.EndTransaction(ctx, TryAbort); err != nil {
			errs = append(errs, err)
		}
		if w := e.sess.Watch; w != nil && !e.pinned() {
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
