package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

type ctxKey struct{}

// fetched returns a poll's worth of records as franz-go hands them over:
// n records of topic "t" spread over partitions 0 and 2 of one fetch and
// partition 1 of a second, with an empty partition, an empty topic and an
// empty fetch between them, so that a reader must walk every level.
// Record i has offset i, value "v<i>", leader epoch 7, a header and a
// context carrying i.
func fetched(n int) (kgo.Fetches, []*kgo.Record) {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{
			Topic: "t", Partition: int32(i % 3), Offset: int64(i), LeaderEpoch: 7,
			Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte{byte(i)}}},
			Timestamp: time.UnixMilli(int64(1000 + i)),
			Context:   context.WithValue(context.Background(), ctxKey{}, i),
		}
	}
	of := func(p int32) []*kgo.Record {
		var out []*kgo.Record
		for _, r := range recs {
			if r.Partition == p {
				out = append(out, r)
			}
		}
		return out
	}
	fs := kgo.Fetches{
		{Topics: []kgo.FetchTopic{
			{Topic: "empty"},
			{Topic: "t", Partitions: []kgo.FetchPartition{{Partition: 0, Records: of(0)}, {Partition: 5}, {Partition: 2, Records: of(2)}}},
		}},
		{},
		{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{Partition: 1, Records: of(1)}}}}},
	}
	// The order a reader sees: as franz-go's EachRecord walks them.
	var order []*kgo.Record
	fs.EachRecord(func(r *kgo.Record) { order = append(order, r) })
	return fs, order
}

// requireSame checks that got is r, field by field, the memory of its
// slices included (no copy).
func requireSame(t *testing.T, r *kgo.Record, got Record[[]byte, []byte]) {
	t.Helper()
	require.Equal(t, r.Topic, got.Topic)
	require.Equal(t, r.Partition, got.Partition)
	require.Equal(t, r.Offset, got.Offset)
	require.Equal(t, int32(7), got.LeaderEpoch)
	require.Equal(t, r.Timestamp, got.Timestamp)
	require.Equal(t, r.Offset, int64(got.Context.Value(ctxKey{}).(int)), "the record's context")
	require.Same(t, &r.Key[0], &got.Key[0], "the key is franz-go's slice")
	require.Same(t, &r.Value[0], &got.Value[0], "the value is franz-go's slice")
	require.Same(t, &r.Headers[0], &got.Headers[0], "the headers are franz-go's slice")
}

// TestReadKeepsEveryField: Poll, AppendPoll and Records hand over every
// record of a poll, in franz-go's order, with its leader epoch, context and
// headers, and Bytes() keys and values without a copy.
func TestReadKeepsEveryField(t *testing.T) {
	ctx := context.Background()
	forms := map[string]func(c *Consumer[[]byte, []byte]) []Record[[]byte, []byte]{
		"Poll": func(c *Consumer[[]byte, []byte]) []Record[[]byte, []byte] {
			recs, err := c.Poll(ctx, 0)
			require.NoError(t, err)
			return recs
		},
		"AppendPoll": func(c *Consumer[[]byte, []byte]) []Record[[]byte, []byte] {
			dst := make([]Record[[]byte, []byte], 1, 4) // a record already there stays
			recs, err := c.AppendPoll(ctx, dst, 0)
			require.NoError(t, err)
			require.Equal(t, Record[[]byte, []byte]{}, recs[0])
			return recs[1:]
		},
		"Records": func(c *Consumer[[]byte, []byte]) []Record[[]byte, []byte] {
			var out []Record[[]byte, []byte]
			for r, err := range c.Records(ctx) {
				require.NoError(t, err)
				out = append(out, *r)
				if c.rest.empty() {
					break // the injected poll is done; the next would reach the client
				}
			}
			return out
		},
	}
	for name, read := range forms {
		t.Run(name, func(t *testing.T) {
			c := newConsumer[[]byte, []byte](nil, Bytes(), Bytes(), false)
			fs, order := fetched(10)
			c.rest.reset(fs)
			got := read(c)
			require.Len(t, got, len(order))
			for i, r := range order {
				requireSame(t, r, got[i])
			}
		})
	}
}

