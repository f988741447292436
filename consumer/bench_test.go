package consumer

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// BenchmarkDecode times the per-record path alone: handing over the
// records of an already fetched poll (1000 records, 100-byte values, one
// header each), per record. kgo is the floor, franz-go's EachRecord
// touching each record; the others are the consumer's three ways of
// reading with Bytes() values, and Records with String() and JSON values,
// whose difference to bytes is the deserializer's own cost. Run with
// -benchmem: the bytes rows allocate nothing per record.
func BenchmarkDecode(b *testing.B) {
	ctx := context.Background()
	const n = 1000
	raw := fixture(n, func(i int) []byte { return fmt.Appendf(nil, "%0100d", i) })
	js := fixture(n, func(i int) []byte {
		return fmt.Appendf(nil, `{"sensor":"s%d","value":%d.5,"unit":"celsius","site":"north-west-7"}`, i, i)
	})
	type reading struct {
		Sensor string  `json:"sensor"`
		Value  float64 `json:"value"`
		Unit   string  `json:"unit"`
		Site   string  `json:"site"`
	}
	var sink int64
	b.Run("kgo", func(b *testing.B) {
		for range b.N / n {
			raw.EachRecord(func(r *kgo.Record) { sink += r.Offset + int64(len(r.Value)) })
		}
	})
	bytesC := newConsumer[[]byte, []byte](nil, Bytes(), Bytes(), false)
	b.Run("bytes/Records", func(b *testing.B) { benchRecords(b, ctx, bytesC, raw, n, &sink) })
	b.Run("bytes/AppendPoll", func(b *testing.B) {
		dst := make([]Record[[]byte, []byte], 0, n)
		for range b.N / n {
			bytesC.rest.reset(raw)
			dst, _ = bytesC.AppendPoll(ctx, dst[:0], 0)
			sink += int64(len(dst))
		}
	})
	b.Run("bytes/Poll", func(b *testing.B) {
		for range b.N / n {
			bytesC.rest.reset(raw)
			recs, _ := bytesC.Poll(ctx, 0)
			sink += int64(len(recs))
		}
	})
	b.Run("string/Records", func(b *testing.B) {
		benchRecords(b, ctx, newConsumer[[]byte, string](nil, Bytes(), String(), false), raw, n, &sink)
	})
	b.Run("json/Records", func(b *testing.B) {
		benchRecords(b, ctx, newConsumer[[]byte, reading](nil, Bytes(), JSON[reading](), false), js, n, &sink)
	})
}

func benchRecords[V any](b *testing.B, ctx context.Context, c *Consumer[[]byte, V], fs kgo.Fetches, n int, sink *int64) {
	for range b.N / n {
		c.rest.reset(fs)
		for r, err := range c.Records(ctx) {
			if err != nil {
				b.Fatal(err)
			}
			*sink += r.Offset
			if c.rest.empty() {
				break // the poll is done; the next would reach the (absent) client
			}
		}
	}
}

// fixture is a poll of n records of topic "t", partition 0, one header
// each, values from value.
func fixture(n int, value func(int) []byte) kgo.Fetches {
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "t", Offset: int64(i), LeaderEpoch: 1, Value: value(i),
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("0af7651916cd43dd")}}, Timestamp: time.UnixMilli(int64(i))}
	}
	return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: "t", Partitions: []kgo.FetchPartition{{Records: recs}}}}}}
}

// BenchmarkConsume reads records of 100 bytes from the start of a
// one-broker kfake cluster, 200000 per read with a fresh client each time,
// one op per record (run it with -benchtime 1000000x: five reads): plain
// franz-go (PollFetches, EachRecord) against the consumer's three ways of
// reading, Bytes() values, no factory (the wrapper alone). kfake's single
// goroutine and the shared CPUs dominate the time. The cross-client comparison with the factory, interleaved
// and repeated, is the consumer section of integration/bench.
func BenchmarkConsume(b *testing.B) {
	const n = 200000
	addrs := consumeCluster(b, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			b.Fatal(err)
		}
		return cl
	}
	reads := map[string]func(cl *kgo.Client) int{
		"kgo": func(cl *kgo.Client) int {
			got := 0
			for got < n {
				fs := cl.PollFetches(ctx)
				if err := fs.Err0(); err != nil {
					b.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) { got += min(len(r.Value), 1) })
			}
			return got
		},
		"Records": func(cl *kgo.Client) int {
			c := newConsumer[[]byte, []byte](cl, Bytes(), Bytes(), false)
			got := 0
			for r, err := range c.Records(ctx) {
				if err != nil {
					b.Fatal(err)
				}
				if got += min(len(r.Value), 1); got == n {
					break
				}
			}
			return got
		},
		"AppendPoll": func(cl *kgo.Client) int {
			c := newConsumer[[]byte, []byte](cl, Bytes(), Bytes(), false)
			var recs []Record[[]byte, []byte]
			got := 0
			for got < n {
				var err error
				if recs, err = c.AppendPoll(ctx, recs[:0], 0); err != nil {
					b.Fatal(err)
				}
				got += len(recs)
			}
			return got
		},
		"Poll": func(cl *kgo.Client) int {
			c := newConsumer[[]byte, []byte](cl, Bytes(), Bytes(), false)
			got := 0
			for got < n {
				recs, err := c.Poll(ctx, 0)
				if err != nil {
					b.Fatal(err)
				}
				got += len(recs)
			}
			return got
		},
	}
	for _, name := range []string{"kgo", "Records", "AppendPoll", "Poll"} {
		b.Run(name, func(b *testing.B) {
			for done := 0; done < b.N; done += n {
				cl := newClient()
				got := reads[name](cl)
				cl.Close()
				if got != n {
					b.Fatalf("read %d records, want %d", got, n)
				}
			}
		})
	}
}

