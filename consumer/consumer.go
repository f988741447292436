// Package consumer is the typed consumer of a kconsist factory: a franz-go
// consumer whose requests carry the factory's consistency token, so its
// fetches, offset lookups and group joins see every topic the factory's admin
// client created.
//
// Three ways to read, each about as fast as franz-go's own PollFetches:
//
//   - Poll returns a slice of typed records that the next Poll reuses: the
//     records of one poll are valid until the next (copy one to keep it).
//   - AppendPoll appends them to a slice the caller passes and may reuse, so a
//     loop that reuses its slice allocates nothing per record.
//   - Records is an iterator that decodes every record into one reused value:
//     for r, err := range c.Records(ctx) { ... }.
//
// All three decode as franz-go hands records over, with no copy of their
// bytes: a Bytes() key or value is the slice franz-go fetched (see Bytes for
// how long it stays valid). A record that fails to deserialize is never
// dropped silently: it comes as a *DeserializeError naming its topic,
// partition and offset, next to the records that did decode.
//
// Commits: in a group, offsets of the records polled are committed
// automatically in the background (franz-go's default autocommit, every 5s,
// and on rebalance and Close). Call Commit to commit them now, for example
// before handing work off. Without a group nothing is committed.
//
// Rebalances, pause and seek, as in franz-go: the factory's OnPartitionsAssigned,
// OnPartitionsRevoked and OnPartitionsLost options call a function at each
// rebalance with the Group being rebalanced (commit in OnPartitionsRevoked:
// setting it replaces the commit on rebalance); with BlockRebalanceOnPoll a
// rebalance waits from a poll until AllowRebalance, so that records being
// processed are never revoked under the caller. PauseFetchTopics,
// PauseFetchPartitions and their Resume counterparts stop and restart
// fetching; SetOffsets seeks. Every one of them goes through the factory's
// client, so reads after a seek or a rebalance carry the token too, and
// pauses and callbacks outlive a cluster change.
//
// Who owns what: factory.NewConsumer has the factory's session build the
// first franz-go client and hands it to [New] in a link.Consumer, with the
// session's answers to two questions: has the cluster behind the bootstrap
// servers changed, and what comes next (link.Follower: a client built
// again on the new cluster, or the error of a consumer pinned to the old
// one), and does the cluster refuse the consumer's credentials
// (link.AuthWatch; a poll then returns a *kconsist.AuthError). The
// Consumer owns every client it is given, swaps to the next one itself,
// carrying its assignment and pauses over, and closes the one replaced;
// [Consumer.Close] closes them all. The session owns the cluster watcher
// and keeps nothing of the consumer's clients but their counters.
package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// ErrDeserialize wraps every deserialization error.
var ErrDeserialize = errors.New("consumer: deserialize")

// Header is a record header. It is franz-go's own type, so a consumed
// record's headers are franz-go's slice, not a copy.
type Header = kgo.RecordHeader

