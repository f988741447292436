package main

import (
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

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
