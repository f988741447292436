package consumer

import (
	"context"
	"errors"
	"iter"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Poll waits until records are available or ctx ends, and returns at most
// max records; with max <= 0, at most 4096. What the poll fetched beyond
// that waits for the next Poll, which returns at once: in a group franz-go
// keeps it buffered, not yet counted as polled (autocommit leaves it
// alone); a consumer of assigned partitions, which commits nothing, takes
// the whole fetch and keeps the rest itself, so that franz-go fetches
// again at once (see take). The error joins every
// *DeserializeError and *FetchError of this poll; records that decoded are
// returned alongside it. When ctx ends with nothing fetched, Poll returns
// ctx's error; when the cluster refuses the consumer's credentials or TLS
// settings, a *kconsist.AuthError.
//
// The slice is the consumer's own, and the next Poll reuses its memory:
// the records it holds are valid until the next Poll. Keep a record by
// copying it (r := recs[i] is a copy; &recs[i] is not), or all of them
// with slices.Clone(recs); its key, value and headers stay valid either
// way (see Bytes). Appending to the slice copies it (its capacity is its
// length), so the next Poll never writes over what was appended. Reusing
// the memory, and a batch that stays in the CPU's cache, is what makes
// Poll as fast as franz-go's own PollFetches: a new slice per poll costs
// more than decoding the records. AppendPoll fills a slice the caller
// gives instead.
func (c *Consumer[K, V]) Poll(ctx context.Context, max int) ([]Record[K, V], error) {
	recs, touched, err := c.appendPoll(ctx, c.polled[:0], max)
	// Let go of what the slots past this poll's records held (the poll
	// before's records, a record that did not decode), so that the
	// memory of the fetches they come from can go.
	if touched < c.polledLen {
		touched = c.polledLen
	}
	clear(recs[len(recs):touched])
	c.polled, c.polledLen = recs, len(recs)
	return recs[:len(recs):len(recs)], err
}

// pollBatch is how many records Poll and AppendPoll return at most when
// not told: the decoded records of a batch (4096 * 144 bytes for Bytes()
// keys and values) stay in the CPU's cache between the decoding and the
// caller's loop. A whole poll of 1,000,000 records of 100 bytes on kfake
// is 125,000 records, 18 MB decoded, and reading them back from memory
// cost Poll 10-20% of its throughput against kgo's PollFetches.
const pollBatch = 4096

// AppendPoll is Poll appending to dst: it returns dst with the polled
// records appended, growing it only when it lacks room. Passing the
// previous result back as dst[:0] reuses its memory, so the records of
// one poll are valid until the next; copy what must outlive it.
func (c *Consumer[K, V]) AppendPoll(ctx context.Context, dst []Record[K, V], max int) ([]Record[K, V], error) {
	dst, _, err := c.appendPoll(ctx, dst, max)
	return dst, err
}

// appendPoll is AppendPoll, also returning how many slots of dst's memory
// it wrote to: past the records returned, those of records that did not
// decode.
func (c *Consumer[K, V]) appendPoll(ctx context.Context, dst []Record[K, V], max int) ([]Record[K, V], int, error) {
	if max <= 0 {
		max = pollBatch
	}
	var errs []error
	if c.seekGen.Load() != c.restGen {
		c.dropSeeked()
	}
	if c.rest.empty() {
		fs, gen, err := c.fetch(ctx, c.take(max))
		if err != nil {
			return dst, len(dst), err
		}
		errs = fetchErrors(fs, errs)
		c.rest.reset(fs)
		c.restGen = gen
	}
	n := c.rest.remaining(max)
	dst = slices.Grow(dst, n)
	start, touched := len(dst), len(dst)
	for range n {
		// Decode straight into the slot: a Record is large, and building
		// it aside and copying it in costs as much as the decoding.
		dst = dst[:len(dst)+1]
		if touched < len(dst) {
			touched = len(dst)
		}
		if err := c.decode(c.rest.next(), &dst[len(dst)-1]); err != nil {
			dst = dst[:len(dst)-1]
			errs = append(errs, err)
		}
	}
	if len(dst) == start && len(errs) == 0 && ctx.Err() != nil {
		return dst, touched, ctx.Err()
	}
	return dst, touched, errors.Join(errs...)
}

// Records returns an iterator over the records of c, polling for more as
// it goes, until ctx ends:
//
//	for r, err := range c.Records(ctx) {
//		if err != nil {
//			// a *DeserializeError or *FetchError: the loop goes on
//			continue
//		}
//		use(r.Key, r.Value)
//	}
//
// Each record is decoded into one value that the iterator reuses: r is
// valid until the loop body returns; copy *r (or its fields) to keep it.
// Errors come in the loop as (nil, err): a *DeserializeError for a record
// that did not decode, a *FetchError for a partition. An error that ends
// consumption (the client closed, a pinned cluster gone) comes once and
// ends the loop; when ctx ends the loop just ends: check ctx.Err().
//
// Breaking out of the loop keeps the records of the current poll that the
// loop had not reached: the next Records, Poll or AppendPoll returns them
// first. (In a group, franz-go's autocommit counts them as polled, as it
// does a Poll's records not yet processed.)
//
// With kgo.WithPools (through factory.KgoOpts) each record goes back to
// franz-go's pools once the loop body returns, and Bytes() keys and values,
// which share its memory, must be copied to be kept.
func (c *Consumer[K, V]) Records(ctx context.Context) iter.Seq2[*Record[K, V], error] {
	return func(yield func(*Record[K, V], error) bool) {
		var rec Record[K, V]
		for {
			if c.rest.empty() {
				if ctx.Err() != nil {
					return
				}
				fs, gen, err := c.fetch(ctx, 0)
				if err != nil {
					if ctx.Err() == nil {
						yield(nil, err)
					}
					return
				}
				// Taken before the errors are yielded: a SetOffsets in the
				// loop body drops records of this fetch.
				c.rest.reset(fs)
				c.restGen = gen
				for _, err := range fetchErrors(fs, nil) {
					if !yield(nil, err) {
						return
					}
				}
			}
			for {
				// A SetOffsets since the fetch, from the loop body or
				// another goroutine: a load, and no call, when none.
				if c.seekGen.Load() != c.restGen {
					c.dropSeeked()
				}
				r := c.rest.next()
				if r == nil {
					break
				}
				var more bool
				if err := c.decode(r, &rec); err != nil {
					more = yield(nil, err)
				} else {
					more = yield(&rec, nil)
				}
				// A no-op unless the record came from kgo.WithPools, which
				// gives it a Context: the check spares the call.
				if r.Context != nil {
					r.Recycle()
				}
				if !more {
					return
				}
			}
		}
	}
}

// take is how many records a read that returns at most max asks
// franz-go for. franz-go fetches a partition's broker again only once the
// fetch it buffered is all taken; a read that takes a batch at a time
// leaves the broker idle until the last batch, while one that takes it all
// lets the next fetch travel while the caller works through the records
// (a read a batch at a time ran at 0.94x PollFetches' throughput on the
// local cluster with less CPU than it: waiting, not working). But franz-go
// counts what it hands over as polled, and in a group autocommit commits
// that: a group consumer takes no more than it returns, so a record is
// committed only once the caller has it. Outside a group nothing is
// committed, and the consumer takes everything (0), keeping the rest in
// c.rest, which SetOffsets trims as franz-go trims its buffer.
func (c *Consumer[K, V]) take(max int) int {
	if c.group {
		return max
	}
	return 0
}

// fetch polls the client, following a client swap. gen is the number of
// SetOffsets calls when the poll returned: one after it (seekGen above
// gen) drops records of the fetch (dropSeeked); one during it does not,
// as franz-go may have fetched at the offset set already.
func (c *Consumer[K, V]) fetch(ctx context.Context, max int) (fs kgo.Fetches, gen uint64, err error) {
	fs, err = c.fetchFrom(ctx, max)
	return fs, c.seekGen.Load(), err
}

func (c *Consumer[K, V]) fetchFrom(ctx context.Context, max int) (kgo.Fetches, error) {
	cl, changed := c.client()
	if changed != nil {
		return nil, changed
	}
	fs, err := c.poll(cl, ctx, max)
	if err != nil {
		return nil, err
	}
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
		if fs, err = c.poll(cl, ctx, max); err != nil {
			return nil, err
		}
	}
	return fs, nil
}

