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
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
)

// ErrSerialize wraps every serialization error.
var ErrSerialize = errors.New("producer: serialize")

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

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

// ClusterWatch tells a producer when the cluster behind its bootstrap
// servers changed. The factory provides it.
type ClusterWatch interface {
	// Generation counts the cluster changes seen so far.
	Generation() uint64
	// Settle waits for cluster checks in flight and returns the
	// generation then.
	Settle(ctx context.Context) uint64
	// Check starts a check of which cluster the bootstrap servers name
	// (Settle waits for it); rebootstrapped is false when no rebootstrap
	// prompted it.
	Check(rebootstrapped bool)
	// OnChange calls fn after each cluster change, until cancel.
	OnChange(fn func()) (cancel func())
}

// Follow configures how a producer reacts to cluster changes; the factory
// sets it.
type Follow struct {
	Watch ClusterWatch
	// Pinned producers fail records with Changed() instead of following.
	Pinned  bool
	Changed func() error
	// NewClient makes the client that takes over after a change.
	NewClient func() (*kgo.Client, error)
	// Inconsistent counts INCONSISTENT_METADATA answers seen by the
	// factory's clients. A record that fails after the count moved failed
	// because brokers stayed behind the token, whatever error franz-go
	// gave up with. May be nil.
	Inconsistent func() uint64
}

// Producer produces records with K keys and V values. It is safe for
// concurrent use.
type Producer[K, V any] struct {
	keys   Serializer[K]
	values Serializer[V]
	// rawKeys, rawValues: the serializer is Bytes(), so K (or V) is
	// []byte and a key (value) is its own bytes; prepare takes them
	// without a call.
	rawKeys, rawValues bool

	e engine
}

// engine is what a producer does with a serialized record: give it to the
// current client, see its outcome, follow cluster changes. It does not
// depend on K and V, so its per-record methods are plain functions, called
// without the dictionary a generic method takes.
type engine struct {
	follow Follow

	promise func(*kgo.Record, error) // e.promised, made once

	cur    atomic.Pointer[current] // read on every record
	mu     sync.Mutex              // serializes replacing cur
	topics sync.Map
	cancel func()
	closed atomic.Bool

	// Records between a failure and their outcome (waiting for a cluster
	// verdict, or being sent again); Flush waits for them.
	omu         sync.Mutex
	outstanding int
	idle        chan struct{} // closed when outstanding drops to zero
}

func (e *engine) begin() {
	e.omu.Lock()
	if e.outstanding == 0 {
		e.idle = make(chan struct{})
	}
	e.outstanding++
	e.omu.Unlock()
}

func (e *engine) end() {
	e.omu.Lock()
	e.outstanding--
	if e.outstanding == 0 {
		close(e.idle)
	}
	e.omu.Unlock()
}

// waitIdle waits until no failed record awaits its outcome; it reports
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
	return &current{cl: cl, gen: gen, seq: seq &^ hookedLayout, hooked: recordHooks(cl)}
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

// New wraps cl, a client made by a factory. Most users call
// factory.NewProducer.
func New[K, V any](cl *kgo.Client, keys Serializer[K], values Serializer[V]) *Producer[K, V] {
	p := &Producer[K, V]{keys: keys, values: values}
	// A serializer of type bytesSerializer is a Serializer[[]byte]: K
	// (V) is then []byte itself (see prepare).
	_, p.rawKeys = any(keys).(bytesSerializer)
	_, p.rawValues = any(values).(bytesSerializer)
	p.e.promise = p.e.promised
	p.e.cur.Store(newCurrent(cl, 0, 0))
	return p
}