// TestRecordsBreakKeepsTheRest: a Records loop that stops early leaves the
// records of its poll it had not reached to the next read, which returns
// them before polling again: none is lost.
func TestRecordsBreakKeepsTheRest(t *testing.T) {
	c := newConsumer[[]byte, []byte](nil, Bytes(), Bytes(), false)
	fs, order := fetched(10)
	c.rest.reset(fs)
	var first []int64
	for r, err := range c.Records(context.Background()) {
		require.NoError(t, err)
		first = append(first, r.Offset)
		if len(first) == 3 {
			break
		}
	}
	rest, err := c.Poll(context.Background(), 4)
	require.NoError(t, err)
	require.Len(t, rest, 4, "Poll's max applies to what was left")
	more, err := c.AppendPoll(context.Background(), rest, 0)
	require.NoError(t, err)
	require.Len(t, more, len(order)-3)
	for i, r := range order[:3] {
		require.Equal(t, r.Offset, first[i])
	}
	for i, r := range order[3:] {
		require.Equal(t, r.Offset, more[i].Offset)
	}
	require.True(t, c.rest.empty())
}

// TestDeserializeErrorsPerRecord: a record that does not decode comes as a
// *DeserializeError naming it, and the records around it still come, in
// every form of reading.
func TestDeserializeErrorsPerRecord(t *testing.T) {
	even := DeserializerFunc[string](func(_ string, b []byte) (string, error) {
		if b[len(b)-1]%2 == 1 {
			return "", errors.New("odd")
		}
		return string(b), nil
	})
	_, order := fetched(4) // values v0..v3: v1 and v3 fail
	var wantBad []int64
	for _, r := range order {
		if r.Value[len(r.Value)-1]%2 == 1 {
			wantBad = append(wantBad, r.Offset)
		}
	}
	check := func(t *testing.T, good []Record[string, string], errs []error) {
		t.Helper()
		require.Len(t, good, 2)
		for _, r := range good {
			require.Equal(t, fmt.Sprintf("v%d", r.Offset), r.Value)
			require.Equal(t, fmt.Sprintf("k%d", r.Offset), r.Key)
		}
		var bad []int64
		for _, err := range errs {
			var de *DeserializeError
			require.ErrorAs(t, err, &de)
			require.ErrorIs(t, err, ErrDeserialize)
			require.Equal(t, "value", de.Field)
			require.Equal(t, "t", de.Topic)
			bad = append(bad, de.Offset)
		}
		require.Equal(t, wantBad, bad)
	}
	t.Run("Poll", func(t *testing.T) {
		c := newConsumer(nil, String(), Deserializer[string](even), false)
		fs, _ := fetched(4)
		c.rest.reset(fs)
		recs, err := c.Poll(context.Background(), 0)
		require.Error(t, err)
		check(t, recs, err.(interface{ Unwrap() []error }).Unwrap())
	})
	t.Run("Records", func(t *testing.T) {
		c := newConsumer(nil, String(), Deserializer[string](even), false)
		fs, _ := fetched(4)
		c.rest.reset(fs)
		var good []Record[string, string]
		var errs []error
		for r, err := range c.Records(context.Background()) {
			if err != nil {
				errs = append(errs, err)
			} else {
				good = append(good, *r)
			}
			if c.rest.empty() {
				break
			}
		}
		check(t, good, errs)
	})
}

