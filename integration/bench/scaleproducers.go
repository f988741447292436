package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

// --- Curve 3: producers per factory ---

type producerPoint struct {
	Producers int
	Tput, CPU [2][]float64 // vFactory, vPlain: records/s and process CPU µs per record, per round
	Heap      [2][]float64 // bytes of live heap per producer, per round
	P99       [2][]float64 // ms: p99 of one-at-a-time produces, every producer at once, per round
	Errors    [2]int
}

// producerSide is n producers of one kind, made and closed together.
// send produces one record; its partition counts only with manual.
type producerSide struct {
	send  []func(ctx context.Context, topic string, partition int32, v []byte, done func(error))
	close func()
}

// newProducerSide makes n producers of kind v (vFactory: one factory and n
// factory.NewProducer; vPlain: n kgo.Clients) with the overhead step's
// settings; manual gives them franz-go's manual partitioner.
func newProducerSide(addrs []string, v, n int, manual bool) (producerSide, error) {
	var s producerSide
	settings := []kgo.Opt{kgo.ProducerLinger(0)}
	if manual {
		settings = append(settings, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	switch v {
	case vFactory:
		f, err := factory.New(factory.BootstrapServers(addrs...), factory.RequiredAcks(factory.AllISRAcks), factory.Idempotence(true),
			factory.Compression(factory.CodecNone), factory.KgoOpts(settings...))
		if err != nil {
			return s, err
		}
		var ps []*producer.Producer[[]byte, []byte]
		s.close = func() {
			for _, p := range ps {
				_ = p.Close(context.Background())
			}
			f.Close(context.Background())
		}
		for range n {
			p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
			if err != nil {
				s.close()
				return s, err
			}
			ps = append(ps, p)
			s.send = append(s.send, func(ctx context.Context, topic string, partition int32, val []byte, done func(error)) {
				err := p.ProduceAsync(ctx, producer.Record[[]byte, []byte]{Topic: topic, Partition: partition, Value: val},
					func(_ producer.Result, err error) { done(err) })
				if err != nil {
					done(err)
				}
			})
		}
	default:
		var cls []*kgo.Client
		s.close = func() {
			for _, c := range cls {
				c.Close()
			}
		}
		for range n {
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RequiredAcks(kgo.AllISRAcks()),
				kgo.ProducerBatchCompression(kgo.NoCompression())}, settings...)...)
			if err != nil {
				s.close()
				return s, err
			}
			cls = append(cls, cl)
			s.send = append(s.send, func(ctx context.Context, topic string, partition int32, val []byte, done func(error)) {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: partition, Value: val}, func(_ *kgo.Record, err error) { done(err) })
			})
		}
	}
	return s, nil
}

// produceAll has every producer of s produce per records at once and
// returns the time until every one was acknowledged and the failures.
func (s producerSide) produceAll(ctx context.Context, topic string, per int, value []byte) (time.Duration, int) {
	var left, errs atomic.Int64
	left.Store(int64(per * len(s.send)))
	all := make(chan struct{})
	start := time.Now()
	var wg sync.WaitGroup
	for _, send := range s.send {
		wg.Go(func() {
			for range per {
				send(ctx, topic, 0, value, func(err error) {
					if err != nil {
						errs.Add(1)
					}
					if left.Add(-1) == 0 {
						close(all)
					}
				})
			}
		})
	}
	wg.Wait()
	select {
	case <-all:
	case <-ctx.Done():
		return time.Since(start), int(errs.Load() + left.Load())
	}
	return time.Since(start), int(errs.Load())
}

