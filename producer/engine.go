package producer

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// engine is what the producers of one franz-go client do with a serialized
// record: give it to the current client, see its outcome, follow cluster
// changes. It does not depend on K and V, so its per-record methods are
// plain functions, called without the dictionary a generic method takes.
// The package doc gives the order its mutexes are taken in.
type engine struct {
	// sess is how the engine meets the factory's session: set before the
	// engine is used (newEngine, follow) and never changed.
	sess link.Producer
	// attr attributes failures to their causes (attribute.go); set
	// with sess.
	attr attributor

	vmu sync.Mutex // guards views, released and members
	// views counts the producers attached and not closed; released is
	// set when it dropped to zero: the client is being closed, and no
	// producer is attached any more.
	views    int
	released bool
	// members are the producers whose records the engine's flush waits
	// for: every producer attached, until its Close flushed it.
	members []*member

	promise func(*kgo.Record, error) // e.promised(), made once

	cur atomic.Pointer[current] // read on every record; replaced under mu

	mu sync.Mutex // serializes replacing cur (followChange, retire, close)

	pin    pinState // a pinned producer's side of cluster changes (pin.go)
	auth   authState
	closed atomic.Bool // Close began: no new client
	// The parts below own their state; the engine wires them (newEngine).
	out   outcomes // outcomes in order (outcome.go)
	work  *work    // the engine's own work on records (outcome.go)
	tasks tasks    // goroutines Close joins (outcome.go)

	stop    context.Context // done once Close closes the last client, for waits of drain
	stopNow context.CancelFunc

	refusals refusals // records refused unsent (see refusal.go)

	txn txnState // transactional clients only (see txn.go)
}

// current is the client records go to and the cluster generation it was
// made for.
type current struct {
	cl  *kgo.Client
	gen uint64
	// seq numbers the clients of one engine: a record notes the seq of
	// the client it was given to (see tag).
	seq uint32
	// hooked: a hook of cl is given records before their promise runs,
	// and may replace their Context.
	hooked bool
}

func newCurrent(cl *kgo.Client, gen uint64, seq uint32) *current {
	return &current{cl: cl, gen: gen, seq: seq, hooked: recordHooks(cl)}
}

// recordHooks reports whether cl has a hook that is given produced records
// before their promise runs.
func recordHooks(cl *kgo.Client) bool {
	hooks, _ := cl.OptValue(kgo.WithHooks).([]kgo.Hook)
	for _, h := range hooks {
		switch h.(type) {
		case kgo.HookProduceRecordBuffered, kgo.HookProduceRecordPartitioned, kgo.HookProduceRecordUnbuffered:
			return true
		}
	}
	return false
}

// newEngine makes an engine on cl that meets its session as l says; no
// producer is attached yet (see Join).
func newEngine(cl *kgo.Client, l link.Producer) *engine {
	e := &engine{work: newWork()}
	e.out = outcomes{v: e, work: e.work, tasks: &e.tasks}
	e.promise = e.promised()
	e.stop, e.stopNow = context.WithCancel(context.Background())
	e.cur.Store(newCurrent(cl, 0, 0))
	e.txn.init(cl)
	e.follow(l)
	return e
}

// follow makes e meet its session as l says, before e is used: the
// generation its client was made in, a pinned producer's reaction to a
// change, the marks, the auth watch.
//
// A pinned producer whose client cannot reach its cluster any more would
// keep records buffered until their delivery timeout (franz-go's default
// has none): on a change it purges its topics from the client, which fails
// the records at once (see pinnedChange).
func (e *engine) follow(l link.Producer) {
	e.sess = l
	e.attr = newAttributor(l.Marks, l.Auth)
	e.pin.pinTo(l, e.client)
	e.txn.names = l.Clusters
	if l.Watch != nil {
		c := e.cur.Load()
		e.cur.Store(newCurrent(c.cl, l.Watch.Generation(), c.seq))
		if e.pinned() {
			e.pin.cancel = l.Watch.OnChange(e.pinnedChange)
		} else if !e.txn.on {
			e.pin.cancel = l.Watch.OnChange(e.changed)
		}
	}
	e.auth.watch(l.Auth, e.client, &e.tasks, e.stop)
}

// client returns the current client.
func (e *engine) client() *kgo.Client { return e.cur.Load().cl }

// pinned reports whether e is pinned to one cluster: it fails records a
// change cut off instead of following.
func (e *engine) pinned() bool { return e.pin.on() }

// Join implements link.ProducerClient: it counts one more producer on e,
// unless the last one closed it.
func (e *engine) Join() bool {
	e.vmu.Lock()
	defer e.vmu.Unlock()
	if e.released {
		return false
	}
	e.views++
	return true
}

// leave counts one producer off e and reports whether it was the last,
// which then closes the client; the share forgets e.
func (e *engine) leave() bool {
	e.vmu.Lock()
	e.views--
	last := e.views == 0
	e.released = e.released || last
	e.vmu.Unlock()
	if last && e.sess.Share != nil {
		e.sess.Share.Forget(e)
	}
	return last
}

// add makes m one of the producers whose records e's flush waits for.
func (e *engine) add(m *member) {
	e.vmu.Lock()
	e.members = append(e.members, m)
	e.vmu.Unlock()
}

// forget drops m from the producers e's flush waits for: its Close
// flushed it, and what it is given since is refused.
func (e *engine) forget(m *member) {
	e.vmu.Lock()
	defer e.vmu.Unlock()
	for i, o := range e.members {
		if o == m {
			e.members = append(e.members[:i], e.members[i+1:]...)
			return
		}
	}
}