// fetchErrors appends the errors of fs to errs, leaving out the context's
// own: a poll that ctx ended is no failure of a partition.
func fetchErrors(fs kgo.Fetches, errs []error) []error {
	fs.EachError(func(t string, p int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		errs = append(errs, &FetchError{Topic: t, Partition: p, Err: err})
	})
	return errs
}

// decode writes r into every field of out. It allocates nothing itself:
// keys, values and headers are franz-go's slices, and Bytes() is not even
// called.
//
// out lives on the heap (the iterator's value, a poll's slot), where every
// pointer store takes a GC write barrier while the collector marks, and a
// consumer that keeps up with its fetches makes the collector mark much of
// the time. So a pointer field that already holds what r has, as the topic
// mostly does and a null key, no headers and no Context do, is left alone.
func (c *Consumer[K, V]) decode(r *kgo.Record, out *Record[K, V]) error {
	if c.keyBytes {
		// K is []byte: the assertion of a pointer neither allocates nor
		// fails.
		if k := any(&out.Key).(*[]byte); *k != nil || r.Key != nil {
			*k = r.Key
		}
	} else {
		k, err := c.keys.Deserialize(r.Topic, r.Key)
		if err != nil {
			return &DeserializeError{r.Topic, r.Partition, r.Offset, "key", err}
		}
		out.Key = k
	}
	if c.valueBytes {
		*any(&out.Value).(*[]byte) = r.Value
	} else {
		v, err := c.values.Deserialize(r.Topic, r.Value)
		if err != nil {
			return &DeserializeError{r.Topic, r.Partition, r.Offset, "value", err}
		}
		out.Value = v
	}
	if out.Topic != r.Topic {
		out.Topic = r.Topic
	}
	out.Partition = r.Partition
	out.LeaderEpoch = r.LeaderEpoch
	out.Offset = r.Offset
	if out.Headers != nil || r.Headers != nil {
		out.Headers = r.Headers
	}
	out.Timestamp = r.Timestamp
	if out.Context != nil || r.Context != nil {
		out.Context = r.Context
	}
	return nil
}

