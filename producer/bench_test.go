package producer

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/benchloop"
)

// BenchmarkProduceAsync compares the producer's per-record path with plain
// franz-go's: async produce of 1 KiB records to a one-broker kfake (acks=all,
// idempotent, no compression, linger 0), timed to the last acknowledgement.
// Each run gets a fresh kfake, which keeps every record in memory: a broker
// grown by earlier runs would slow later ones. allocs/op is the steady
// figure: the producer allocates what a franz-go caller does (the record
// and its callback), nothing more.
//
//	go test -run '^$' -bench BenchmarkProduceAsync -benchtime 200000x -count 6 ./producer/
func BenchmarkProduceAsync(b *testing.B) {
	value := make([]byte, 1024)
	newClient := func(b *testing.B) *kgo.Client { return benchClient(b, value, kgo.ProducerLinger(0)) }
	run := func(b *testing.B, produce func(ctx context.Context, done func(error)), flush func(context.Context) error) {
		ctx := context.Background()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var first error
		done := func(err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			wg.Done()
		}
		b.SetBytes(int64(len(value)))
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			wg.Add(1)
			produce(ctx, done)
		}
		if err := flush(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		b.StopTimer()
		if first != nil {
			b.Fatal(first)
		}
	}
	compareProduce(b, value, newClient, run)
}

// BenchmarkProduceBuffered measures the caller's side of an async produce
// alone: what ProduceAsync costs until franz-go has buffered the record,
// against a caller's own &kgo.Record and kgo's Produce. The client flushes
// only when told (kgo.ManualFlushing); every 4096 records the timer stops
// while they are flushed to a one-broker kfake, so neither the network nor
// the broker is timed. Acknowledgements run untimed too.
//
//	go test -run '^$' -bench BenchmarkProduceBuffered -benchtime 400000x ./producer/
func BenchmarkProduceBuffered(b *testing.B) {
	const per = 4096
	value := make([]byte, 1024)
	newClient := func(b *testing.B) *kgo.Client {
		return benchClient(b, value, kgo.ManualFlushing(), kgo.MaxBufferedRecords(2*per))
	}
	run := func(b *testing.B, produce func(ctx context.Context, done func(error)), flush func(context.Context) error) {
		benchloop.Buffered(b, per, func(done func(error)) { produce(context.Background(), done) }, flush)
	}
	compareProduce(b, value, newClient, run)
}

// benchClient starts a one-broker kfake with topic "t" and returns a client
// of it (no compression, opts on top) that has produced one record, so that
// connections, producer id and metadata are in place. Small segments:
// kfake keeps its log in in-memory files that grow by doubling up to the
// segment size, and those copies would swamp the comparison.
func benchClient(b *testing.B, value []byte, opts ...kgo.Opt) *kgo.Client {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": "2097152"}))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(kc.Close)
	opts = append([]kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	errc := make(chan error, 1)
	cl.Produce(context.Background(), &kgo.Record{Value: value}, func(_ *kgo.Record, err error) { errc <- err })
	if err := cl.Flush(context.Background()); err != nil { // sends it with kgo.ManualFlushing too
		b.Fatal(err)
	}
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return cl
}

// compareProduce runs run for plain kgo (&kgo.Record, Produce) and for the
// producer (Bytes() serializers, ProduceAsync), each on a client newClient
// makes, producing value to topic "t".
func compareProduce(b *testing.B, value []byte, newClient func(*testing.B) *kgo.Client,
	run func(b *testing.B, produce func(ctx context.Context, done func(error)), flush func(context.Context) error)) {
	b.Run("kgo", func(b *testing.B) {
		cl := newClient(b)
		run(b, func(ctx context.Context, done func(error)) {
			cl.Produce(ctx, &kgo.Record{Topic: "t", Value: value}, func(_ *kgo.Record, err error) { done(err) })
		}, cl.Flush)
	})
	b.Run("producer", func(b *testing.B) {
		p := newProducer(newClient(b), Bytes(), Bytes())
		run(b, func(ctx context.Context, done func(error)) {
			if err := p.ProduceAsync(ctx, Record[[]byte, []byte]{Topic: "t", Value: value}, func(_ Result, err error) { done(err) }); err != nil {
				done(err)
			}
		}, p.Flush)
	})
}

// BenchmarkProduceSync compares a synchronous produce, one 1 KiB record at a
// time, with kgo's ProduceSync on a one-broker kfake, at franz-go's default
// linger (10ms): both stop lingering for a record the caller waits on.
//
//	go test -run '^$' -bench BenchmarkProduceSync -benchtime 2000x -count 6 ./producer/
func BenchmarkProduceSync(b *testing.B) {
	value := make([]byte, 1024)
	ctx := context.Background()
	b.Run("kgo", func(b *testing.B) {
		cl := benchClient(b, value)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: value}).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("producer", func(b *testing.B) {
		p := newProducer(benchClient(b, value), Bytes(), Bytes())
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if _, err := p.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: value}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
