package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/rebootstrap"
)

// defaultRecheck is how often, at most, a pinned producer that refuses
// records asks for a check of the bootstrap servers when its session gives
// no Recheck.
const defaultRecheck = time.Second

// changedError is the error of a record to topic that a cluster change
// kept from being delivered; errors.As finds cause, a
// *rebootstrap.ClusterChangedError, in it.
func changedError(topic string, cause error) error {
	return fmt.Errorf("producer: record to %s not delivered: %w", topic, cause)
}

// cluster returns the cluster the bootstrap servers name now, "" if
// unknown.
func (e *engine) cluster() string {
	if e.sess.Clusters == nil {
		return ""
	}
	return e.sess.Clusters.Cluster()
}

// pinnedChange is a pinned producer's reaction to a cluster change: refuse
// records while the bootstrap servers name another cluster, and fail those
// the client holds.
func (e *engine) pinnedChange() {
	if e.pin.names != nil {
		if e.pin.changed() && e.retire() {
			return
		}
	}
	e.pin.failBuffered()
}

// retire replaces the current client of a producer that refuses records by
// a fresh one, which stays idle until records are sent again: the old one
// would keep reconnecting to a bootstrap server of another cluster, which
// the pin refuses, for as long as it holds records or topics. Closing it
// fails the records it holds. It reports false if no client was made.
func (e *engine) retire() bool {
	if e.sess.Clients == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return false // Close closes the client
	}
	next, err := e.sess.Clients.NewClient()
	if err != nil {
		return false
	}
	e.pin.failBuffered() // purged quietly, where closing would log each partition
	c := e.cur.Load()
	e.replaceLocked(c, next, c.gen)
	return true
}

// afterFailure decides what a failed record becomes once any cluster check
// in flight is over: the error it had, a cluster change (pinned), or a new
// attempt on a client made for the new cluster.
func (e *engine) afterFailure(r ref, err error) {
	x := r.x
	if !e.pinned() && e.cur.Load().seq != x.client() && e.stop.Err() == nil {
		// Its client was replaced, for a cluster change already
		// followed: no check to ask for or wait on (one per record of
		// the old client, each a probe of its own, held the last of
		// them back by ~3 ms a record), a new attempt on the current
		// client.
		e.retry(r, err)
		return
	}
	if errors.Is(err, kerr.UnknownTopicID) {
		// A topic id that stopped matching is how a cluster moved behind
		// the bootstrap address shows when no rebootstrap happened.
		e.sess.Watch.Check(false)
	}
	now, interrupted := e.settleWatch(r.ctx())
	if interrupted { // Close is closing the last client
		deliver(x, err)
		return
	}
	c := e.cur.Load()
	swapped := c.seq != x.client() // another failure already moved on
	switch {
	case e.pinned() && e.sess.Clusters != nil:
		// The change's callback ran before the verdict: refused says it.
		if refused := e.pin.refused.Load(); refused != nil {
			deliver(x, changedError(x.rec.Topic, refused))
		} else {
			deliver(x, err)
		}
	case now == c.gen && !swapped:
		deliver(x, err)
	case e.pinned():
		deliver(x, changedError(x.rec.Topic, &rebootstrap.ClusterChangedError{From: e.sess.Pin, To: e.cluster()}))
	default:
		if nerr := e.followChange(now, x.client()); nerr != nil {
			deliver(x, errors.Join(err, nerr))
			return
		}
		e.retry(r, err)
	}
}

// retry sends a record that failed on a client the producer replaced
// for a cluster change to the current one, unless its transaction is on
// the old cluster.
func (e *engine) retry(r ref, err error) {
	if e.txn.on {
		// Its transaction is on the old cluster: it cannot move.
		deliver(r.x, changedError(r.x.rec.Topic, e.txn.breakOff()))
		return
	}
	e.resend(r, err)
}

