package factory_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/internal/benchloop"
	"github.com/kconsist/kconsist/producer"
)

// BenchmarkProduceBuffered measures the caller's side of an async produce
// through a factory producer, with everything the factory adds to it (the
// wire interceptor, the auth, refusal and transaction checks, the
// INCONSISTENT_METADATA clock), against a caller's own &kgo.Record and
// kgo's Produce: until franz-go has buffered the record. The clients
// flush only when told (kgo.ManualFlushing); every 4096 records the timer
// stops while they are flushed to a one-broker kfake, so neither the
// network nor the broker is timed. The difference of the two rows is the
// factory's own per-record cost on the caller's side; producer's
// BenchmarkProduceBuffered is the same without a factory.
//
//	go test -run '^$' -bench BenchmarkProduceBuffered -benchtime 1000000x -count 5 ./factory/
func BenchmarkProduceBuffered(b *testing.B) {
	const per = 4096
	value := make([]byte, 1024)
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": "2097152"}))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	ctx := context.Background()
	run := func(b *testing.B, produce func(done func(error)), flush func(context.Context) error) {
		benchloop.Buffered(b, per, produce, flush)
	}
	b.Run("kgo", func(b *testing.B) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ManualFlushing(), kgo.MaxBufferedRecords(2*per))
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		run(b, func(done func(error)) {
			cl.Produce(ctx, &kgo.Record{Topic: "t", Value: value}, func(_ *kgo.Record, err error) { done(err) })
		}, cl.Flush)
	})
	b.Run("factory", func(b *testing.B) {
		f, err := factory.New(factory.WithStore(consistency.NewMemoryStore()), factory.BootstrapServers(kc.ListenAddrs()...), factory.Compression(factory.CodecNone),
			factory.KgoOpts(kgo.ManualFlushing(), kgo.MaxBufferedRecords(2*per)))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close(context.Background())
		p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		run(b, func(done func(error)) {
			if err := p.ProduceAsync(ctx, producer.Record[[]byte, []byte]{Topic: "t", Value: value}, func(_ producer.Result, err error) { done(err) }); err != nil {
				done(err)
			}
		}, p.Flush)
	})
}
