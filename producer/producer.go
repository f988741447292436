// Package producer is the typed producer of a kconsist factory: a franz-go
// producer whose requests carry the factory's consistency token, so it sees
// every topic the factory's admin client created or changed.
//
// Records are serialized before anything is sent: a serialization error is
// returned by Produce or ProduceAsync and nothing reaches the broker.
// Producers are idempotent by default (acks=all), so the retries the
// consistency protocol may cause never duplicate or reorder records.
//
// When the cluster behind the bootstrap servers changes (a disaster-recovery
// switch, a DNS name moved), a factory producer follows it as the Java
// client does: records that failed because of the change are delivered to
// the new cluster by a fresh client. A producer pinned to a cluster
// (factory.PinCluster) fails them instead, with an error that satisfies
// errors.Is(err, rebootstrap.ErrClusterChanged).
package producer

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/bridge"
)

// ErrSerialize wraps every serialization error.
var ErrSerialize = errors.New("producer: serialize")

// Header is a record header. It is franz-go's own type, as
// consumer.Header is, so the headers of a consumed record can be produced
// again as they are. Like a []byte key or value, the slice given to
// Produce is sent as it is, not copied: do not change it until the
// record's outcome.
type Header = kgo.RecordHeader

// Record is a record to produce.
type Record[K, V any] struct {
	Topic string
	Key   K
	Value V
	// Partition is used only with a manual partitioner (see
	// kgo.ManualPartitioner through factory.KgoOpts).
	Partition int32
	Headers   []Header
	// Timestamp defaults to the time of Produce.
	Timestamp time.Time
}

// Result describes a record the broker acknowledged.
type Result struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// follow, clusterWatch and authWatch are how the factory tells a producer
// about cluster changes and credential failures (see internal/bridge).
type (
	follow       = bridge.ProducerFollow
	clusterWatch = bridge.ClusterWatch
	authWatch    = bridge.AuthWatch
)

func init() {
	bridge.NewProducerClient = func(cl *kgo.Client, f follow) bridge.ProducerClient {
		return newShared(cl, f)
	}
	bridge.InitGroupTransactSession = func(dst any, s *kgo.GroupTransactSession, keys, values any, f follow) {
		dst.(interface {
			initSession(*kgo.GroupTransactSession, any, any, follow)
		}).initSession(s, keys, values, f)
	}
}

// Producer produces records with K keys and V values. It is safe for
// concurrent use. Make one with factory.NewProducer; the zero value is not
// usable.
//
// Producers made by one factory with the same settings share one franz-go
// client, whatever their key and value types: one producer id, one set of
// connections, one buffer, as franz-go means a client to be used.
//
// Flush and Close on a shared client work as franz-go's do on a client
// shared by goroutines: Flush of any of the producers waits for every
// record buffered in the client, the other producers' included. Close of a
// producer flushes the same way (bounded by its context) and then fails
// that producer's later records with kgo.ErrClientClosed; the client stays
// open for the others. Close of the last one closes the client, as Close
// of an unshared producer does.
type Producer[K, V any] struct {
	keys   Serializer[K]
	values Serializer[V]
	// rawKeys, rawValues: the serializer is Bytes(), so K (or V) is
	// []byte and a key (value) is its own bytes; prepare takes them
	// without a call.
	rawKeys, rawValues bool

	e *engine
	// closed: this producer's Close was called; its records fail with
	// kgo.ErrClientClosed even while others keep the shared client open.
	closed atomic.Bool
}

// newShared makes cl a producer client, following cluster changes as f
// says, that typed producers attach to.
func newShared(cl *kgo.Client, f follow) *engine {
	e := newEngine(cl)
	e.withFollow(f)
	return e
}

// Attach implements bridge.ProducerClient: dst is a new *Producer[K, V].
func (e *engine) Attach(dst, keys, values any) bool {
	p := dst.(interface{ bind(*engine, any, any) })
	if !e.attach() {
		return false
	}
	p.bind(e, keys, values)
	return true
}

// bind makes p a producer on e; keys and values are its Serializer[K] and
// Serializer[V] (nil stays nil, as a nil serializer given to the factory).
func (p *Producer[K, V]) bind(e *engine, keys, values any) {
	k, _ := keys.(Serializer[K])
	v, _ := values.(Serializer[V])
	p.init(e, k, v)
}

func newView[K, V any](e *engine, keys Serializer[K], values Serializer[V]) *Producer[K, V] {
	p := new(Producer[K, V])
	p.init(e, keys, values)
	return p
}

func (p *Producer[K, V]) init(e *engine, keys Serializer[K], values Serializer[V]) {
	p.keys, p.values, p.e = keys, values, e
	// A serializer of type bytesSerializer is a Serializer[[]byte]: K
	// (V) is then []byte itself (see prepare).
	_, p.rawKeys = any(keys).(bytesSerializer)
	_, p.rawValues = any(values).(bytesSerializer)
}

