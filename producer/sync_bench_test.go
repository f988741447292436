package producer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/producer"
)

// BenchmarkSyncProduceRatio is the request/response service's call: one
// 1 KiB record produced and waited for, by a factory producer's Produce and
// by plain kgo's ProduceSync, taking turns record by record on one kfake
// broker (franz-go's default 10 ms linger on both, acks=all, idempotent, no
// compression). It reports each side's mean and p99 latency and the
// factory's ratios to kgo (target ≤ 1.10 for both).
//
//	go test -run '^$' -bench BenchmarkSyncProduceRatio -benchtime 3000x -count 5 ./producer/
func BenchmarkSyncProduceRatio(b *testing.B) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": "2097152"}))
	if err != nil {
		b.Fatal(err)
	}
	defer kc.Close()
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	f, err := factory.New(factory.BootstrapServers(kc.ListenAddrs()...))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close(context.Background())
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(ctx)

	value := make([]byte, 1024)
	viaKgo := func() error { return cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: value}).FirstErr() }
	viaFactory := func() error {
		_, err := p.Produce(ctx, producer.Record[[]byte, []byte]{Topic: "t", Value: value})
		return err
	}
	for range 10 { // connections, producer ids, metadata
		if err := viaKgo(); err != nil {
			b.Fatal(err)
		}
		if err := viaFactory(); err != nil {
			b.Fatal(err)
		}
	}
	kgoNs := make([]float64, 0, b.N)
	facNs := make([]float64, 0, b.N)
	timed := func(fn func() error, into *[]float64) {
		start := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		*into = append(*into, float64(time.Since(start)))
	}
	b.ResetTimer()
	for i := range b.N {
		// Who goes first alternates, so neither always meets the broker
		// just after the other's write.
		if i%2 == 0 {
			timed(viaKgo, &kgoNs)
			timed(viaFactory, &facNs)
		} else {
			timed(viaFactory, &facNs)
			timed(viaKgo, &kgoNs)
		}
	}
	b.StopTimer()
	km, kp := meanP99(kgoNs)
	fm, fp := meanP99(facNs)
	b.ReportMetric(km/1e3, "kgo-mean-µs")
	b.ReportMetric(kp/1e3, "kgo-p99-µs")
	b.ReportMetric(fm/1e3, "factory-mean-µs")
	b.ReportMetric(fp/1e3, "factory-p99-µs")
	b.ReportMetric(fm/km, "mean-ratio")
	b.ReportMetric(fp/kp, "p99-ratio")
}

// meanP99 returns the mean and the nearest-rank 99th percentile of xs.
func meanP99(xs []float64) (mean, p99 float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := (99*len(s) + 99) / 100 // ceil(0.99 n)
	return sum / float64(len(s)), s[rank-1]
}
