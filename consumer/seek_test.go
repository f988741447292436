package consumer

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestCursorDrop: dropping partitions from a cursor removes the records of
// theirs it has not handed out, in the partition being walked and in those
// not reached (in a later fetch too), and keeps the order of the rest; a
// negative offset moves nothing, as in franz-go's SetOffsets.
func TestCursorDrop(t *testing.T) {
	fs, order := fetched(12)
	var c cursor
	c.reset(fs)
	first := []*kgo.Record{c.next(), c.next()} // partition 0, offsets 0 and 3
	require.Equal(t, []*kgo.Record{order[0], order[1]}, first)
	c.drop(map[string]map[int32]kgo.EpochOffset{
		"t":     {0: {Epoch: -1, Offset: 9}, 1: {Epoch: -1, Offset: 7}, 2: {Epoch: -1, Offset: -1}},
		"other": {2: {Offset: 0}},
	})
	var rest []*kgo.Record
	for r := c.next(); r != nil; r = c.next() {
		rest = append(rest, r)
	}
	var want []*kgo.Record
	for _, r := range order[2:] {
		if r.Partition == 2 {
			want = append(want, r)
		}
	}
	require.Equal(t, want, rest)
	require.True(t, c.empty())

	c.reset(fs)
	c.next()
	c.drop(map[string]map[int32]kgo.EpochOffset{"t": {0: {}, 1: {}, 2: {}}})
	require.True(t, c.empty(), "every partition moved")
	require.Nil(t, c.next())
}

// seekCluster starts a one-broker kfake cluster whose partition t/0 holds
// n records, value "v<offset>", and returns a client for it with opts.
func seekCluster(t *testing.T, ctx context.Context, n int, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer prod.Close()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: "t", Value: fmt.Appendf(nil, "v%d", i)}
	}
	require.NoError(t, prod.ProduceSync(ctx, rs...).FirstErr())
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...)}, opts...)...)
	require.NoError(t, err)
	return cl
}

// offsets polls until it has n records and returns their offsets.
func offsets(t *testing.T, ctx context.Context, c *Consumer[string, string], n int) []int64 {
	t.Helper()
	var got []int64
	for len(got) < n {
		recs, err := c.Poll(ctx, n-len(got))
		require.NoError(t, err)
		for _, r := range recs {
			got = append(got, r.Offset)
		}
	}
	return got
}