// engine is what a producer does with a serialized record: give it to the
// current client, see its outcome, follow cluster changes. It does not
// depend on K and V, so its per-record methods are plain functions, called
// without the dictionary a generic method takes.
type engine struct {
	follow follow

	// views counts the producers attached and not closed; released is
	// set when it dropped to zero: the client is being closed, and no
	// producer is attached any more. Both under vmu.
	vmu      sync.Mutex
	views    int
	released bool

	promise func(*kgo.Record, error) // e.promised(), made once

	cur    atomic.Pointer[current] // read on every record
	mu     sync.Mutex              // serializes replacing cur
	topics sync.Map
	cancel func()
	auth   authState
	closed atomic.Bool // Close began: no new client
	// refused is set while a pinned producer's cluster is gone from
	// behind the bootstrap servers (follow.Refuse): records fail at once.
	refused atomic.Pointer[ClusterChangedError]
	// lastTag is the tag most recently made for records (see tagFor).
	lastTag atomic.Pointer[tag]
	// lastRecheck is when (UnixNano) a refused record last asked for a
	// check.
	lastRecheck atomic.Int64

	// Outcomes are delivered in the order franz-go gives them, which
	// keeps its per-partition order: the promise delivers one itself
	// only while nothing waits in queue; otherwise it joins the queue,
	// which one goroutine (drain) works through. A failed record may wait
	// there for a cluster verdict, which a promise must not do.
	queued atomic.Int64 // in queue or being handled by drain

	omu      sync.Mutex
	queue    []outcome
	draining bool // a drain goroutine runs
	// outstanding counts what Flush waits for besides the current
	// client's buffer: outcomes in queue, records sent again until their
	// promise ran, and replaced clients until every promise of theirs ran.
	outstanding int
	idle        chan struct{} // closed when outstanding drops to zero
	shut        bool          // Close closes the last client: nothing is sent again
	joined      bool          // Close waited for everything: no goroutine starts
	wg          sync.WaitGroup
	stop        context.Context // done once shut, for waits of drain
	stopNow     context.CancelFunc

	txn txnState // transactional clients only (see txn.go)
}

// outcome is a record's outcome waiting for its turn.
type outcome struct {
	r   ref
	err error
	// final: err is the verdict already, there is none to wait for.
	final bool
}

// beginLocked counts one more thing Flush waits for; e.omu is held.
func (e *engine) beginLocked() {
	if e.outstanding == 0 {
		e.idle = make(chan struct{})
	}
	e.outstanding++
}

func (e *engine) end() {
	e.omu.Lock()
	e.outstanding--
	if e.outstanding == 0 {
		close(e.idle)
	}
	e.omu.Unlock()
}

// goLocked runs fn on a goroutine Close joins; e.omu is held. It reports
// false, running nothing, once Close has joined them.
func (e *engine) goLocked(fn func()) bool {
	if e.joined {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn()
	}()
	return true
}

