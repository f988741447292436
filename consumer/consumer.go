// Package consumer is the typed consumer of a kconsist factory: a franz-go
// consumer whose requests carry the factory's consistency token, so its
// fetches, offset lookups and group joins see every topic the factory's admin
// client created.
//
// Poll returns typed records. A record that fails to deserialize is never
// dropped silently: Poll returns it as a *DeserializeError naming its topic,
// partition and offset, next to the records that did decode.
//
// Commits: in a group, offsets of the records Poll returned are committed
// automatically in the background (franz-go's default autocommit, every 5s,
// and on rebalance and Close). Call Commit to commit them now, for example
// before handing work off. Without a group nothing is committed.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrDeserialize wraps every deserialization error.
var ErrDeserialize = errors.New("consumer: deserialize")

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// Record is a consumed record.
type Record[K, V any] struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       K
	Value     V
	Headers   []Header
	Timestamp time.Time
}

// DeserializeError reports a record whose key or value did not decode.
type DeserializeError struct {
	Topic     string
	Partition int32
	Offset    int64
	Field     string // "key" or "value"
	Err       error
}

func (e *DeserializeError) Error() string {
	return fmt.Sprintf("consumer: deserialize %s of %s[%d]@%d: %v", e.Field, e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap returns ErrDeserialize and the deserializer's error.
func (e *DeserializeError) Unwrap() []error { return []error{ErrDeserialize, e.Err} }

// FetchError reports a fetch error for a partition (or the client, with
// Partition -1).
type FetchError struct {
	Topic     string
	Partition int32
	Err       error
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("consumer: fetch %s[%d]: %v", e.Topic, e.Partition, e.Err)
}

func (e *FetchError) Unwrap() error { return e.Err }

// Consumer consumes records with K keys and V values. Poll is meant for one
// goroutine; the other methods are safe for concurrent use.
type Consumer[K, V any] struct {
	keys   Deserializer[K]
	values Deserializer[V]
	group  bool

	mu       sync.Mutex
	cl       *kgo.Client
	assigned map[string]map[int32]kgo.Offset
	changed  error // sticky: the pinned cluster is gone
	closed   bool  // Close was called
	cancel   func()
	// retiring counts clients a cluster change retired, closing in the
	// background; Close waits for them. Added to under mu while !closed
	// only, so never concurrently with Close's Wait.
	retiring sync.WaitGroup
}

// ClusterWatch reports cluster changes behind the bootstrap servers; the
// factory provides it.
type ClusterWatch interface {
	OnChange(fn func()) (cancel func())
}

// Follow configures how a consumer reacts to a cluster change.
type Follow struct {
	Watch ClusterWatch
	// Pinned consumers stop: Poll returns Changed() from then on.
	Pinned  bool
	Changed func() error
	// NewClient makes the client that takes over after a change: franz-go
	// stops consuming a topic whose id changed, and offsets of one cluster
	// mean nothing in another, so a consumer that follows starts afresh:
	// in a group where auto.offset.reset says, and assigned partitions at
	// the offsets first given to Assign.
	NewClient func() (*kgo.Client, error)
}

// WithFollow makes c react to cluster changes as f says. The factory calls
// it before c is used.
func (c *Consumer[K, V]) WithFollow(f Follow) *Consumer[K, V] {
	if f.Watch != nil {
		c.cancel = f.Watch.OnChange(func() { c.followChange(f) })
	}
	return c
}

func (c *Consumer[K, V]) followChange(f Follow) {
	if f.Pinned {
		// Nothing of the pinned cluster is reachable any more: close the
		// client, which also wakes a Poll that waits for records.
		c.mu.Lock()
		defer c.mu.Unlock()
		c.changed = f.Changed()
		if !c.closed { // else Close closes it
			c.retire(c.cl)
		}
		return
	}
	next, err := f.NewClient()
	c.mu.Lock()
	if err == nil && c.closed {
		c.mu.Unlock()
		next.Close() // the consumer was closed meanwhile
		return
	}
	if err != nil {
		c.changed = fmt.Errorf("consumer: follow the cluster change: %w", err)
		c.mu.Unlock()
		return
	}
	old := c.cl
	c.cl = next
	if len(c.assigned) > 0 {
		next.AddConsumePartitions(c.assigned)
	}
	c.retire(old)
	c.mu.Unlock()
}

// retire closes cl in the background: its group and cluster are gone, and
// leaving the group may take until franz-go gives up, which must not hold
// up the cluster watcher or a Poll. c.mu held, c not closed.
func (c *Consumer[K, V]) retire(cl *kgo.Client) {
	c.retiring.Go(cl.Close)
}

func (c *Consumer[K, V]) client() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl, c.changed
}

// New wraps cl, a client made by a factory; group says whether it consumes
// in a group. Most users call factory.NewConsumer.
func New[K, V any](cl *kgo.Client, keys Deserializer[K], values Deserializer[V], group bool) *Consumer[K, V] {
	return &Consumer[K, V]{cl: cl, keys: keys, values: values, group: group}
}

// Kgo returns the underlying franz-go client.
func (c *Consumer[K, V]) Kgo() *kgo.Client {
	cl, _ := c.client()
	return cl
}

// Assign adds partitions to consume directly, outside any group, starting at
// the given offsets (kgo.NewOffset().AtStart(), .At(n), ...).
func (c *Consumer[K, V]) Assign(partitions map[string]map[int32]kgo.Offset) error {
	if c.group {
		return errors.New("consumer: Assign on a group consumer; partitions come from the group")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.assigned == nil {
		c.assigned = map[string]map[int32]kgo.Offset{}
	}
	for t, ps := range partitions {
		if c.assigned[t] == nil {
			c.assigned[t] = map[int32]kgo.Offset{}
		}
		for p, o := range ps {
			c.assigned[t][p] = o
		}
	}
	c.cl.AddConsumePartitions(partitions)
	return nil
}

// Poll waits until records are available or ctx ends, and returns at most
// max records (all buffered ones if max <= 0). The error joins every
// *DeserializeError and *FetchError of this poll; records that decoded are
// returned alongside it. When ctx ends with nothing fetched, Poll returns
// ctx's error.
func (c *Consumer[K, V]) Poll(ctx context.Context, max int) ([]Record[K, V], error) {
	cl, changed := c.client()
	if changed != nil {
		return nil, changed
	}
	fs := cl.PollRecords(ctx, max)
	for fs.IsClientClosed() {
		// Closed by Close, by a pinned consumer's cluster change, or
		// replaced by a client that followed a change: poll that one.
		next, changed := c.client()
		switch {
		case changed != nil:
			return nil, changed
		case next == cl || c.isClosed():
			return nil, kgo.ErrClientClosed
		}
		cl = next
		fs = cl.PollRecords(ctx, max)
	}
	var errs []error
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		errs = append(errs, &FetchError{Topic: t, Partition: p, Err: err})
	})
	out := make([]Record[K, V], 0, fs.NumRecords())
	fs.EachRecord(func(r *kgo.Record) {
		k, err := c.keys.Deserialize(r.Topic, r.Key)
		if err != nil {
			errs = append(errs, &DeserializeError{r.Topic, r.Partition, r.Offset, "key", err})
			return
		}
		v, err := c.values.Deserialize(r.Topic, r.Value)
		if err != nil {
			errs = append(errs, &DeserializeError{r.Topic, r.Partition, r.Offset, "value", err})
			return
		}
		rec := Record[K, V]{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: k, Value: v, Timestamp: r.Timestamp}
		if len(r.Headers) > 0 {
			rec.Headers = make([]Header, len(r.Headers))
			for i, h := range r.Headers {
				rec.Headers[i] = Header{Key: h.Key, Value: h.Value}
			}
		}
		out = append(out, rec)
	})
	if len(out) == 0 && len(errs) == 0 && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return out, errors.Join(errs...)
}

// Commit commits the offsets of every record Poll has returned (group
// consumers only).
func (c *Consumer[K, V]) Commit(ctx context.Context) error {
	if !c.group {
		return errors.New("consumer: Commit needs a group (set group.id)")
	}
	return c.Kgo().CommitUncommittedOffsets(ctx)
}

// Close leaves the group (committing what was polled) and closes the client.
// It returns once every client the consumer used is closed, those a cluster
// change replaced included.
func (c *Consumer[K, V]) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	c.Kgo().Close()
	c.retiring.Wait()
}

func (c *Consumer[K, V]) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