// cursor walks the records of one poll in franz-go's order (fetch, topic,
// partition, offset), so that a reader can stop anywhere and the next one
// go on from there. The indexes avoid flattening a poll into a new slice.
type cursor struct {
	fs      kgo.Fetches
	f, t, p int           // the next partition to look at
	cur     []*kgo.Record // the records of the partition being walked
	r       int           // the next of cur
	left    int           // records not yet taken
}

func (c *cursor) reset(fs kgo.Fetches) {
	*c = cursor{fs: fs, left: fs.NumRecords()}
}

func (c *cursor) empty() bool { return c.left == 0 }

// remaining is how many records a read of at most max (all if max <= 0)
// takes.
func (c *cursor) remaining(max int) int {
	if max <= 0 || max > c.left {
		return c.left
	}
	return max
}

// next returns the next record, or nil when none is left; the poll is
// released then. Within a partition it only indexes cur: descending from
// the fetches for every record cost a third of the per-record path.
func (c *cursor) next() *kgo.Record {
	if c.r == len(c.cur) && !c.nextPartition() {
		return nil
	}
	r := c.cur[c.r]
	c.r++
	if c.left--; c.left == 0 {
		*c = cursor{} // let the poll's memory go
	}
	return r
}

// drop removes the records of the partitions moved (SetOffsets' map; a
// negative offset, which franz-go skips, moves nothing) that the cursor
// has not handed out yet.
func (c *cursor) drop(moved map[string]map[int32]kgo.EpochOffset) {
	gone := func(topic string, p int32) bool {
		o, ok := moved[topic][p]
		return ok && o.Offset >= 0
	}
	if c.r < len(c.cur) {
		if r := c.cur[c.r]; gone(r.Topic, r.Partition) {
			c.left -= len(c.cur) - c.r
			c.cur = c.cur[:c.r]
		}
	}
	// The partitions not reached yet: from (f, t, p) on.
	for f := c.f; f < len(c.fs); f++ {
		ts := c.fs[f].Topics
		t := 0
		if f == c.f {
			t = c.t
		}
		for ; t < len(ts); t++ {
			ps := ts[t].Partitions
			p := 0
			if f == c.f && t == c.t {
				p = c.p
			}
			for ; p < len(ps); p++ {
				if len(ps[p].Records) > 0 && gone(ts[t].Topic, ps[p].Partition) {
					c.left -= len(ps[p].Records)
					ps[p].Records = nil
				}
			}
		}
	}
	if c.left == 0 {
		*c = cursor{}
	}
}

// nextPartition makes the next partition with records the one walked, or
// empties the cursor and returns false when there is none.
func (c *cursor) nextPartition() bool {
	for c.f < len(c.fs) {
		ts := c.fs[c.f].Topics
		for c.t < len(ts) {
			ps := ts[c.t].Partitions
			for c.p < len(ps) {
				rs := ps[c.p].Records
				c.p++
				if len(rs) > 0 {
					c.cur, c.r = rs, 0
					return true
				}
			}
			c.t, c.p = c.t+1, 0
		}
		c.f, c.t = c.f+1, 0
	}
	*c = cursor{}
	return false
}