// Record is a consumed record.
type Record[K, V any] struct {
	Topic     string
	Partition int32
	// LeaderEpoch is the partition leader epoch the record was written in
	// (-1 for old message formats), as franz-go reports it.
	LeaderEpoch int32
	Offset      int64
	Key         K
	Value       V
	// Headers is franz-go's slice of the record's headers (nil when none).
	Headers   []Header
	Timestamp time.Time
	// Context is the record's context as franz-go left it: nil unless a
	// hook set one (kotel's tracer puts the record's span there) or the
	// client uses kgo.WithPools.
	Context context.Context
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

// Consumer consumes records with K keys and V values. Poll, AppendPoll and
// Records are meant for one goroutine; the other methods are safe for
// concurrent use. Make one with factory.NewConsumer; the zero value is not
// usable.
type Consumer[K, V any] struct {
	keys   Deserializer[K]
	values Deserializer[V]
	group  bool
	// keyBytes and valueBytes say the deserializer is Bytes(): the
	// record's slice is taken as it is, without a call.
	keyBytes, valueBytes bool

	// rest holds what a poll fetched and the caller has not taken yet (a
	// Records loop that stopped early): the next read starts there. Used
	// by the reading goroutine only.
	rest cursor
	// restGen is seekGen when rest was fetched or last trimmed: a
	// SetOffsets since (seekGen above it) has records of rest to drop.
	// Reading goroutine only.
	restGen uint64

	// seekGen counts SetOffsets calls; seeks holds those the reading
	// goroutine has not applied to rest yet, each with its count. Both
	// change under seekMu, so that a reader taking seeks sees every call
	// counted up to the seekGen it reads with them.
	seekMu  sync.Mutex
	seekGen atomic.Uint64
	seeks   []seek

	mu       sync.Mutex
	cl       *kgo.Client
	assigned map[string]map[int32]kgo.Offset
	changed  error // sticky: the cluster changed and the consumer cannot follow
	closed   bool  // Close was called
	cancel   func()
	auth     authState // link.Consumer.Auth; reading goroutine only
	// retiring counts clients a cluster change retired, closing in the
	// background; Close waits for them. Added to under mu while !closed
	// only, so never concurrently with Close's Wait.
	retiring sync.WaitGroup
	// retired: cl is closing already, retired by a cluster change that
	// the consumer could not follow.
	retired bool
	// leave bounds every group leave of the consumer's clients, the
	// retired ones' included; Close cancels it when its context ends.
	leave       context.Context
	cancelLeave context.CancelFunc
	// closeOnce starts the closing, which sets closeErr and then closes
	// closeDone.
	closeOnce sync.Once
	closeDone chan struct{}
	closeErr  error

	// polled is the slice Poll returns, reused by the next Poll, and
	// polledLen its length then (the slots that hold records). Used by
	// the reading goroutine only.
	polled    []Record[K, V]
	polledLen int
}

// New makes a consumer of l.Client, following the session as l says,
// decoding keys and values with keys and values. It is for
// factory.NewConsumer, its only caller, which seals l: code outside this
// module cannot name l's type, and a value of it that it reaches all the
// same (the zero value, by type inference; one filled by reflection with
// a client of its own, which carries no token) is not sealed and is
// refused with an error. A sealed l without a client, or a nil
// deserializer, is an error too.
//
// The consumer owns l.Client and every client l.Follow gives it: it
// closes them. It asks l.Follow for the next client at each cluster
// change, and l.Auth (when not nil) whether the cluster refuses it.
func New[K, V any](l link.Consumer, keys Deserializer[K], values Deserializer[V]) (*Consumer[K, V], error) {
	if !l.Sealed() {
		return nil, errors.New("consumer: New is for factory.NewConsumer: the link.Consumer given was not made by a factory")
	}
	if l.Client == nil {
		return nil, errors.New("consumer: New is for factory.NewConsumer: no client")
	}
	if keys == nil || values == nil {
		return nil, errors.New("consumer: New needs a key and a value deserializer")
	}
	c := newConsumer(l.Client, keys, values, l.Group)
	c.auth.watch = l.Auth
	if f := l.Follow; f != nil {
		c.cancel = f.OnChange(func() { c.followChange(f) })
	}
	return c, nil
}

// followChange goes on after a cluster change with what f gives: the
// next client, or the error polls return from then on.
func (c *Consumer[K, V]) followChange(f link.Follower) {
	c.mu.Lock()
	done := c.closed || c.changed != nil
	c.mu.Unlock()
	if done {
		return // nothing to follow with
	}
	next, err := f.Follow()
	c.mu.Lock()
	// What a read took from the old client and has not returned yet goes,
	// as the old client's buffer goes with it: counted before the next
	// client can hand over a record, so that none of its records is
	// dropped (see fetch).
	c.addSeek(nil)
	if err != nil {
		defer c.mu.Unlock()
		c.changed = err
		// The client has nothing left to read: close it, which also
		// wakes a Poll waiting for records.
		if !c.closed { // else Close closes it
			c.retire(c.cl)
			c.retired = true
		}
		return
	}
	if c.closed {
		c.mu.Unlock()
		next.Close() // the consumer was closed meanwhile
		return
	}
	old := c.cl
	c.cl = next
	if len(c.assigned) > 0 {
		next.AddConsumePartitions(c.assigned)
	}
	carryPauses(old, next)
	c.retire(old)
	c.mu.Unlock()
}

// retire closes cl in the background: its group and cluster are gone, and
// leaving the group may take until franz-go gives up (or Close's context
// ends), which must not hold up the cluster watcher or a Poll. With
// BlockRebalanceOnPoll, leaving would wait for an AllowRebalance that the
// user, now polling the next client, never makes on this one: allow it
// here. c.mu held, c not closed.
func (c *Consumer[K, V]) retire(cl *kgo.Client) {
	cl.AllowRebalance()
	c.retiring.Go(func() {
		_ = cl.LeaveGroupContext(c.leave) // its cluster is gone: nothing to report
		cl.Close()
	})
}

func (c *Consumer[K, V]) client() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl, c.changed
}