// sealAll seals the current epoch of every producer e's flush waits for:
// the records given to e so far, whichever producer gave them.
func (e *engine) sealAll() []*epoch {
	e.vmu.Lock()
	defer e.vmu.Unlock()
	eps := make([]*epoch, 0, len(e.members))
	for _, m := range e.members {
		eps = append(eps, m.eps.seal())
	}
	return eps
}

// isReleased reports whether the last producer of e began to close it.
func (e *engine) isReleased() bool {
	e.vmu.Lock()
	defer e.vmu.Unlock()
	return e.released
}

// incNow returns the low bits of the INCONSISTENT_METADATA clock (0
// without one).
func (e *engine) incNow() uint32 { return uint32(e.attr.now()) }

// send gives r to the current client; its done is called once with the
// final outcome.
func (e *engine) send(r ref) {
	if refused := e.pin.refused.Load(); refused != nil && e.pin.stillRefused() {
		e.refuse(r, changedError(r.x.rec.Topic, refused))
		return
	}
	if e.auth.mayFail() { // one atomic load while the cluster accepts the client
		if err := e.auth.refusal(r.x.rec.Topic); err != nil {
			e.refuse(r, err)
			return
		}
	}
	c := e.cur.Load()
	if e.txn.on {
		if err := e.txn.refusal(c.seq); err != nil {
			e.refuse(r, changedError(r.x.rec.Topic, err))
			return
		}
	}
	e.prime(c, r)
	if c.hooked {
		// A promise that knows r: a hook may have replaced the Context.
		c.cl.Produce(r.ctx(), &r.x.rec, func(_ *kgo.Record, err error) { e.settle(r, err) })
	} else {
		c.cl.Produce(r.ctx(), &r.x.rec, e.promise)
	}
	if e.auth.mayFail() {
		e.auth.recheck()
	}
	e.pin.recheck()
}

// sendSync gives rs, all with context ctx, to the current client through
// kgo's ProduceSync, which stops their partitions lingering, and settles
// each once its promise ran; recs is room for their kgo records. Settling
// after ProduceSync returns, in the order franz-go called the promises,
// keeps each partition's order among these records and after any record
// this goroutine produced before (whose promise ran before theirs).
func (e *engine) sendSync(ctx context.Context, rs []ref, recs []*kgo.Record) {
	if refused := e.pin.refused.Load(); refused != nil && e.pin.stillRefused() {
		for _, r := range rs {
			e.refuse(r, changedError(r.x.rec.Topic, refused))
		}
		return
	}
	if e.auth.w != nil {
		// Counted before the check: an abort for a failure stored after
		// it goes on until these records reached the client (authState.failed).
		e.auth.syncing.Add(1)
		defer e.auth.syncing.Add(-1)
		if e.auth.mayFail() && e.auth.refusal("") != nil {
			for _, r := range rs {
				e.refuse(r, e.auth.refusal(r.x.rec.Topic))
			}
			return
		}
	}
	c := e.cur.Load()
	if e.txn.on {
		if err := e.txn.refusal(c.seq); err != nil {
			for _, r := range rs {
				e.refuse(r, changedError(r.x.rec.Topic, err))
			}
			return
		}
	}
	for i, r := range rs {
		e.prime(c, r)
		recs[i] = &r.x.rec
	}
	results := c.cl.ProduceSync(ctx, recs...)
	e.pin.recheck()               // before the records are settled: nothing waits now
	var byRec map[*kgo.Record]ref // a hooked client's records, for many
	for _, res := range results {
		r, ok := refOf(res.Record.Context)
		if !ok || c.hooked {
			r, ok = findInflight(rs, res.Record, &byRec)
		}
		if ok {
			e.settle(r, res.Err)
		}
	}
}

// prime readies r to be given to c.
func (e *engine) prime(c *current, r ref) {
	x := r.x
	if e.pinned() {
		e.pin.noteTopic(x.rec.Topic)
	}
	inc := e.incNow()
	switch t := x.tag; {
	case t.resent: // its own: no other record has it
		t.seq, t.inc0 = c.seq, inc
	case t.seq != c.seq || t.inc0 != inc:
		// The client or the clock moved since the record was made.
		x.tag = t.m.tagFor(r.cx, c.seq, inc, t.ep)
	}
	if c.hooked {
		// A hook may replace the record's Context: give it the
		// caller's, as franz-go would. (newRef set it to the state.)
		x.rec.Context = r.ctx()
	}
}

// findInflight returns the one of rs whose record is rec; byRec caches an
// index for long lists.
func findInflight(rs []ref, rec *kgo.Record, byRec *map[*kgo.Record]ref) (ref, bool) {
	if len(rs) <= 8 {
		for _, r := range rs {
			if &r.x.rec == rec {
				return r, true
			}
		}
		return ref{}, false
	}
	if *byRec == nil {
		*byRec = make(map[*kgo.Record]ref, len(rs))
		for _, r := range rs {
			(*byRec)[&r.x.rec] = r
		}
	}
	r, ok := (*byRec)[rec]
	return r, ok
}

// promised returns the promise of records given to a client without
// record hooks: their Context is their inflight (see send). A closure, not
// the method value, which would add a call per record.
func (e *engine) promised() func(*kgo.Record, error) {
	return func(got *kgo.Record, err error) {
		// refOf written out: this runs once per record. (Every record
		// given this promise is a producer's: the check is a guard.)
		if x, ok := got.Context.(*inflight); ok {
			e.settle(ref{x: x, cx: x.tag.ctx}, err)
		}
	}
}