// TestReadAllocatesNothingPerRecord: with Bytes() keys and values, reading
// a poll allocates nothing per record: AppendPoll into a reused slice and
// Poll, which reuses its own, nothing at all, and Records its loop's
// state, as many for 1000 records as for 10.
func TestReadAllocatesNothingPerRecord(t *testing.T) {
	ctx := context.Background()
	c := newConsumer[[]byte, []byte](nil, Bytes(), Bytes(), false)
	dst := make([]Record[[]byte, []byte], 0, 1000)
	var sum int64
	forms := map[string]func(fs kgo.Fetches, n int){
		"AppendPoll": func(fs kgo.Fetches, n int) {
			c.rest.reset(fs)
			var err error
			if dst, err = c.AppendPoll(ctx, dst[:0], 0); err != nil || len(dst) != n {
				t.Fatal(err, len(dst))
			}
		},
		"Poll": func(fs kgo.Fetches, n int) {
			c.rest.reset(fs)
			if recs, err := c.Poll(ctx, 0); err != nil || len(recs) != n {
				t.Fatal(err, len(recs))
			}
		},
		"Records": func(fs kgo.Fetches, _ int) {
			c.rest.reset(fs)
			for r, err := range c.Records(ctx) {
				if err != nil {
					t.Fatal(err)
				}
				sum += r.Offset
				if c.rest.empty() {
					break
				}
			}
		},
	}
	few, _ := fetched(10)
	many, _ := fetched(1000)
	for name, read := range forms {
		t.Run(name, func(t *testing.T) {
			a10 := testing.AllocsPerRun(20, func() { read(few, 10) })
			a1000 := testing.AllocsPerRun(20, func() { read(many, 1000) })
			if name != "Records" {
				require.Zero(t, a1000)
			}
			require.LessOrEqual(t, a10, 2.0, "a slice or a loop's state (two under -race)")
			require.Equal(t, a10, a1000, "allocations for 10 and for 1000 records")
		})
	}
	require.NotZero(t, sum)
}

// TestRecordsOnACluster: Records reads what was produced, with the context
// a consumer hook put on each record (as kotel's tracer does) and its
// headers; Close from another goroutine ends the loop with
// kgo.ErrClientClosed, and an ended ctx ends it without an error.
func TestRecordsOnACluster(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer prod.Close()
	for i := range 5 {
		r := &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i), Headers: []kgo.RecordHeader{{Key: "i", Value: []byte{byte(i)}}}}
		require.NoError(t, prod.ProduceSync(ctx, r).FirstErr())
	}

	newConsumer := func() *Consumer[string, string] {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.WithHooks(tagRecords{}))
		require.NoError(t, err)
		c := newConsumer(cl, String(), String(), false)
		require.NoError(t, c.Assign(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
		return c
	}

	c := newConsumer()
	var got []Record[string, string]
	ended := make(chan error, 2)
	go func() {
		defer close(ended)
		for r, err := range c.Records(ctx) {
			if err != nil {
				ended <- err
				continue
			}
			if got = append(got, *r); len(got) == 5 {
				go c.Close(ctx) // from another goroutine, while the loop polls
			}
		}
	}()
	require.ErrorIs(t, <-ended, kgo.ErrClientClosed)
	_, open := <-ended
	require.False(t, open, "the loop ends after the error that ends consumption")
	require.Len(t, got, 5)
	for i, r := range got {
		require.Equal(t, fmt.Sprintf("v%d", i), r.Value)
		require.Equal(t, "tagged", r.Context.Value(ctxKey{}))
		require.Equal(t, []Header{{Key: "i", Value: []byte{byte(i)}}}, r.Headers)
	}

	c = newConsumer()
	defer func() { require.NoError(t, c.Close(ctx)) }()
	short, stop := context.WithCancel(ctx)
	defer stop()
	n := 0
	for _, err := range c.Records(short) {
		require.NoError(t, err)
		if n++; n == 5 {
			stop()
		}
	}
	require.Equal(t, 5, n, "after ctx ends, the loop ends without an error")
}

// tagRecords puts a value in the context of every fetched record, as a
// tracing hook does.
type tagRecords struct{}

func (tagRecords) OnFetchRecordBuffered(r *kgo.Record) {
	r.Context = context.WithValue(context.Background(), ctxKey{}, "tagged")
}

