// Package producer is the typed producer of a kconsist factory: a franz-go
// producer whose requests carry the factory's consistency token, so it sees
// every topic the factory's admin client created or changed.
//
// Records are serialized before anything is sent: a serialization error is
// returned by Produce or ProduceAsync and nothing reaches the broker.
// Producers are idempotent by default (acks=all), so the retries the
// consistency protocol may cause never duplicate or reorder records.
package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
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

// Producer produces records with K keys and V values. It is safe for
// concurrent use.
type Producer[K, V any] struct {
	cl     *kgo.Client
	keys   Serializer[K]
	values Serializer[V]
}

// New wraps cl, a client made by a factory. Most users call
// factory.NewProducer.
func New[K, V any](cl *kgo.Client, keys Serializer[K], values Serializer[V]) *Producer[K, V] {
	return &Producer[K, V]{cl: cl, keys: keys, values: values}
}

// Kgo returns the underlying franz-go client.
func (p *Producer[K, V]) Kgo() *kgo.Client { return p.cl }

func (p *Producer[K, V]) record(r Record[K, V]) (*kgo.Record, error) {
	if r.Topic == "" {
		return nil, fmt.Errorf("%w: record has no topic", ErrSerialize)
	}
	k, err := p.keys.Serialize(r.Topic, r.Key)
	if err != nil {
		return nil, fmt.Errorf("%w: key for topic %s: %w", ErrSerialize, r.Topic, err)
	}
	v, err := p.values.Serialize(r.Topic, r.Value)
	if err != nil {
		return nil, fmt.Errorf("%w: value for topic %s: %w", ErrSerialize, r.Topic, err)
	}
	kr := &kgo.Record{Topic: r.Topic, Key: k, Value: v, Partition: r.Partition, Timestamp: r.Timestamp}
	if len(r.Headers) > 0 {
		kr.Headers = make([]kgo.RecordHeader, len(r.Headers))
		for i, h := range r.Headers {
			kr.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
		}
	}
	return kr, nil
}

func result(r *kgo.Record) Result {
	return Result{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
}

// Produce sends one record and waits for its acknowledgement.
func (p *Producer[K, V]) Produce(ctx context.Context, r Record[K, V]) (Result, error) {
	kr, err := p.record(r)
	if err != nil {
		return Result{}, err
	}
	res := p.cl.ProduceSync(ctx, kr)
	got, err := res.First()
	if err != nil {
		return Result{}, err
	}
	return result(got), nil
}

// ProduceAsync serializes r and queues it; done is called once with the
// outcome (from a franz-go goroutine: keep it short). A serialization error
// is returned at once and done is not called.
func (p *Producer[K, V]) ProduceAsync(ctx context.Context, r Record[K, V], done func(Result, error)) error {
	kr, err := p.record(r)
	if err != nil {
		return err
	}
	p.cl.Produce(ctx, kr, func(got *kgo.Record, err error) {
		if done == nil {
			return
		}
		if err != nil {
			done(Result{}, err)
			return
		}
		done(result(got), nil)
	})
	return nil
}

// Flush waits until every record produced so far is acknowledged or failed.
func (p *Producer[K, V]) Flush(ctx context.Context) error { return p.cl.Flush(ctx) }

// Close flushes (bounded by ctx) and closes the producer. Records still
// buffered when ctx ends fail with an error.
func (p *Producer[K, V]) Close(ctx context.Context) error {
	err := p.cl.Flush(ctx)
	p.cl.Close()
	return err
}