// waitIdle waits until nothing counted by outstanding is left; it reports
// whether there was any to wait for.
func (e *engine) waitIdle(ctx context.Context) (bool, error) {
	e.omu.Lock()
	ch := e.idle
	busy := e.outstanding > 0
	e.omu.Unlock()
	if !busy {
		return false, nil
	}
	select {
	case <-ch:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// current is the client records go to and the cluster generation it was
// made for.
type current struct {
	cl  *kgo.Client
	gen uint64
	// seq numbers the clients of one producer: a record notes the seq of
	// the client it was given to (see inflight).
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

// newProducer wraps cl in a producer that is the only one on it.
func newProducer[K, V any](cl *kgo.Client, keys Serializer[K], values Serializer[V]) *Producer[K, V] {
	e := newEngine(cl)
	e.attach()
	return newView(e, keys, values)
}

func newEngine(cl *kgo.Client) *engine {
	e := &engine{}
	e.promise = e.promised()
	e.stop, e.stopNow = context.WithCancel(context.Background())
	e.cur.Store(newCurrent(cl, 0, 0))
	e.txn.init(cl)
	return e
}

// attach counts one more producer on e, unless the last one closed it.
func (e *engine) attach() bool {
	e.vmu.Lock()
	defer e.vmu.Unlock()
	if e.released {
		return false
	}
	e.views++
	return true
}

// detach counts one producer off e and reports whether it was the last,
// which then closes the client.
func (e *engine) detach() bool {
	e.vmu.Lock()
	e.views--
	last := e.views == 0
	e.released = e.released || last
	e.vmu.Unlock()
	if last && e.follow.Released != nil {
		e.follow.Released()
	}
	return last
}

// isReleased reports whether the last producer of e began to close it.
func (e *engine) isReleased() bool {
	e.vmu.Lock()
	defer e.vmu.Unlock()
	return e.released
}

// withFollow makes p react to cluster changes as f says, before p is used.
//
// A pinned producer whose client cannot reach its cluster any more would
// keep records buffered until their delivery timeout (franz-go's default
// has none): on a change it purges its topics from the client, which fails
// the records at once, and they are reported as ClusterChangedError.
func (p *Producer[K, V]) withFollow(f follow) *Producer[K, V] {
	p.e.withFollow(f)
	return p
}

func (e *engine) withFollow(f follow) {
	e.follow = f
	if f.Watch != nil {
		c := e.cur.Load()
		e.cur.Store(newCurrent(c.cl, f.Watch.Generation(), c.seq))
		if f.Pinned {
			e.cancel = f.Watch.OnChange(e.pinnedChange)
		}
	}
	e.watchAuth(f.Auth)
}

// pinnedChange is a pinned producer's reaction to a cluster change: refuse
// records while the bootstrap servers name another cluster, and fail those
// the client holds.
func (e *engine) pinnedChange() {
	if e.follow.Refuse != nil {
		if err := e.follow.Refuse(); err != nil {
			e.lastRecheck.Store(time.Now().UnixNano()) // this was a check
			e.refused.Store(&ClusterChangedError{Err: err})
			if e.retire() {
				return
			}
		} else {
			e.refused.Store(nil)
		}
	}
	e.failBuffered()
}

// retire replaces the current client of a producer that refuses records by
// a fresh one, which stays idle until records are sent again: the old one
// would keep reconnecting to a bootstrap server of another cluster, which
// the pin refuses, for as long as it holds records or topics. Closing it
// fails the records it holds. It reports false if no client was made.
func (e *engine) retire() bool {
	if e.follow.NewClient == nil {
		return false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return false // Close closes the client
	}
	next, err := e.follow.NewClient()
	if err != nil {
		return false
	}
	e.failBuffered() // purged quietly, where closing would log each partition
	c := e.cur.Load()
	e.replaceLocked(c, next, c.gen)
	return true
}

// failBuffered fails every record the current client still holds.
func (e *engine) failBuffered() {
	var topics []string
	e.topics.Range(func(k, _ any) bool {
		topics = append(topics, k.(string))
		return true
	})
	e.cur.Load().cl.PurgeTopicsFromClient(topics...)
}

// Kgo returns the current underlying franz-go client. Producers that share
// it (see Producer) return the same one; close the producers, not it.
func (p *Producer[K, V]) Kgo() *kgo.Client {
	return p.e.cur.Load().cl
}

// inflight is one record on its way: the kgo.Record franz-go sends and what
// its outcome needs, in one allocation of 176 bytes, a kgo.Record and 16
// (see TestInflightSize), whatever the caller's context. For every
// buffered record the garbage collector scans these bytes in each cycle,
// and each byte brings the next cycle closer, so nothing goes here that
// can be found elsewhere: what records sent one after another have in
// common (the caller's context, the client they were given to, the
// INCONSISTENT_METADATA clock) is one tag they share.
//
// The promise, one function shared by every record, finds the inflight
// through the record's Context: an inflight is a context.Context that
// answers as the caller's, and franz-go leaves a record's Context alone.
// Hooks that see records may replace it (a tracing hook wraps it), so a
// client with such hooks gets the caller's context on the record and a
// promise of the record's own instead.
type inflight struct {
	rec  kgo.Record
	done func(Result, error)
	// tag is set in the literal that allocates the inflight, so that no
	// store with a write barrier follows, and replaced only when the client
	// or the clock moved before the record was given to a client (prime).
	tag *tag
}

// tag is what a record is made and given to a client with. Records given one
// after another with the same context, to the same client, with no
// INCONSISTENT_METADATA answer between them share one (see tagFor), which
// is never changed; a record sent again after a failure has its own.
type tag struct {
	ctx  context.Context // the caller's; not nil
	seq  uint32          // current.seq of the client the record was given to
	inc0 uint32          // low bits of the INCONSISTENT_METADATA clock then
	// resent marks a record's own tag: it was sent again after a failure,
	// and Flush waits for its promise (see engine.outstanding).
	resent bool
	kind   ctxKind // what holds may compare ctx by
}

// ctxKind says how a tag's context may be compared without a call or a
// panic.
type ctxKind uint8

const (
	ctxOther      ctxKind = iota // never compared: its type might panic
	ctxBackground                // context.Background(): compared by type
	ctxPointer                   // a pointer: compared by identity
)

// background is the caller's context of a record produced with a nil one,
// as franz-go takes it.
var background = context.Background()

// backgroundType is background's dynamic type, of which every value is
// context.Background(): comparing a context's type with it costs no call,
// where comparing contexts calls the runtime's interface equality (about
// 3 ns per record).
var backgroundType = reflect.TypeOf(background)

// kindOf returns how ctx may be compared: contexts whose dynamic type might
// panic when compared (a struct holding a slice) are never taken for the
// same, only Background and pointers are.
func kindOf(ctx context.Context) ctxKind {
	switch t := reflect.TypeOf(ctx); {
	case t == backgroundType:
		return ctxBackground
	case t != nil && t.Kind() == reflect.Pointer:
		return ctxPointer
	}
	return ctxOther
}

// holds reports whether t's context is ctx, with no call for Background and
// one pointer comparison for a pointer: the kind was found when t was made.
// (Interfaces whose dynamic types differ compare unequal without calling
// the type's equality, so a ctx of an uncomparable type cannot panic here.)
func (t *tag) holds(ctx context.Context) bool {
	switch t.kind {
	case ctxBackground:
		return reflect.TypeOf(ctx) == backgroundType
	case ctxPointer:
		return t.ctx == ctx
	}
	return false
}

// An inflight is the Context of its record: it answers as the caller's,
// which its tag holds from the start.

func (x *inflight) Deadline() (time.Time, bool) { return x.caller().Deadline() }
func (x *inflight) Done() <-chan struct{}       { return x.caller().Done() }
func (x *inflight) Err() error                  { return x.caller().Err() }
func (x *inflight) Value(key any) any           { return x.caller().Value(key) }

// caller returns the caller's context as the tag holds it.
func (x *inflight) caller() context.Context { return x.tag.ctx }

// ref is a record on its way as the engine holds it: its inflight and the
// caller's context (which the inflight's tag holds too; a ref saves the
// loads).
type ref struct {
	x  *inflight
	cx context.Context // the caller's; not nil
}

// newRef allocates the inflight of a record produced with t.ctx (not nil),
// with its tag, its outcome's callback and the record's fields, its Context
// set to lead back to it. The fields are set in the allocating literal:
// stores into an object just allocated need no write barrier, where stores
// after a call or a branch take one each while the GC marks, which for a
// busy producer is much of the time.
func newRef(t *tag, done func(Result, error), topic string, key, value []byte, headers []kgo.RecordHeader, partition int32, ts time.Time) ref {
	x := &inflight{
		rec:  kgo.Record{Topic: topic, Key: key, Value: value, Headers: headers, Partition: partition, Timestamp: ts},
		done: done,
		tag:  t,
	}
	x.rec.Context = x
	return ref{x: x, cx: t.ctx}
}

// refOf returns the ref whose record's Context is ctx, if it is one.
func refOf(ctx context.Context) (ref, bool) {
	if x, ok := ctx.(*inflight); ok {
		return ref{x: x, cx: x.tag.ctx}, true
	}
	return ref{}, false
}

// ctx returns the caller's context.
func (r ref) ctx() context.Context { return r.cx }

// tagFor returns a tag for a record produced with ctx and given to the
// client numbered seq at clock inc: the last one made when it says the
// same, a new one otherwise. Tags are never changed once made, so
// goroutines producing at once may share any of them.
func (e *engine) tagFor(ctx context.Context, seq, inc uint32) *tag {
	if t := e.lastTag.Load(); t != nil && t.seq == seq && t.inc0 == inc && t.holds(ctx) {
		return t
	}
	t := &tag{ctx: ctx, seq: seq, inc0: inc, kind: kindOf(ctx)}
	e.lastTag.Store(t)
	return t
}

// tagNow returns the tag for a record produced with ctx (not nil) now: for
// the current client at the current clock. prime replaces it if either
// moved before the record is given to a client.
func (e *engine) tagNow(ctx context.Context) *tag {
	return e.tagFor(ctx, e.cur.Load().seq, e.incNow())
}

// incNow returns the low bits of the INCONSISTENT_METADATA clock (0
// without one).
func (e *engine) incNow() uint32 {
	if n := e.follow.Inconsistent; n != nil {
		return uint32(n.Load())
	}
	return 0
}

// client is the seq of the client x was given to.
func (x *inflight) client() uint32 { return x.tag.seq }

// takeResent reports whether x was sent again after a failure, and clears
// the mark: Flush waits for such a record until its outcome is handed on.
func (x *inflight) takeResent() bool {
	if t := x.tag; t.resent {
		t.resent = false
		return true
	}
	return false
}

// prepare serializes r into a new inflight.
func (p *Producer[K, V]) prepare(ctx context.Context, r *Record[K, V], done func(Result, error)) (ref, error) {
	if r.Topic == "" {
		return ref{}, fmt.Errorf("%w: record has no topic", ErrSerialize)
	}
	var k, v []byte
	var err error
	if p.rawKeys {
		// K is []byte (see New): the key is the bytes to send.
		k, _ = any(r.Key).([]byte)
	} else if k, err = p.keys.Serialize(r.Topic, r.Key); err != nil {
		return ref{}, fmt.Errorf("%w: key for topic %s: %w", ErrSerialize, r.Topic, err)
	}
	if p.rawValues {
		v, _ = any(r.Value).([]byte)
	} else if v, err = p.values.Serialize(r.Topic, r.Value); err != nil {
		return ref{}, fmt.Errorf("%w: value for topic %s: %w", ErrSerialize, r.Topic, err)
	}
	if ctx == nil { // as franz-go takes it
		ctx = background
	}
	// A zero Timestamp is stamped by franz-go.
	return newRef(p.e.tagNow(ctx), done, r.Topic, k, v, r.Headers, r.Partition, r.Timestamp), nil
}

func result(r *kgo.Record) Result {
	return Result{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
}

// Produce sends one record and waits for its acknowledgement. Once the
// record is buffered its partition stops lingering, as with kgo's
// ProduceSync: a caller that waits gains nothing from a batch growing. (A
// record for a topic the client has not loaded yet is partitioned later,
// when its metadata arrives, and lingers then, as with kgo.)
func (p *Producer[K, V]) Produce(ctx context.Context, r Record[K, V]) (Result, error) {
	if ctx == nil { // as franz-go takes it
		ctx = context.Background()
	}
	w := &oneWaiter{ch: make(chan struct{})}
	x, err := p.prepare(ctx, &r, w.done)
	if err != nil {
		return Result{}, err
	}
	if p.closed.Load() {
		p.e.refuse(x, kgo.ErrClientClosed)
		<-w.ch
		return w.r, w.err
	}
	xs := [1]ref{x}
	var recs [1]*kgo.Record
	if ctx.Done() == nil {
		p.e.sendSync(ctx, xs[:], recs[:])
		<-w.ch
		return w.r, w.err
	}
	// franz-go's ProduceSync returns only once the record has its outcome,
	// which a broker holding the request behind the token may delay for
	// long: the caller's context ends the wait, not the record.
	var clock0 uint64
	if at := p.e.follow.Inconsistent; at != nil {
		clock0 = at.Load()
	}
	topic := r.Topic
	p.e.omu.Lock()
	started := p.e.goLocked(func() { p.e.sendSync(ctx, xs[:], recs[:]) })
	p.e.omu.Unlock()
	if !started {
		p.e.sendSync(ctx, xs[:], recs[:])
	}
	select {
	case <-w.ch:
		return w.r, w.err
	case <-ctx.Done():
		return Result{}, p.e.gaveUp(ctx, topic, clock0)
	}
}

// gaveUp is the error of a Produce whose caller's context ended before the
// record's outcome; the record itself may still be written. When brokers
// answered INCONSISTENT_METADATA meanwhile, that is named as the likely
// reason it waited.
func (e *engine) gaveUp(ctx context.Context, topic string, clock0 uint64) error {
	err := fmt.Errorf("producer: record to %s not acknowledged before the context ended (it may still be written): %w", topic, context.Cause(ctx))
	err = e.authCause(err)
	if at := e.follow.Inconsistent; at != nil && at.Load() != clock0 {
		return fmt.Errorf("%w: %w", err, consistency.ErrInconsistentMetadata)
	}
	return err
}

// oneWaiter is what Produce waits on; its done is the record's callback.
type oneWaiter struct {
	ch  chan struct{}
	r   Result
	err error
}

func (w *oneWaiter) done(r Result, err error) {
	w.r, w.err = r, err
	close(w.ch)
}

// ProduceResult is the outcome of one record of ProduceSync.
type ProduceResult struct {
	Result Result
	Err    error
}

// ProduceResults are the outcomes of ProduceSync, in the order of its
// records.
type ProduceResults []ProduceResult

// FirstErr returns the first error among rs, or nil.
func (rs ProduceResults) FirstErr() error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// ProduceSync sends records and waits until each is acknowledged or failed;
// as with Produce, their partitions stop lingering once they are buffered.
// Results are in the order of records. The error is a serialization error:
// then no record was sent. Records of one partition are written in the
// order given.
func (p *Producer[K, V]) ProduceSync(ctx context.Context, records ...Record[K, V]) (ProduceResults, error) {
	if ctx == nil { // as franz-go takes it
		ctx = context.Background()
	}
	out := make(ProduceResults, len(records))
	if len(records) == 0 {
		return out, nil
	}
	var wg sync.WaitGroup
	xs := make([]ref, len(records))
	for i := range records {
		x, err := p.prepare(ctx, &records[i], func(r Result, err error) {
			out[i] = ProduceResult{r, err}
			wg.Done()
		})
		if err != nil {
			return nil, fmt.Errorf("record %d of %d: %w", i, len(records), err)
		}
		xs[i] = x
	}
	wg.Add(len(xs))
	if p.closed.Load() {
		for _, x := range xs {
			p.e.refuse(x, kgo.ErrClientClosed)
		}
	} else {
		p.e.sendSync(ctx, xs, make([]*kgo.Record, len(xs)))
	}
	wg.Wait()
	return out, nil
}

// ProduceAsync serializes r and queues it; done is called once with the
// outcome (from a franz-go goroutine, or the producer's own while a failed
// record waits for a cluster verdict: keep it short). Outcomes of one
// partition are delivered in order, as franz-go delivers them. A
// serialization error is returned at once and done is not called.
func (p *Producer[K, V]) ProduceAsync(ctx context.Context, r Record[K, V], done func(Result, error)) error {
	if done == nil {
		done = ignoreResult
	}
	x, err := p.prepare(ctx, &r, done)
	if err != nil {
		return err
	}
	if p.closed.Load() {
		p.e.refuse(x, kgo.ErrClientClosed)
		return nil
	}
	p.e.send(x)
	return nil
}

func ignoreResult(Result, error) {}

// send gives r to the current client; its done is called once with the
// final outcome.
func (e *engine) send(r ref) {
	if refused := e.refused.Load(); refused != nil && e.stillRefused() {
		e.refuse(r, refused)
		return
	}
	if e.authFailing() { // one atomic load while the cluster accepts the client
		if err := e.authRefusal(r.x.rec.Topic); err != nil {
			e.refuse(r, err)
			return
		}
	}
	c := e.cur.Load()
	if e.txn.on {
		if err := e.txnRefusal(c); err != nil {
			e.refuse(r, err)
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
	if e.authFailing() {
		e.authRecheck()
	}
	e.recheckRefused()
}

// refuse fails r, which was not sent, with err: through the queue, so that
// its callback runs on the producer's goroutine after the outcomes before
// it, and the record's own caller never runs it.
func (e *engine) refuse(r ref, err error) {
	if r.x.takeResent() { // Flush waits for it: count it off once queued
		defer e.end()
	}
	e.enqueue(outcome{r: r, err: err, final: true})
}

// stillRefused reports whether records are still refused, starting a check
// of the bootstrap servers now and then: the pinned cluster may come back
// behind them, and no client of the producer talks to them meanwhile.
func (e *engine) stillRefused() bool {
	every := e.follow.Recheck
	if every <= 0 {
		every = time.Second
	}
	now := time.Now().UnixNano()
	if last := e.lastRecheck.Load(); now-last >= int64(every) && e.lastRecheck.CompareAndSwap(last, now) {
		e.follow.Watch.Check(false)
	}
	if e.follow.Refuse() == nil {
		e.refused.Store(nil)
		return false
	}
	return true
}

// recheckRefused fails, again, what the client holds if records became
// refused while one was being given to it: the change's own purge may have
// run just before.
func (e *engine) recheckRefused() {
	if e.follow.Pinned && e.refused.Load() != nil {
		e.failBuffered()
	}
}

// prime readies r to be given to c.
func (e *engine) prime(c *current, r ref) {
	x := r.x
	if e.follow.Pinned {
		e.noteTopic(x.rec.Topic)
	}
	inc := e.incNow()
	switch t := x.tag; {
	case t.resent: // its own: no other record has it
		t.seq, t.inc0 = c.seq, inc
	case t.seq != c.seq || t.inc0 != inc:
		// The client or the clock moved since the record was made.
		x.tag = e.tagFor(r.cx, c.seq, inc)
	}
	if c.hooked {
		// A hook may replace the record's Context: give it the
		// caller's, as franz-go would. (newRef set it to the state.)
		x.rec.Context = r.ctx()
	}
}

// noteTopic remembers a topic a pinned producer sent to: failBuffered
// purges it.
func (e *engine) noteTopic(topic string) {
	if _, ok := e.topics.Load(topic); !ok {
		e.topics.Store(topic, struct{}{})
	}
}

// sendSync gives rs, all with context ctx, to the current client through
// kgo's ProduceSync, which stops their partitions lingering, and settles
// each once its promise ran; recs is room for their kgo records. Settling
// after ProduceSync returns, in the order franz-go called the promises,
// keeps each partition's order among these records and after any record
// this goroutine produced before (whose promise ran before theirs).
func (e *engine) sendSync(ctx context.Context, rs []ref, recs []*kgo.Record) {
	if refused := e.refused.Load(); refused != nil && e.stillRefused() {
		for _, r := range rs {
			e.refuse(r, refused)
		}
		return
	}
	if e.follow.Auth != nil {
		// Counted before the check: an abort for a failure stored after
		// it goes on until these records reached the client (authFailed).
		e.auth.syncing.Add(1)
		defer e.auth.syncing.Add(-1)
		if e.authFailing() && e.authRefusal("") != nil {
			for _, r := range rs {
				e.refuse(r, e.authRefusal(r.x.rec.Topic))
			}
			return
		}
	}
	c := e.cur.Load()
	if e.txn.on {
		if err := e.txnRefusal(c); err != nil {
			for _, r := range rs {
				e.refuse(r, err)
			}
			return
		}
	}
	for i, r := range rs {
		e.prime(c, r)
		recs[i] = &r.x.rec
	}
	results := c.cl.ProduceSync(ctx, recs...)
	e.recheckRefused()            // before the records are settled: nothing waits now
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

// settle delivers r's outcome, or queues it behind outcomes that wait.
func (e *engine) settle(r ref, err error) {
	if r.x.takeResent() {
		// Flush waited for this promise: count it off once the outcome
		// is delivered or queued.
		defer e.end()
	}
	if err != nil {
		err = e.attribute(r.x, err)
	}
	if e.queued.Load() == 0 && (err == nil || !e.awaitsVerdict(r)) {
		// Nothing of this client's waits before it (this client's
		// promises run one at a time, and drain counts an outcome off
		// only after delivering it).
		deliver(r.x, err)
		return
	}
	e.enqueue(outcome{r: r, err: err})
}

// enqueue puts o behind the outcomes that wait; drain delivers it.
func (e *engine) enqueue(o outcome) {
	e.omu.Lock()
	if e.joined { // only for a record produced after Close
		e.omu.Unlock()
		deliver(o.r.x, o.err)
		return
	}
	e.queue = append(e.queue, o)
	e.queued.Add(1)
	e.beginLocked()
	if !e.draining {
		e.draining = e.goLocked(e.drain)
	}
	e.omu.Unlock()
}

func deliver(x *inflight, err error) {
	if err != nil {
		x.done(Result{}, err)
		return
	}
	x.done(result(&x.rec), nil)
}

// awaitsVerdict reports whether r, which failed, waits for the cluster
// verdict before its outcome is known.
func (e *engine) awaitsVerdict(r ref) bool {
	return e.follow.Watch != nil && r.ctx().Err() == nil && e.stop.Err() == nil
}

// drain works through the queue, in order, until it is empty.
func (e *engine) drain() {
	for {
		e.omu.Lock()
		if len(e.queue) == 0 {
			e.queue = nil
			e.draining = false
			e.omu.Unlock()
			return
		}
		o := e.queue[0]
		e.queue[0] = outcome{}
		e.queue = e.queue[1:]
		e.omu.Unlock()
		if o.err != nil && !o.final && e.awaitsVerdict(o.r) {
			e.afterFailure(o.r, o.err)
		} else {
			deliver(o.r.x, o.err)
		}
		e.queued.Add(-1)
		e.end()
	}
}

// afterFailure decides what a failed record becomes once any cluster check
// in flight is over: the error it had, a ClusterChangedError (pinned), or a
// new attempt on a client made for the new cluster.
func (e *engine) afterFailure(r ref, err error) {
	x := r.x
	if errors.Is(err, kerr.UnknownTopicID) {
		// A topic id that stopped matching is how a cluster moved behind
		// the bootstrap address shows when no rebootstrap happened.
		e.follow.Watch.Check(false)
	}
	now, interrupted := e.settleWatch(r.ctx())
	if interrupted { // Close is closing the last client
		x.done(Result{}, err)
		return
	}
	c := e.cur.Load()
	swapped := c.seq != x.client() // another failure already moved on
	switch {
	case e.follow.Pinned && e.follow.Refuse != nil:
		// The change's callback ran before the verdict: refused says it.
		if r := e.refused.Load(); r != nil {
			x.done(Result{}, r)
		} else {
			x.done(Result{}, err)
		}
	case now == c.gen && !swapped:
		x.done(Result{}, err)
	case e.follow.Pinned:
		x.done(Result{}, &ClusterChangedError{Err: e.follow.Changed()})
	default:
		if nerr := e.followChange(now, x.client()); nerr != nil {
			x.done(Result{}, errors.Join(err, nerr))
			return
		}
		if e.txn.on {
			// Its transaction is on the old cluster: it cannot move.
			x.done(Result{}, e.txnBroken())
			return
		}
		e.resend(r, err)
	}
}

// settleWatch waits for the cluster verdict as long as ctx and the producer
// allow; interrupted is true when Close cut it short.
func (e *engine) settleWatch(ctx context.Context) (gen uint64, interrupted bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(e.stop, cancel)()
	gen = e.follow.Watch.Settle(ctx)
	return gen, e.stop.Err() != nil
}

// resend gives a fresh copy of x to the current client: the old record
// carries the old client's partition, offset and producer state.
func (e *engine) resend(old ref, err error) {
	x := old.x
	r := &x.rec
	fresh := newRef(&tag{ctx: old.ctx(), resent: true}, x.done, r.Topic, r.Key, r.Value, r.Headers, r.Partition, r.Timestamp)
	e.omu.Lock()
	if e.shut {
		e.omu.Unlock()
		x.done(Result{}, errors.Join(err, kgo.ErrClientClosed))
		return
	}
	e.beginLocked() // ended by settle, once fresh's promise ran
	e.omu.Unlock()
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
	next, err := e.follow.NewClient()
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
	e.omu.Lock()
	e.beginLocked() // Flush waits until the old client's records are back
	started := e.goLocked(func() { defer e.end(); closeClient(c.cl) })
	e.omu.Unlock()
	if !started { // Close joined already; cannot be, as it waits for e.mu first
		closeClient(c.cl)
		e.end()
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

// Flush waits until every record produced so far is acknowledged or failed:
// on a shared client (see Producer), the records of every producer sharing
// it, as with franz-go's Flush.
func (p *Producer[K, V]) Flush(ctx context.Context) error { return p.e.flush(ctx) }

func (e *engine) flush(ctx context.Context) error {
	// A failed record may wait for a cluster verdict and then go to a new
	// client, and a replaced client fails its records as it closes: flush,
	// wait for such records, and flush again until none is left, so that
	// every done callback has run when Flush returns.
	for {
		if err := e.cur.Load().cl.Flush(ctx); err != nil {
			return err
		}
		waited, err := e.waitIdle(ctx)
		if err != nil {
			return err
		}
		if !waited {
			return nil
		}
	}
}

// Close flushes (bounded by ctx) and closes the producer; records it is
// given afterwards fail with kgo.ErrClientClosed.
//
// Close of the last producer on a client (the only one, unless it is
// shared: see Producer) closes the client. Records still buffered when ctx
// ends fail with an error. When Close returns nil, no record is sent any
// more, not even one a cluster change would have sent again, and every
// done callback has run. When ctx ends first, Close returns its error at
// once and the closing finishes in the background (franz-go's own Close
// takes at most about a second more).
//
// Close of a producer whose client others still use flushes it, as Flush
// does, and leaves it open for them.
func (p *Producer[K, V]) Close(ctx context.Context) error {
	// A second Close of a producer closes again what the first did.
	last := p.e.isReleased()
	if !p.closed.Swap(true) {
		last = p.e.detach()
	}
	if !last {
		return p.e.flush(ctx)
	}
	return p.e.close(ctx)
}

// close flushes and closes the client; see Producer.Close.
func (e *engine) close(ctx context.Context) error {
	e.closed.Store(true)
	if e.cancel != nil {
		e.cancel()
	}
	e.stopAuth()
	err := e.flush(ctx)
	// franz-go's Close can take a while of its own (it gives a last client
	// metrics push up to 1s, which a broker holding requests delays): the
	// caller's context bounds Close, and the rest finishes behind it.
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.mu.Lock() // no client swap in progress
		e.omu.Lock()
		e.shut = true
		e.omu.Unlock()
		e.stopNow()
		cl := e.cur.Load().cl
		e.mu.Unlock()
		closeClient(cl)
		// Nothing is sent again now and nothing waits for a verdict: what
		// is left ends without waiting on the network.
		_, _ = e.waitIdle(context.Background())
		e.omu.Lock()
		e.joined = true
		e.omu.Unlock()
		e.wg.Wait()
	}()
	select {
	case <-done:
		return err
	case <-ctx.Done():
		if err == nil {
			err = context.Cause(ctx)
		}
		return fmt.Errorf("producer: close: the context ended first; the client finishes closing in the background: %w", err)
	}
}

// attribute returns the error to report for x, which failed with err: a
// record whose own partition was answered INCONSISTENT_METADATA while it
// was in flight failed because brokers stayed behind the token.
func (e *engine) attribute(x *inflight, err error) error {
	if aerr := e.authAttributed(x, err); aerr != nil {
		return aerr
	}
	at := e.follow.InconsistentOn
	if at == nil || e.follow.Inconsistent == nil {
		return err
	}
	// The clock's low 32 bits, compared as a wrapping difference.
	if int32(uint32(at(x.rec.Topic, x.rec.Partition))-x.tag.inc0) > 0 {
		return staleError(err)
	}
	if errors.Is(err, kgo.ErrRecordTimeout) {
		if int32(uint32(e.follow.Inconsistent.Load())-x.tag.inc0) > 0 {
			return staleError(err)
		}
		// Its topic's metadata may have been held back just before the
		// record came (the client's first metadata request).
		if held := e.follow.TopicHeldAt; held != nil {
			if at := held(x.rec.Topic); !at.IsZero() && at.After(x.rec.Timestamp.Add(-time.Second)) {
				return staleError(err)
			}
		}
	}
	return err
}

// staleError marks the error of a record that failed while brokers kept
// answering INCONSISTENT_METADATA. The wire layer turns such produce
// answers into NOT_ENOUGH_REPLICAS so that franz-go retries them with exact
// sequence numbers; once its budget is spent, franz-go reports that code,
// ErrRecordRetries or ErrRecordTimeout, and this puts the real cause first.
func staleError(err error) error {
	if errors.Is(err, consistency.ErrInconsistentMetadata) {
		return err
	}
	if errors.Is(err, kerr.NotEnoughReplicas) || errors.Is(err, kgo.ErrRecordRetries) || errors.Is(err, kgo.ErrRecordTimeout) {
		return fmt.Errorf("%w: %w", consistency.ErrInconsistentMetadata, err)
	}
	return err
}

// ClusterChangedError is returned for a record that failed because the
// cluster changed while the producer was pinned to its cluster. It wraps
// the rebootstrap package's error, which names both cluster ids.
type ClusterChangedError struct{ Err error }

func (e *ClusterChangedError) Error() string {
	return "producer: record not delivered: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *ClusterChangedError) Unwrap() error { return e.Err }