// produceEach has every producer of s produce per records one at a time,
// each acknowledged before the next, all producers at once, and returns
// the latency of every record acknowledged and the failures.
func (s producerSide) produceEach(ctx context.Context, topic string, per int, value []byte) ([]time.Duration, int) {
	lats := make([][]time.Duration, len(s.send))
	var errs atomic.Int64
	var wg sync.WaitGroup
	for i, send := range s.send {
		wg.Go(func() {
			done := make(chan error, 1)
			for range per {
				t0 := time.Now()
				send(ctx, topic, 0, value, func(err error) { done <- err })
				if err := <-done; err != nil {
					errs.Add(1)
					continue
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	return slices.Concat(lats...), int(errs.Load())
}

// produceSpread has the first producer of s produce one record to each
// of topic's partitions at once, and returns the failures.
func (s producerSide) produceSpread(ctx context.Context, topic string, partitions int32, value []byte) int {
	var errs atomic.Int64
	var wg sync.WaitGroup
	for p := range partitions {
		wg.Add(1)
		s.send[0](ctx, topic, p, value, func(err error) {
			if err != nil {
				errs.Add(1)
			}
			wg.Done()
		})
	}
	wg.Wait()
	return int(errs.Load())
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// settledHeap is liveHeap once it stopped moving: memory a client closed
// a moment ago still frees (the local cluster lets go of a connection's
// buffers when it sees the close). At most about a second.
func settledHeap() uint64 {
	h := liveHeap()
	for range 40 {
		time.Sleep(25 * time.Millisecond)
		next := liveHeap()
		if d := int64(next) - int64(h); d < 64<<10 && d > -64<<10 {
			return next
		}
		h = next
	}
	return h
}

// p99ms is the 99th percentile of ds in milliseconds.
func p99ms(ds []time.Duration) float64 {
	xs := make([]float64, len(ds))
	for i, d := range ds {
		xs[i] = float64(d.Nanoseconds()) / 1e6
	}
	return quantile(xs, 0.99)
}

// createTopic creates topic with partitions (replication 3) through a
// plain client.
func createTopic(ctx context.Context, addrs []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 3, nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	return nil
}

// runProducerCurve measures every producer count on one local cluster,
// then the heap one producer of each kind holds per 1,000 partitions it
// produced to (per round and kind, in bytes).
func runProducerCurve(ctx context.Context, cfg scaleConfig, logf func(string, ...any)) ([]*producerPoint, [2][]float64, error) {
	var wideHeap [2][]float64
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(0), localcluster.Native(false),
		localcluster.KfakeOpts(kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(overheadSegmentBytes)})))
	if err != nil {
		return nil, wideHeap, err
	}
	defer lc.Close()
	const topic, wide, warm = "scale-producers", "scale-partitions", "scale-partitions-warm"
	if err := createTopic(ctx, lc.Addrs(), topic, 10); err != nil {
		return nil, wideHeap, err
	}
	if err := createTopic(ctx, lc.Addrs(), wide, cfg.WidePartitions); err != nil {
		return nil, wideHeap, err
	}
	if err := createTopic(ctx, lc.Addrs(), warm, 10); err != nil {
		return nil, wideHeap, err
	}
	if err := waitAllApplied(ctx, lc, 3); err != nil {
		return nil, wideHeap, err
	}
	value := make([]byte, 1024)
	// The wide topic's partitions get their log segments at the brokers
	// before any side is measured, so the first side measured does not pay
	// for the brokers' files; each side then sends one-byte values, so the
	// brokers' copies of its records (in the heap of this process, the
	// same for both sides) stay small beside the clients' own state.
	tiny := []byte{1}
	if s, err := newProducerSide(lc.Addrs(), vPlain, 1, true); err != nil {
		return nil, wideHeap, err
	} else {
		errs := s.produceSpread(ctx, wide, cfg.WidePartitions, tiny)
		s.close()
		if errs > 0 {
			return nil, wideHeap, fmt.Errorf("producing to %d partitions: %d failed", cfg.WidePartitions, errs)
		}
	}
	// Heap per partition, first, while no client closed a moment ago frees
	// memory: one producer, warmed on every partition of the 10-partition
	// topic, then one record to every partition of the wide topic; the live heap then,
	// less the heap after the warm-up, is what the partitions cost.
	for r := range cfg.ProducerRounds {
		for j := range 2 {
			v := (r + j) % 2
			if err := trim(ctx, lc, wide); err != nil {
				return nil, wideHeap, err
			}
			s, err := newProducerSide(lc.Addrs(), v, 1, true)
			if err != nil {
				return nil, wideHeap, err
			}
			// Warmed on every partition of two topics: connected to every
			// broker, and past the first new topic (a Metadata request on
			// a connection of its own, the factory's questions about it),
			// so what follows adds a topic's partitions, not connections.
			if errs := s.produceSpread(ctx, topic, 10, tiny) + s.produceSpread(ctx, warm, 10, tiny); errs > 0 {
				s.close()
				return nil, wideHeap, fmt.Errorf("wide warm-up: %d failed", errs)
			}
			h0 := settledHeap()
			errs := s.produceSpread(ctx, wide, cfg.WidePartitions, tiny)
			h1 := liveHeap()
			s.close()
			if errs > 0 {
				return nil, wideHeap, fmt.Errorf("producing to %d partitions: %d failed", cfg.WidePartitions, errs)
			}
			wideHeap[v] = append(wideHeap[v], (float64(h1)-float64(h0))*1000/float64(cfg.WidePartitions))
		}
	}
	logf("scale heap per 1,000 partitions: factory %.0f B, plain %.0f B", last(wideHeap[vFactory]), last(wideHeap[vPlain]))
	var out []*producerPoint
	for _, n := range cfg.Producers {
		pt := &producerPoint{Producers: n}
		per := max(cfg.ProducerTotal/n, 1)
		perLat := max(cfg.ProducerLatency/n, 8)
		for r := range cfg.ProducerRounds {
			for j := range 2 {
				v := (r + j) % 2
				if err := trim(ctx, lc, topic); err != nil {
					return nil, wideHeap, err
				}
				h0 := liveHeap()
				s, err := newProducerSide(lc.Addrs(), v, n, false)
				if err != nil {
					return nil, wideHeap, err
				}
				// Warm-up: one acknowledged record per producer (metadata,
				// connections, producer ids), then the heap they hold.
				if _, errs := s.produceAll(ctx, topic, 1, value); errs > 0 {
					s.close()
					return nil, wideHeap, fmt.Errorf("producers warm-up: %d failed", errs)
				}
				h1 := liveHeap()
				pt.Heap[v] = append(pt.Heap[v], (float64(h1)-float64(h0))/float64(n))
				cpu0, okCPU := processCPU()
				d, errs := s.produceAll(ctx, topic, per, value)
				cpu1, ok := processCPU()
				lats, lerrs := s.produceEach(ctx, topic, perLat, value)
				s.close()
				done := per*n - errs
				pt.Errors[v] += errs + lerrs
				pt.Tput[v] = append(pt.Tput[v], float64(done)/d.Seconds())
				if ok && okCPU {
					pt.CPU[v] = append(pt.CPU[v], float64((cpu1-cpu0).Nanoseconds())/1e3/float64(max(done, 1)))
				}
				if len(lats) > 0 {
					pt.P99[v] = append(pt.P99[v], p99ms(lats))
				}
			}
		}
		logf("scale producers=%d: records/s factory %.0f, plain %.0f; p99 factory %.3f ms, plain %.3f ms; heap per producer factory %.0f B, plain %.0f B", n,
			last(pt.Tput[vFactory]), last(pt.Tput[vPlain]), last(pt.P99[vFactory]), last(pt.P99[vPlain]), last(pt.Heap[vFactory]), last(pt.Heap[vPlain]))
		out = append(out, pt)
	}
	return out, wideHeap, nil
}

// pairedRatios returns x[vFactory][i] / x[vPlain][i] per round.
func pairedRatios(x [2][]float64) []float64 {
	n := min(len(x[vFactory]), len(x[vPlain]))
	out := make([]float64, n)
	for i := range out {
		out[i] = x[vFactory][i] / x[vPlain][i]
	}
	return out
}
