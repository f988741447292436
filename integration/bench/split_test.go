package main

import (
	"context"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/tokens"
	"github.com/kconsist/kconsist/internal/wire"
	"github.com/kconsist/kconsist/producer"
)

// BenchmarkProduceSplit splits the factory's extra latency on a one-at-a-time
// produce (the overhead step's latency phase) into layers, each a client
// of its own, all on one local cluster (3 brokers, lag 0, as the overhead
// step), taking turns record by record in a rotating order so that a slow
// stretch of the machine hits every layer alike:
//
//   - kgo: plain franz-go, the overhead step's producer settings;
//   - kgo+wire: the same client dialing through a bare wire.Interceptor
//     whose store stays Unknown (frames parsed, nothing stamped, no
//     emulator, no healer): what the byte-stream parsing costs;
//   - factory kgo off / auto: f.KgoClient with consistency.mode off and
//     auto (the factory's franz-go options, its interceptor, and with auto
//     the stamping and the KIP-1243 answers of the local cluster);
//   - factory producer: factory.NewProducer's ProduceAsync (the engine on
//     top of the previous layer);
//   - kgo control: a second plain client, the harness's own error.
//
// Each b.N iteration is one produce per layer. Reported per layer: p50 and
// p99 in µs and the p50 over kgo's. Not run by the tests (it only
// measures); BENCHMARKS.md has its figures and the command:
//
//	go test -run '^$' -bench BenchmarkProduceSplit -benchtime 30000x -count 2 ./integration/bench/
func BenchmarkProduceSplit(b *testing.B) {
	ctx := context.Background()
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(0),
		localcluster.KfakeOpts(kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(overheadSegmentBytes)})))
	if err != nil {
		b.Fatal(err)
	}
	defer lc.Close()
	const topic = "split"
	if err := createAndWait(ctx, lc, topic); err != nil {
		b.Fatal(err)
	}
	addrs := lc.Addrs()
	settings := []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0)}

	var layers []sender
	var names []string
	defer func() {
		for _, s := range layers {
			s.close()
		}
	}()
	viaKgo := func(cl *kgo.Client, closeAlso func()) sender {
		return sender{
			async: func(ctx context.Context, v []byte, done func(error)) {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) { done(err) })
			},
			close: func() {
				cl.Close()
				if closeAlso != nil {
					closeAlso()
				}
			},
		}
	}
	plain := func(name string, extra ...kgo.Opt) {
		opts := append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ClientID("kconsist")}, settings...)
		cl, err := kgo.NewClient(append(opts, extra...)...)
		if err != nil {
			b.Fatal(err)
		}
		layers, names = append(layers, viaKgo(cl, nil)), append(names, name)
	}
	newFactory := func(mode factory.ConsistencyMode) *factory.Factory {
		f, err := factory.New(factory.BootstrapServers(addrs...), factory.RequiredAcks(factory.AllISRAcks), factory.Idempotence(true),
			factory.Compression(factory.CodecNone), factory.KgoOpts(kgo.ProducerLinger(0)), factory.Consistency(mode))
		if err != nil {
			b.Fatal(err)
		}
		return f
	}
	factoryKgo := func(name string, mode factory.ConsistencyMode) {
		f := newFactory(mode)
		cl, err := f.KgoClient(factory.KgoOpts(settings...))
		if err != nil {
			b.Fatal(err)
		}
		layers = append(layers, viaKgo(cl, func() { f.Close(ctx) }))
		names = append(names, name)
	}

	plain("kgo")
	ic, err := wire.New(wire.Config{Tokens: tokens.New(consistency.NewMemoryStore(), nil), Dial: (&net.Dialer{}).DialContext})
	if err != nil {
		b.Fatal(err)
	}
	plain("kgo+wire", kgo.Dialer(ic.DialContext))
	factoryKgo("factory kgo off", factory.ModeOff)
	factoryKgo("factory kgo auto", factory.ModeAuto)
	f := newFactory(factory.ModeAuto)
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		b.Fatal(err)
	}
	layers = append(layers, sender{
		async: func(ctx context.Context, v []byte, done func(error)) {
			if err := p.ProduceAsync(ctx, producer.Record[[]byte, []byte]{Topic: topic, Value: v},
				func(_ producer.Result, err error) { done(err) }); err != nil {
				done(err)
			}
		},
		close: func() { _ = p.Close(ctx); f.Close(ctx) },
	})
	names = append(names, "factory producer")
	plain("kgo control")

	value := make([]byte, 1024)
	if _, errs := latencies(ctx, layers, 200, value); slices.Max(errs) > 0 { // warm up: connections, metadata
		b.Fatalf("warm-up produces failed: %v", errs)
	}
	if err := trim(ctx, lc, topic); err != nil {
		b.Fatal(err)
	}
	// One produce per layer per iteration, in batches of 100 iterations
	// whose order rotates.
	all := make([][]float64, len(layers))
	order := make([]sender, len(layers))
	at := make([]int, len(layers))
	b.ResetTimer()
	for done, round := 0, 0; done < b.N; round++ {
		n := min(100, b.N-done)
		for i := range layers {
			at[i] = (i + round) % len(layers)
			order[i] = layers[at[i]]
		}
		lat, errs := latencies(ctx, order, n, value)
		for i := range order {
			if errs[i] > 0 {
				b.Fatalf("%s: %d produces failed", names[at[i]], errs[i])
			}
			all[at[i]] = append(all[at[i]], lat[i]...)
		}
		done += n
	}
	b.StopTimer()
	q := func(xs []float64, p float64) float64 { return xs[int(p*float64(len(xs)-1))] * 1000 }
	for i := range all {
		slices.Sort(all[i])
	}
	base := q(all[0], 0.5)
	for i, name := range names {
		name = strings.ReplaceAll(name, " ", "_") // a unit has no spaces
		b.ReportMetric(q(all[i], 0.5), name+"-p50-µs")
		b.ReportMetric(q(all[i], 0.99), name+"-p99-µs")
		if i > 0 {
			b.ReportMetric(q(all[i], 0.5)/base, name+"-p50/kgo")
		}
	}
}

