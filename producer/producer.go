package producer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
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

// Producer produces records with K keys and V values. It is safe for
// concurrent use. Make one with factory.NewProducer; the zero value is not
// usable.
//
// Producers made by one factory with the same settings share one franz-go
// client, whatever their key and value types: one producer id, one set of
// connections, one buffer, as franz-go means a client to be used.
//
// Flush and Close of a producer wait for its own records only, never for
// another producer's on the same client. Close of a producer flushes it
// (bounded by its context) and then fails its later records with
// kgo.ErrClientClosed; the client stays open for the others. Close of the
// last one closes the client, as Close of an unshared producer does.
type Producer[K, V any] struct {
	keys   Serializer[K]
	values Serializer[V]
	// rawKeys, rawValues: the serializer is Bytes(), so K (or V) is
	// []byte and a key (value) is its own bytes; prepare takes them
	// without a call.
	rawKeys, rawValues bool

	member // this producer on its engine
}

// New is made for package factory: make a producer with
// factory.NewProducer, which seals l. Code outside this module cannot name
// l's type, and a value of it that it reaches all the same (the zero
// value, by type inference; one filled by reflection with a ClientMaker of
// its own, whose clients carry no token) is not sealed and is refused with
// an error, as are nil serializers.
//
// It joins the producer to the client in l.Share, or makes one with
// l.Clients.
func New[K, V any](l link.Producer, keys Serializer[K], values Serializer[V]) (*Producer[K, V], error) {
	if !l.Sealed() {
		return nil, errors.New("producer: New is for factory.NewProducer: the link.Producer given was not made by a factory")
	}
	if keys == nil || values == nil {
		return nil, errors.New("producer: New needs a key and a value serializer")
	}
	mk := func() (link.ProducerClient, error) {
		if l.Clients == nil {
			return nil, errors.New("producer: no client to produce with")
		}
		cl, err := l.Clients.NewClient()
		if err != nil {
			return nil, err
		}
		e := newEngine(cl, l)
		e.Join()
		return e, nil
	}
	var c link.ProducerClient
	var err error
	if l.Share != nil {
		c, err = l.Share.Join(mk)
	} else {
		c, err = mk()
	}
	if err != nil {
		return nil, err
	}
	// Every client in a Share was made by mk.
	e, ok := c.(*engine)
	if !ok {
		return nil, fmt.Errorf("producer: a shared client of type %T is not a producer's", c)
	}
	return newMember[K, V](e, keys, values), nil
}

// newProducer wraps cl in a producer that is the only one on it, following
// nothing (tests add what they follow with withFollow).
func newProducer[K, V any](cl *kgo.Client, keys Serializer[K], values Serializer[V]) *Producer[K, V] {
	e := newEngine(cl, link.Producer{})
	e.Join()
	return newMember(e, keys, values)
}

// withFollow makes p's engine meet a session as l says, before p is used.
func (p *Producer[K, V]) withFollow(l link.Producer) *Producer[K, V] {
	p.e.follow(l)
	return p
}

// newMember returns a producer on e, which counted it already.
func newMember[K, V any](e *engine, keys Serializer[K], values Serializer[V]) *Producer[K, V] {
	p := &Producer[K, V]{keys: keys, values: values}
	p.e = e
	p.eps.init()
	e.add(&p.member)
	// A serializer of type bytesSerializer is a Serializer[[]byte]: K
	// (V) is then []byte itself (see prepare).
	_, p.rawKeys = any(keys).(bytesSerializer)
	_, p.rawValues = any(values).(bytesSerializer)
	return p
}

// Kgo returns the current underlying franz-go client. Producers that share
// it (see Producer) return the same one; close the producers, not it.
func (p *Producer[K, V]) Kgo() *kgo.Client {
	return p.e.cur.Load().cl
}

// prepare serializes r into a new inflight.
func (p *Producer[K, V]) prepare(ctx context.Context, r *Record[K, V], done func(Result, error)) (ref, error) {
	if r.Topic == "" {
		return ref{}, fmt.Errorf("%w: record has no topic", ErrSerialize)
	}
	var k, v []byte
	var err error
	if p.rawKeys {
		// K is []byte (see newMember): the key is the bytes to send.
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
	return newRef(p.tagNow(ctx), done, r.Topic, k, v, r.Headers, r.Partition, r.Timestamp), nil
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
	begin(x)
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
	clock0 := p.e.attr.now()
	topic := r.Topic
	if !p.e.tasks.start(func() { p.e.sendSync(ctx, xs[:], recs[:]) }) {
		p.e.sendSync(ctx, xs[:], recs[:])
	}
	select {
	case <-w.ch:
		return w.r, w.err
	case <-ctx.Done():
		return Result{}, p.e.attr.gaveUp(ctx, topic, clock0)
	}
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
	beginAll(xs)
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
	begin(x)
	if p.closed.Load() {
		p.e.refuse(x, kgo.ErrClientClosed)
		return nil
	}
	p.e.send(x)
	return nil
}

func ignoreResult(Result, error) {}

// Flush waits until every record this producer was given before the call
// is acknowledged or failed, and its done callback returned. Records given
// meanwhile (by other goroutines) are not waited for, so Flush ends while
// others keep producing. Records of other producers sharing the client
// (see Producer) are sent at once meanwhile, lingering no more, but Flush
// does not wait for them.
func (p *Producer[K, V]) Flush(ctx context.Context) error { return p.flush(ctx) }

// Close flushes (bounded by ctx) and closes the producer; records it is
// given once Close began fail with kgo.ErrClientClosed, unsent, and Close
// does not wait for them: it ends while other goroutines keep producing.
//
// Close of the last producer on a client (the only one, unless it is
// shared: see Producer) closes the client. Records still buffered when ctx
// ends fail with an error. When Close returns nil, no record is sent any
// more, not even one a cluster change would have sent again, and every
// done callback of the records given before Close has run (a record given
// after Close returned gets its callback before ProduceAsync returns).
// When ctx ends first, Close returns its error at
// once and the closing finishes in the background (franz-go's own Close
// takes at most about a second more).
//
// Close of a producer whose client others still use flushes it, as Flush
// does, and leaves the client open for them.
func (p *Producer[K, V]) Close(ctx context.Context) error { return p.close(ctx) }