// WithFollow makes p react to cluster changes as f says. The factory calls
// it before p is used.
//
// A pinned producer whose client cannot reach its cluster any more would
// keep records buffered until their delivery timeout (franz-go's default
// has none): on a change it purges its topics from the client, which fails
// the records at once, and they are reported as ClusterChangedError.
func (p *Producer[K, V]) WithFollow(f Follow) *Producer[K, V] {
	e := &p.e
	e.follow = f
	if f.Watch != nil {
		c := e.cur.Load()
		e.cur.Store(newCurrent(c.cl, f.Watch.Generation(), c.seq))
		if f.Pinned {
			e.cancel = f.Watch.OnChange(e.failBuffered)
		}
	}
	return p
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

// Kgo returns the current underlying franz-go client.
func (p *Producer[K, V]) Kgo() *kgo.Client {
	return p.e.cur.Load().cl
}

// inflight is one record on its way: the kgo.Record franz-go sends and what
// its promise needs, in one allocation. The record is the first field, so
// the promise (one function shared by every record) gets back to its
// inflight from the *kgo.Record franz-go hands it (see promised).
//
// It is 16 bytes more than a kgo.Record (176 against 160, both Go size
// classes) and holds one pointer more, the caller's callback, which franz-go
// would otherwise hold: for every buffered record the garbage collector
// scans these bytes in each cycle, and every byte allocated per record
// brings the next cycle closer. Extra pointers here were once most of what
// the producer cost over franz-go (see BENCHMARKS.md), so nothing goes here
// that can be found elsewhere: the client a record was given to is a number
// (its current's seq, which also tells whether the client was replaced
// since), and the INCONSISTENT_METADATA count only needs its low bits to
// tell a change.
//
// The record's Context starts as the caller's, as with franz-go. Hooks may
// replace it (a tracing hook wraps it; a hook may cancel what it wrapped
// when the record is unbuffered, before the promise runs), so decisions
// after a failure use the caller's own (see caller). For a client with
// such hooks the inflight is the first field of a hookedInflight, which
// keeps it; seq says which of the two an inflight is.
type inflight struct {
	rec  kgo.Record
	done func(Result, error)
	seq  uint32 // current.seq of the client it was given to, | hookedLayout
	inc0 uint32 // low bits of the INCONSISTENT_METADATA count when it was given
}

// hookedLayout marks, in inflight.seq, an inflight that is the first field
// of a hookedInflight.
const hookedLayout = 1 << 31

// hookedInflight is the inflight of a record given to a client whose hooks
// see records.
type hookedInflight struct {
	inflight
	ctx context.Context // the caller's
}

// These lines do not compile unless the conversions of promised and hooked
// start at the first field.
var (
	_ [0]struct{} = [unsafe.Offsetof(inflight{}.rec)]struct{}{}
	_ [0]struct{} = [unsafe.Offsetof(hookedInflight{}.inflight)]struct{}{}
)

// newInflight allocates an inflight, inside a hookedInflight when hooked.
func newInflight(hooked bool) *inflight {
	if hooked {
		h := &hookedInflight{}
		h.seq = hookedLayout
		return &h.inflight
	}
	return &inflight{}
}

// hooked returns the hookedInflight x is the first field of, or nil.
func (x *inflight) hooked() *hookedInflight {
	if x.seq&hookedLayout == 0 {
		return nil
	}
	return (*hookedInflight)(unsafe.Pointer(x))
}

// client is the seq of the client x was given to.
func (x *inflight) client() uint32 { return x.seq &^ hookedLayout }

// caller is the context the record was produced with.
func (x *inflight) caller() context.Context {
	if h := x.hooked(); h != nil && h.ctx != nil {
		return h.ctx
	}
	return x.rec.Context // no hook could have replaced it
}

// prepare serializes r into a new inflight.
func (p *Producer[K, V]) prepare(ctx context.Context, r *Record[K, V], done func(Result, error)) (*inflight, error) {
	if r.Topic == "" {
		return nil, fmt.Errorf("%w: record has no topic", ErrSerialize)
	}
	var k, v []byte
	var err error
	if p.rawKeys {
		// K is []byte (see New): the key is the bytes to send.
		k, _ = any(r.Key).([]byte)
	} else if k, err = p.keys.Serialize(r.Topic, r.Key); err != nil {
		return nil, fmt.Errorf("%w: key for topic %s: %w", ErrSerialize, r.Topic, err)
	}
	if p.rawValues {
		v, _ = any(r.Value).([]byte)
	} else if v, err = p.values.Serialize(r.Topic, r.Value); err != nil {
		return nil, fmt.Errorf("%w: value for topic %s: %w", ErrSerialize, r.Topic, err)
	}
	if ctx == nil { // as franz-go takes it
		ctx = context.Background()
	}
	// Field by field: assigning a whole kgo.Record to the heap object
	// would copy its zero fields too, under the GC's write barrier.
	x := newInflight(p.e.cur.Load().hooked)
	x.done = done
	x.rec.Context = ctx
	x.rec.Topic = r.Topic
	if k != nil { // a null key, most often: the field is nil already
		x.rec.Key = k
	}
	if v != nil {
		x.rec.Value = v
	}
	x.rec.Partition = r.Partition
	if !r.Timestamp.IsZero() { // franz-go stamps the others
		x.rec.Timestamp = r.Timestamp
	}
	if len(r.Headers) > 0 {
		x.rec.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			x.rec.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return x, nil
}

func result(r *kgo.Record) Result {
	return Result{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
}

// Produce sends one record and waits for its acknowledgement.
func (p *Producer[K, V]) Produce(ctx context.Context, r Record[K, V]) (Result, error) {
	type outcome struct {
		r   Result
		err error
	}
	ch := make(chan outcome, 1)
	x, err := p.prepare(ctx, &r, func(r Result, err error) { ch <- outcome{r, err} })
	if err != nil {
		return Result{}, err
	}
	p.e.send(x)
	o := <-ch
	return o.r, o.err
}

// ProduceAsync serializes r and queues it; done is called once with the
// outcome (from a franz-go goroutine: keep it short). A serialization error
// is returned at once and done is not called.
func (p *Producer[K, V]) ProduceAsync(ctx context.Context, r Record[K, V], done func(Result, error)) error {
	if done == nil {
		done = ignoreResult
	}
	x, err := p.prepare(ctx, &r, done)
	if err != nil {
		return err
	}
	p.e.send(x)
	return nil
}

func ignoreResult(Result, error) {}

// send gives x to the current client; x.done is called once with the final
// outcome.
func (e *engine) send(x *inflight) {
	c := e.cur.Load()
	if c.hooked && x.hooked() == nil {
		// Made for a client without such hooks, which was replaced
		// since: move it to the layout that keeps the caller's context.
		// franz-go has not seen it yet.
		y := newInflight(true)
		y.rec, y.done = x.rec, x.done
		x = y
	}
	x.seq = c.seq | x.seq&hookedLayout
	if e.follow.Pinned {
		if _, ok := e.topics.Load(x.rec.Topic); !ok {
			e.topics.Store(x.rec.Topic, struct{}{})
		}
	}
	if n := e.follow.Inconsistent; n != nil {
		x.inc0 = uint32(n())
	}
	if h := x.hooked(); h != nil {
		h.ctx = x.rec.Context // before any hook sees the record
	}
	c.cl.Produce(x.caller(), &x.rec, e.promise)
}

// promised is the promise of every record: got is the &x.rec that send gave
// franz-go (franz-go hands a promise the record it was given), the first
// field of an inflight, so got is a pointer to that inflight.
func (e *engine) promised(got *kgo.Record, err error) {
	x := (*inflight)(unsafe.Pointer(got))
	if err == nil {
		x.done(result(got), nil)
		return
	}
	e.failed(x, err)
}

// failed handles a record franz-go failed with err.
func (e *engine) failed(x *inflight, err error) {
	if n := e.follow.Inconsistent; n != nil && uint32(n()) != x.inc0 {
		err = staleError(err)
	}
	if e.follow.Watch == nil || x.caller().Err() != nil {
		x.done(Result{}, err)
		return
	}
	// The promise runs on a franz-go goroutine, which must not block:
	// wait for the cluster verdict elsewhere.
	e.begin()
	go e.afterFailure(x, err)
}

// afterFailure decides what a failed record becomes once any cluster check
// in flight is over: the error it had, a ClusterChangedError (pinned), or a
// new attempt on a client made for the new cluster.
func (e *engine) afterFailure(x *inflight, err error) {
	defer e.end() // after done ran, or the record went to a client again
	if errors.Is(err, kerr.UnknownTopicID) {
		// A topic id that stopped matching is how a cluster moved behind
		// the bootstrap address shows when no rebootstrap happened.
		e.follow.Watch.Check(false)
	}
	now := e.follow.Watch.Settle(x.caller())
	c := e.cur.Load()
	swapped := c.seq != x.client() // another failure already moved on
	switch {
	case now == c.gen && !swapped:
		x.done(Result{}, err)
	case e.follow.Pinned:
		x.done(Result{}, &ClusterChangedError{Err: e.follow.Changed()})
	default:
		if nerr := e.followChange(now, x.client()); nerr != nil {
			x.done(Result{}, errors.Join(err, nerr))
			return
		}
		// A fresh record: the old one carries the old client's
		// partition, offset and producer state.
		fresh := newInflight(e.cur.Load().hooked)
		fresh.done = x.done
		r := &x.rec
		fresh.rec = kgo.Record{Context: x.caller(), Topic: r.Topic, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp, Partition: r.Partition}
		e.send(fresh)
	}
}

// followChange makes a client for generation gen current, replacing the
// client numbered old (the one a record failed on) if it still is. franz-go keeps the
// old cluster's topic ids and producer id, so a fresh client is the clean
// way to follow the change; the old one is closed, which fails its other
// buffered records so that they come here too.
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
	e.cur.Store(newCurrent(next, gen, c.seq+1))
	go c.cl.Close()
	return nil
}

// Flush waits until every record produced so far is acknowledged or failed.
func (p *Producer[K, V]) Flush(ctx context.Context) error { return p.e.flush(ctx) }

func (e *engine) flush(ctx context.Context) error {
	// A failed record may wait for a cluster verdict and then go to a new
	// client: flush, wait for such records, and flush again until none is
	// left, so that every done callback has run when Flush returns.
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

// Close flushes (bounded by ctx) and closes the producer. Records still
// buffered when ctx ends fail with an error. No record is sent after Close
// returns, not even one a cluster change would have sent again.
func (p *Producer[K, V]) Close(ctx context.Context) error {
	e := &p.e
	e.closed.Store(true)
	if e.cancel != nil {
		e.cancel()
	}
	err := e.flush(ctx)
	e.mu.Lock() // no client swap in progress
	cl := e.cur.Load().cl
	e.mu.Unlock()
	cl.Close()
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