// TestReusedRecordTakesEveryField: a value reused from record to record
// (the Records iterator's, a slot of AppendPoll's reused slice) ends up as
// each record, whatever the one before it held: a null key, no headers and
// no context after a record with them, another topic, and back.
func TestReusedRecordTakesEveryField(t *testing.T) {
	ctx := context.Background()
	recs := make([]*kgo.Record, 6)
	for i := range recs {
		r := &kgo.Record{Topic: "a", Offset: int64(i), Value: []byte{byte(i)}, Timestamp: time.UnixMilli(int64(i))}
		if i%2 == 0 {
			r.Topic = "b"
			r.Key = []byte{'k', byte(i)}
			r.Headers = []kgo.RecordHeader{{Key: "h"}}
			r.Context = context.WithValue(ctx, ctxKey{}, i)
		}
		recs[i] = r
	}
	poll := func() kgo.Fetches {
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "ab", Partitions: []kgo.FetchPartition{{Records: recs}}}}}}
	}
	check := func(t *testing.T, r *kgo.Record, got *Record[[]byte, []byte]) {
		t.Helper()
		require.Equal(t, r.Topic, got.Topic)
		require.Equal(t, r.Offset, got.Offset)
		require.Equal(t, r.Key, got.Key)
		require.Equal(t, r.Value, got.Value)
		require.Equal(t, r.Headers, got.Headers)
		require.Equal(t, r.Timestamp, got.Timestamp)
		require.Equal(t, r.Context, got.Context)
	}
	c := newConsumer[[]byte, []byte](nil, Bytes(), Bytes(), false)
	t.Run("Records", func(t *testing.T) {
		c.rest.reset(poll())
		i := 0
		for r, err := range c.Records(ctx) {
			require.NoError(t, err)
			check(t, recs[i], r)
			if i++; c.rest.empty() {
				break
			}
		}
		require.Equal(t, len(recs), i)
	})
	t.Run("AppendPoll", func(t *testing.T) {
		c.rest.reset(poll())
		dst, err := c.AppendPoll(ctx, nil, 0)
		require.NoError(t, err)
		// The next poll's records land in the slots of the one before,
		// each on a record unlike it.
		slices.Reverse(recs)
		c.rest.reset(poll())
		dst, err = c.AppendPoll(ctx, dst[:0], 0)
		require.NoError(t, err)
		require.Len(t, dst, len(recs))
		for i, r := range recs {
			check(t, r, &dst[i])
		}
	})
}

// TestPollReusesItsSlice: the next Poll writes its records in the memory
// of the slice the one before returned; appending to a returned slice
// copies it, so the next Poll never writes over what was appended; and
// the slots a smaller poll leaves are cleared, so that the records of a
// poll long gone keep no fetch's memory alive.
func TestPollReusesItsSlice(t *testing.T) {
	ctx := context.Background()
	c := newConsumer[[]byte, []byte](nil, Bytes(), Bytes(), false)
	poll := func(n int) ([]Record[[]byte, []byte], []*kgo.Record) {
		t.Helper()
		fs, order := fetched(n)
		c.rest.reset(fs)
		recs, err := c.Poll(ctx, 0)
		require.NoError(t, err)
		require.Len(t, recs, n)
		for i, r := range order {
			requireSame(t, r, recs[i])
		}
		return recs, order
	}
	first, _ := poll(10)
	second, order := poll(4)
	require.Same(t, &first[0], &second[0], "the second poll reuses the first's memory")
	for i, r := range first[4:10] { // the slots past the second poll's records
		require.Zero(t, r, "slot %d still holds a record of the poll before", 4+i)
	}
	require.Equal(t, len(second), cap(second), "an append must copy")
	kept := second[3] // a copy: valid for good
	extended := append(second, Record[[]byte, []byte]{Offset: -1})
	poll(10)
	require.Equal(t, int64(-1), extended[4].Offset, "what was appended is the caller's")
	requireSame(t, order[3], kept)
}

// TestPollBatch: Poll with max <= 0 returns at most pollBatch records,
// and the next polls the rest, in order, none lost or repeated; a max
// given is kept, above pollBatch too; AppendPoll is the same.
func TestPollBatch(t *testing.T) {
	ctx := context.Background()
	const n = 2*pollBatch + 100
	c := newConsumer[[]byte, []byte](nil, Bytes(), Bytes(), false)
	fs, order := fetched(n)
	c.rest.reset(fs)
	var got []int64
	for _, want := range []int{pollBatch, pollBatch, 100} {
		recs, err := c.Poll(ctx, 0)
		require.NoError(t, err)
		require.Len(t, recs, want)
		for _, r := range recs {
			got = append(got, r.Offset)
		}
	}
	require.True(t, c.rest.empty())
	for i, r := range order {
		require.Equal(t, r.Offset, got[i])
	}

	c.rest.reset(fs)
	recs, err := c.Poll(ctx, pollBatch+1)
	require.NoError(t, err)
	require.Len(t, recs, pollBatch+1, "a max given is kept")
	recs, err = c.AppendPoll(ctx, nil, 0)
	require.NoError(t, err)
	require.Len(t, recs, pollBatch)
}