// newConsumer wraps cl; group says whether it consumes in a group.
func newConsumer[K, V any](cl *kgo.Client, keys Deserializer[K], values Deserializer[V], group bool) *Consumer[K, V] {
	c := &Consumer[K, V]{cl: cl, keys: keys, values: values, group: group}
	// Bytes() is a Deserializer[[]byte]: the record's slice is taken as
	// it is (see keyBytes).
	_, c.keyBytes = any(keys).(bytesDeserializer)
	_, c.valueBytes = any(values).(bytesDeserializer)
	c.leave, c.cancelLeave = context.WithCancel(context.Background())
	c.closeDone = make(chan struct{})
	return c
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

// Commit commits the offsets of every record polled so far (group consumers
// only).
func (c *Consumer[K, V]) Commit(ctx context.Context) error {
	if !c.group {
		return errors.New("consumer: Commit needs a group (set group.id)")
	}
	return c.Kgo().CommitUncommittedOffsets(ctx)
}

// Close leaves the group (committing what was polled, or calling
// OnPartitionsRevoked) and closes the client. With BlockRebalanceOnPoll it
// allows the rebalance first, since leaving is one. It returns nil once
// every client the consumer used is closed, those a cluster change replaced
// included, or the error of what failed: the LeaveGroup answer's error,
// or the context's error.
//
// ctx bounds leaving the group, the one step that waits on the network:
// when it ends first, Close returns its error at once, the leave requests
// in flight are abandoned and the closing finishes in the background. The
// group then learns the member is gone only when its session times out,
// and revokes the partitions then. (A rebalance callback that is running
// is waited for all the same, by franz-go.)
//
// After Close, polls return kgo.ErrClientClosed. The closing happens once:
// another Close waits for it (bounded by its own ctx) and returns its
// result.
func (c *Consumer[K, V]) Close(ctx context.Context) error {
	c.closeOnce.Do(c.startClose)
	select {
	case <-c.closeDone:
		return c.closeErr
	case <-ctx.Done():
		c.cancelLeave()
		return fmt.Errorf("consumer: close did not finish (leaving the group, closing the clients): %w", context.Cause(ctx))
	}
}

// startClose closes every client of c in the background, each once, and
// closes c.closeDone when done.
func (c *Consumer[K, V]) startClose() {
	c.mu.Lock()
	c.closed = true
	cl, retired := c.cl, c.retired
	c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	go func() {
		defer close(c.closeDone)
		defer c.cancelLeave()
		if !retired { // else a cluster change is closing it already
			cl.AllowRebalance()
			if c.group {
				if err := cl.LeaveGroupContext(c.leave); err != nil {
					c.closeErr = fmt.Errorf("consumer: leave the group: %w", err)
				}
			}
			cl.Close()
		}
		c.retiring.Wait()
	}()
}

func (c *Consumer[K, V]) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
