package producer

import (
	"context"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	newClient := func(b *testing.B) *kgo.Client {
		// Small segments: kfake keeps its log in in-memory files that
		// grow by doubling up to the segment size, and those copies
		// would swamp the comparison.
		kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
			kfake.BrokerConfigs(map[string]string{"log.segment.bytes": "2097152"}))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(kc.Close)
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
			kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cl.Close)
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: value}).FirstErr(); err != nil {
			b.Fatal(err)
		}
		return cl
	}
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
	b.Run("kgo", func(b *testing.B) {
		cl := newClient(b)
		run(b, func(ctx context.Context, done func(error)) {
			cl.Produce(ctx, &kgo.Record{Topic: "t", Value: value}, func(_ *kgo.Record, err error) { done(err) })
		}, cl.Flush)
	})
	b.Run("producer", func(b *testing.B) {
		p := New(newClient(b), Bytes(), Bytes())
		run(b, func(ctx context.Context, done func(error)) {
			if err := p.ProduceAsync(ctx, Record[[]byte, []byte]{Topic: "t", Value: value}, func(_ Result, err error) { done(err) }); err != nil {
				done(err)
			}
		}, p.Flush)
	})
}