// changed is an unpinned, non-transactional producer's reaction to a
// cluster change: a client for the new cluster at once, as a consumer
// does, instead of when a record fails on the old one. The old client
// learns the change only from its own refused connection and the
// rebootstrap after it, which waits out the interceptor's pause after a
// refusal (80 ms at the first); closing it fails the records it holds,
// which come to the new one (afterFailure).
func (e *engine) changed() {
	_ = e.followChange(e.sess.Watch.Generation(), e.cur.Load().seq) // a record that fails later tries again
}

// settleWatch waits for the cluster verdict as long as ctx and the producer
// allow; interrupted is true when Close cut it short.
func (e *engine) settleWatch(ctx context.Context) (gen uint64, interrupted bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stop, cancel)()
	gen = e.sess.Watch.Settle(ctx)
	return gen, e.stop.Err() != nil
}

// resend gives a fresh copy of x to the current client: the old record
// carries the old client's partition, offset and producer state. The
// record's producer still counts it (the fresh copy's outcome is its
// outcome).
func (e *engine) resend(old ref, err error) {
	x := old.x
	r := &x.rec
	fresh := newRef(&tag{ctx: old.ctx(), resent: true, m: x.tag.m, ep: x.tag.ep}, x.done, r.Topic, r.Key, r.Value, r.Headers, r.Partition, r.Timestamp)
	if !e.work.beginUnlessShut() { // ended by settle, once fresh's promise ran
		deliver(x, errors.Join(err, kgo.ErrClientClosed))
		return
	}
	e.send(fresh)
}

// followChange makes a client for generation gen current, replacing the
// client numbered old (the one a record failed on) if it still is. franz-go
// keeps the old cluster's topic ids and producer id, so a fresh client is
// the clean way to follow the change; the old one is closed, which fails
// its other buffered records so that they come here too.
func (e *engine) followChange(gen uint64, old uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.cur.Load()
	if c.seq != old || c.gen >= gen {
		return nil
	}
	if e.closed.Load() {
		return kgo.ErrClientClosed // no new client after Close
	}
	if e.sess.Clients == nil {
		return errors.New("producer: follow the cluster change: this producer keeps its client")
	}
	next, err := e.sess.Clients.NewClient()
	if err != nil {
		return fmt.Errorf("producer: follow the cluster change: %w", err)
	}
	e.replaceLocked(c, next, gen)
	return nil
}

// replaceLocked makes next, for generation gen, the client instead of c,
// and closes c in the background; e.mu is held.
func (e *engine) replaceLocked(c *current, next *kgo.Client, gen uint64) {
	e.cur.Store(newCurrent(next, gen, c.seq+1))
	e.work.begin() // flush waits until the old client's records are back
	if !e.tasks.start(func() { defer e.work.end(); closeClient(c.cl) }) {
		// Close joined already; cannot be, as it waits for e.mu first.
		closeClient(c.cl)
		e.work.end()
	}
}

// closeClient closes cl and waits until it has called the promise of every
// record it held: franz-go's Close fails them but calls their promises
// afterwards, on a goroutine of its own. A closed client's Flush waits for
// exactly that.
func closeClient(cl *kgo.Client) {
	cl.Close()
	_ = cl.Flush(context.Background()) // cannot fail without a deadline
}

// settle is a record's outcome from the client it was given to: err, if
// any, attributed to its cause, delivered in order (outcomes).
func (e *engine) settle(r ref, err error) {
	if r.x.takeResent() {
		// The engine sent it again, and counted that as its own work:
		// count it off once the outcome is delivered or queued.
		defer e.work.end()
	}
	if err != nil {
		err = e.attr.attribute(r.x, err)
	}
	e.out.settle(r, err)
}

// awaitsVerdict implements verdicts: a failed record waits for the
// cluster verdict when the producer follows the cluster, its caller still
// waits, and Close has not closed the last client.
func (e *engine) awaitsVerdict(r ref) bool {
	return e.sess.Watch != nil && r.ctx().Err() == nil && e.stop.Err() == nil
}