// consumeCluster starts a one-broker kfake cluster whose topic "t" holds n
// records of 100 bytes, closed when b ends.
func consumeCluster(b *testing.B, n int) []string {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kc.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerLinger(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	var failed atomic.Int64
	value := make([]byte, 100)
	for range n {
		cl.Produce(context.Background(), &kgo.Record{Topic: "t", Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	if err := cl.Flush(context.Background()); err != nil || failed.Load() > 0 {
		b.Fatalf("producing the records: %v (%d failed)", err, failed.Load())
	}
	return kc.ListenAddrs()
}

// BenchmarkPoll compares Poll with franz-go's own PollFetches on the same
// data in one process: a one-broker kfake cluster holding 1,000,000
// records of 100 bytes, read in full once by each per round, each read on
// a fresh client of the same options, the order rotating from round to
// round so that none always reads first, and a collection before each
// read so that none pays for another's garbage. kgo touches each record
// through EachRecord, Poll (Bytes() keys and values, the consumer made by
// New as the factory makes it) through the slice it returns. A third
// reader, kgo's PollRecords with Poll's default batch (pollBatch), shows
// how much of the difference the batch size alone makes.
//
// It reports medians over the rounds: ns per record of each, by the wall
// clock and by the CPU time of the process (kfake's serving included,
// alike for all), and Poll's throughput as a fraction of each kgo reader's
// (the median of the rounds' kgo time over Poll time: 1 is as fast), by
// either clock. On a machine whose cores other work shares, the wall clock
// moves with that work; the CPU time much less. One op is the whole
// comparison.
//
//	go test -run '^$' -bench BenchmarkPoll -benchmem ./consumer/
func BenchmarkPoll(b *testing.B) {
	const n, rounds = 1_000_000, 9
	addrs := consumeCluster(b, n)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	newClient := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
		if err != nil {
			b.Fatal(err)
		}
		return cl
	}
	kgoReader := func(max int) func(*kgo.Client) int {
		return func(cl *kgo.Client) int {
			got := 0
			for got < n {
				fs := cl.PollRecords(ctx, max) // max 0: PollFetches
				if err := fs.Err0(); err != nil {
					b.Fatal(err)
				}
				fs.EachRecord(func(r *kgo.Record) { got += min(len(r.Value), 1) })
			}
			return got
		}
	}
	readPoll := func(cl *kgo.Client) int {
		c, err := New(link.Seal(link.Consumer{Client: cl}), Bytes(), Bytes())
		if err != nil {
			b.Fatal(err)
		}
		got := 0
		for got < n {
			recs, err := c.Poll(ctx, 0)
			if err != nil {
				b.Fatal(err)
			}
			for i := range recs {
				got += min(len(recs[i].Value), 1)
			}
		}
		return got
	}
	readers := []struct {
		name string
		read func(*kgo.Client) int
	}{{"kgo", kgoReader(0)}, {"Poll", readPoll}, {"kgo-records", kgoReader(pollBatch)}}
	// timed returns the wall and CPU time of one read.
	timed := func(read func(*kgo.Client) int) [2]time.Duration {
		cl := newClient()
		defer cl.Close()
		runtime.GC()
		start, cpu := time.Now(), cpuTime()
		if got := read(cl); got != n {
			b.Fatalf("read %d records, want %d", got, n)
		}
		return [2]time.Duration{time.Since(start), cpuTime() - cpu}
	}
	var times [3][2][]time.Duration // reader, clock
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			for i := range readers {
				r := (round + i) % len(readers)
				t := timed(readers[r].read)
				for clock := range 2 {
					times[r][clock] = append(times[r][clock], t[clock])
				}
			}
		}
	}
	b.StopTimer()
	median := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	const poll = 1
	for clock, name := range []string{"wall", "cpu"} {
		if clock == 1 && times[poll][1][0] == 0 {
			break // no CPU clock here
		}
		for r, rd := range readers {
			perRec := make([]float64, len(times[r][clock]))
			for i, d := range times[r][clock] {
				perRec[i] = float64(d.Nanoseconds()) / n
			}
			b.ReportMetric(median(perRec), rd.name+"-"+name+"-ns/rec")
			if r == poll {
				continue
			}
			ratios := make([]float64, len(times[r][clock]))
			for i := range ratios {
				ratios[i] = float64(times[r][clock][i]) / float64(times[poll][clock][i])
			}
			b.ReportMetric(median(ratios), "Poll/"+rd.name+"-"+name)
			slices.Sort(ratios)
			b.Logf("%s, %s time over Poll's per round, sorted: %.3f", name, rd.name, ratios)
		}
	}
}