// assignFromStart assigns c partition t/0 from its first record.
func assignFromStart(t *testing.T, c *Consumer[string, string]) {
	t.Helper()
	require.NoError(t, c.Assign(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
}

func span(from, to int64) []int64 {
	var out []int64
	for o := from; o < to; o++ {
		out = append(out, o)
	}
	return out
}

// TestPollTakesTheWholeFetch: outside a group a Poll takes all that
// franz-go buffered, so that franz-go fetches again at once, and returns
// the rest at the next Poll; a group consumer leaves the rest in
// franz-go's buffer, not counted as polled, where autocommit cannot
// commit it.
func TestPollTakesTheWholeFetch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t.Run("assigned", func(t *testing.T) {
		c := newConsumer(seekCluster(t, ctx, 10), String(), String(), false)
		defer c.Close(ctx)
		assignFromStart(t, c)
		require.Equal(t, span(0, 2), offsets(t, ctx, c, 2))
		require.Zero(t, c.Kgo().BufferedFetchRecords(), "the fetch is all taken")
		require.Equal(t, 8, c.rest.left)
		require.Equal(t, span(2, 10), offsets(t, ctx, c, 8))
	})
	t.Run("group", func(t *testing.T) {
		cl := seekCluster(t, ctx, 10, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"), kgo.DisableAutoCommit())
		c := newConsumer(cl, String(), String(), true)
		defer c.Close(ctx)
		require.Equal(t, span(0, 2), offsets(t, ctx, c, 2))
		require.True(t, c.rest.empty())
		require.EqualValues(t, 8, c.Kgo().BufferedFetchRecords(), "the rest stays in franz-go")
		require.Equal(t, span(2, 10), offsets(t, ctx, c, 8))
	})
}

// TestSetOffsetsDropsWhatWasTaken: records a read took from franz-go and
// had not returned yet are dropped by a SetOffsets of their partition, as
// franz-go drops what it buffered: the next read starts at the offset set,
// after a Poll, after a Records loop that stopped early, and within a
// Records loop whose body seeks.
func TestSetOffsetsDropsWhatWasTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newConsumer(seekCluster(t, ctx, 10), String(), String(), false)
	defer c.Close(ctx)
	assignFromStart(t, c)
	at := func(o int64) map[string]map[int32]kgo.EpochOffset {
		return map[string]map[int32]kgo.EpochOffset{"t": {0: {Epoch: -1, Offset: o}}}
	}

	require.Equal(t, span(0, 2), offsets(t, ctx, c, 2))
	require.False(t, c.rest.empty(), "the rest of the fetch is taken")
	c.SetOffsets(at(6))
	require.Equal(t, span(6, 10), offsets(t, ctx, c, 4), "after a Poll")

	c.SetOffsets(at(0))
	var got []int64
	for r, err := range c.Records(ctx) {
		require.NoError(t, err)
		if got = append(got, r.Offset); len(got) == 3 {
			break
		}
	}
	require.Equal(t, span(0, 3), got)
	c.SetOffsets(at(8))
	require.Equal(t, span(8, 10), offsets(t, ctx, c, 2), "after a Records loop that stopped")

	c.SetOffsets(at(0))
	got = nil
	seeked := false
	for r, err := range c.Records(ctx) {
		require.NoError(t, err)
		got = append(got, r.Offset)
		if r.Offset == 4 && !seeked {
			c.SetOffsets(at(1)) // from the loop body
			seeked = true
		}
		if len(got) == 5+9 {
			break
		}
	}
	require.Equal(t, append(span(0, 5), span(1, 10)...), got, "within a Records loop")

	c.SetOffsets(at(-1)) // moves nothing: what was taken stays
	c.SetOffsets(at(5))
	c.SetOffsets(at(-2))
	require.Equal(t, span(5, 10), offsets(t, ctx, c, 5))
}

// TestSetOffsetsFromAnotherGoroutine: seeks from another goroutine while
// the consumer reads race with nothing, and the read goes on from the last
// offset set once they stop.
func TestSetOffsetsFromAnotherGoroutine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newConsumer(seekCluster(t, ctx, 50), String(), String(), false)
	defer c.Close(ctx)
	assignFromStart(t, c)
	// franz-go skips a SetOffsets of a partition it does not consume yet
	// (Assign takes effect once its metadata is in): seek only once the
	// partition is read.
	require.Equal(t, span(0, 1), offsets(t, ctx, c, 1))
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := range 200 {
			c.SetOffsets(map[string]map[int32]kgo.EpochOffset{"t": {0: {Epoch: -1, Offset: int64(i % 40)}}})
		}
	})
	for {
		select {
		case <-done:
		default:
			// A poll that finds nothing (the reads got past the last
			// offset set) ends with its context and tries again.
			pctx, stop := context.WithTimeout(ctx, 20*time.Millisecond)
			_, err := c.Poll(pctx, 7)
			stop()
			if err != nil {
				require.ErrorIs(t, err, context.DeadlineExceeded)
			}
			continue
		}
		break
	}
	wg.Wait()
	c.SetOffsets(map[string]map[int32]kgo.EpochOffset{"t": {0: {Epoch: -1, Offset: 45}}})
	require.Equal(t, span(45, 50), offsets(t, ctx, c, 5))
}

// TestClusterChangeDropsWhatWasTaken: records a read took from the old
// client and had not returned go with it at a cluster change, as its
// buffer does: the next read starts with the new cluster's records.
func TestClusterChangeDropsWhatWasTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old := seekCluster(t, ctx, 10)
	next := seekCluster(t, ctx, 3)
	w := &manualWatch{next: func() (*kgo.Client, error) { return next, nil }}
	c := follows(t, old, false, w)
	defer c.Close(ctx)
	assignFromStart(t, c)
	require.Equal(t, span(0, 2), offsets(t, ctx, c, 2))
	require.False(t, c.rest.empty(), "the rest of the old cluster's fetch is taken")
	w.change()
	require.Equal(t, span(0, 3), offsets(t, ctx, c, 3), "the new cluster's records, from the start")
}