// BenchmarkProduceLayersBurst splits the factory producer's cost per
// record in a burst (the overhead step's throughput phase) into layers, on
// bare kfake (3 brokers, the fastest broker at hand, so that the clients'
// own cost shows), with small values by default: there a record's own
// work weighs the most against a request's. Layers, each a client of its
// own, taking turns burst by burst in a rotating order:
//
//   - kgo: plain franz-go, the overhead step's producer settings;
//   - factory kgo: f.KgoClient in mode auto (the factory's franz-go
//     options and its interceptor) with kgo's Produce;
//   - factory producer: factory.NewProducer's ProduceAsync (the engine on
//     top of the previous layer);
//   - kgo control: a second plain client, the harness's own error.
//
// Each b.N iteration is one burst of 4000 records per layer, timed from
// the first produce to the last acknowledgement; the topic is trimmed
// (untimed) before each. Reported per layer: ns and process CPU ns per
// record, and both over plain kgo's. The value size is
// KCONSIST_BENCH_VALUE bytes (default 100). Not run by the tests;
// BENCHMARKS.md has its figures:
//
//	go test -run '^$' -bench BenchmarkProduceLayersBurst -benchtime 150x ./integration/bench/
func BenchmarkProduceLayersBurst(b *testing.B) {
	ctx := context.Background()
	size := 100
	if v := os.Getenv("KCONSIST_BENCH_VALUE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("KCONSIST_BENCH_VALUE=%q: want a size in bytes, at least 1", v)
		}
		size = n
	}
	const topic, burst = "produce", 4000
	kf, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, topic),
		kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(overheadSegmentBytes)}))
	if err != nil {
		b.Fatal(err)
	}
	defer kf.Close()
	addrs := kf.ListenAddrs()
	// newSenders gives the factory producer, plain kgo and the control.
	s, err := newSenders(addrs, topic, consistency.Unknown(), factory.ModeAuto)
	if err != nil {
		b.Fatal(err)
	}
	f, err := factory.New(factory.BootstrapServers(addrs...), factory.RequiredAcks(factory.AllISRAcks), factory.Idempotence(true),
		factory.Compression(factory.CodecNone), factory.KgoOpts(kgo.ProducerLinger(0)), factory.Consistency(factory.ModeAuto))
	if err != nil {
		b.Fatal(err)
	}
	cl, err := f.KgoClient()
	if err != nil {
		f.Close(ctx)
		b.Fatal(err)
	}
	fk := sender{
		async: func(ctx context.Context, v []byte, done func(error)) {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) { done(err) })
		},
		close: func() { cl.Close(); f.Close(ctx) },
	}
	layers := []sender{s[vPlain], fk, s[vFactory], s[vControl]}
	names := []string{"kgo", "factory_kgo", "factory_producer", "kgo_control"}
	defer func() {
		for _, l := range layers {
			l.close()
		}
	}()
	value := make([]byte, size)
	for i, l := range layers { // warm up: connections, producer ids, metadata
		if _, errs := l.burst(ctx, burst, value); errs > 0 {
			b.Fatalf("%s: %d warm-up records failed", names[i], errs)
		}
	}
	took := make([]time.Duration, len(layers))
	cpu := make([]time.Duration, len(layers))
	cpuOK := true
	b.ResetTimer()
	for i := range b.N {
		for k := range layers {
			v := (k + i) % len(layers)
			b.StopTimer()
			if err := trimAt(ctx, addrs, topic); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			c0, ok0 := processCPU()
			d, errs := layers[v].burst(ctx, burst, value)
			c1, ok1 := processCPU()
			if errs > 0 {
				b.Fatalf("%s: %d records failed", names[v], errs)
			}
			took[v] += d
			cpu[v] += c1 - c0
			cpuOK = cpuOK && ok0 && ok1
		}
	}
	b.StopTimer()
	recs := float64(b.N * burst)
	for v, name := range names {
		b.ReportMetric(float64(took[v].Nanoseconds())/recs, name+"-ns/record")
		if v > 0 {
			b.ReportMetric(float64(took[v])/float64(took[0]), name+"-time/kgo")
		}
		if cpuOK {
			b.ReportMetric(float64(cpu[v].Nanoseconds())/recs, name+"-cpu-ns/record")
			if v > 0 {
				b.ReportMetric(float64(cpu[v])/float64(cpu[0]), name+"-cpu/kgo")
			}
		}
	}
}
