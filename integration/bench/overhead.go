package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/producer"
)

// The two clients every comparison runs: index 0 is the SDK, 1 the baseline.
// The overhead comparison adds a third, a control: a second plain kgo
// client, measured exactly like the other two. What its ratio to the
// baseline shows is the harness's own error, the answer it gives when
// nothing differs.
//
// A run may add more factories after the control (overheadConfig.AlsoModes):
// index 3 is the first of them (vFactory2), compared like the factory.
const (
	vFactory  = 0
	vPlain    = 1
	vControl  = 2
	vFactory2 = 3
)

var variantNames = [3]string{"factory", "plain kgo", "control (plain kgo)"}

// nameOf is the name of overhead client v in r (a factory after the
// control is named by its mode).
func (r *overheadResult) nameOf(v int) string {
	if v == vFactory && len(r.Cfg.AlsoModes) > 0 {
		return "factory " + modeName(r.Cfg.Mode)
	}
	if v < len(variantNames) {
		return variantNames[v]
	}
	return "factory " + modeName(r.Cfg.AlsoModes[v-len(variantNames)])
}

// modeName is the consistency.mode property value of m.
func modeName(m factory.ConsistencyMode) string {
	switch m {
	case factory.ModeAuto:
		return "auto"
	case factory.ModeNative:
		return "native"
	case factory.ModeEmulated:
		return "emulated"
	case factory.ModeOff:
		return "off"
	}
	return fmt.Sprintf("mode %d", m)
}

// roundOrders are the orders of the three overhead clients, used in turn so
// that each runs first, second and last equally often, after each other one.
var roundOrders = [][]int{
	{vFactory, vPlain, vControl}, {vPlain, vControl, vFactory}, {vControl, vFactory, vPlain},
	{vFactory, vControl, vPlain}, {vControl, vPlain, vFactory}, {vPlain, vFactory, vControl},
}

// roundOrders4 are the orders of four clients (a second factory after the
// control): a balanced Latin square, so that each client runs in each
// place once and right after each other client once in four rounds.
var roundOrders4 = [][]int{
	{vFactory, vPlain, vFactory2, vControl}, {vPlain, vControl, vFactory, vFactory2},
	{vControl, vFactory2, vPlain, vFactory}, {vFactory2, vFactory, vControl, vPlain},
}

// ordersFor returns the round orders of n clients (3 or 4).
func ordersFor(n int) [][]int {
	if n == 4 {
		return roundOrders4
	}
	return roundOrders
}

// overheadConfig sizes one overhead measurement.
type overheadConfig struct {
	Rounds    int // interleaved rounds in all
	Blocks    int // fresh client pairs, each warmed up untimed, sharing the rounds
	Records   int // records per throughput burst, per round and client
	Latencies int // sequential acknowledged produces per round and client, the clients taking turns
	ValueSize int
	// Mode is the factory's consistency.mode (zero: auto, the default).
	Mode factory.ConsistencyMode
	// AlsoModes adds a factory per mode after the control (at most one:
	// vFactory2), each with a store of its own, measured like the factory.
	AlsoModes []factory.ConsistencyMode
}

// clients is how many producers cfg compares.
func (cfg overheadConfig) clients() int { return 3 + len(cfg.AlsoModes) }

// overheadResult is what the overhead comparison measured.
type overheadResult struct {
	Where string
	Cfg   overheadConfig
	// Per client, indexed by vFactory, vPlain, vControl (and vFactory2).
	Tput    [][]float64   // records/s, one per round
	CPU     [][]float64   // process CPU µs per record in the burst, one per round (nil where not measured)
	Lat     [][]float64   // every latency sample, ms
	LatR    [][][]float64 // the latency samples of each round
	RoundP  [][][2]float64
	Block   []int // the block of each round
	Errors  []int
	Elapsed time.Duration
	// Token is the factory's token at the end of the last block ("none"
	// when Unknown): with emulation on it shows that tokens were made.
	// Tokens has it for every client (empty for plain kgo).
	Token  string
	Tokens []string
}

// newOverheadResult returns an empty result for cfg's clients.
func newOverheadResult(where string, cfg overheadConfig) *overheadResult {
	n := cfg.clients()
	return &overheadResult{Where: where, Cfg: cfg, Tput: make([][]float64, n), CPU: make([][]float64, n),
		Lat: make([][]float64, n), LatR: make([][][]float64, n), RoundP: make([][][2]float64, n),
		Errors: make([]int, n), Tokens: make([]string, n)}
}

// failed is the number of failed records of all clients.
func (r *overheadResult) failed() int {
	n := 0
	for _, e := range r.Errors {
		n += e
	}
	return n
}

// sender is one of the compared producers.
type sender struct {
	async func(ctx context.Context, value []byte, done func(error))
	close func()
	token func() consistency.Token // the factory's; nil for kgo
}

// newSenders makes the factory producer and two plain kgo clients with the
// same producer settings: acks=all, idempotent, no compression, linger 0 (kgo's
// default is 10ms and snappy; both are set explicitly so that the two differ
// only by what the SDK adds).
//
// A known token puts the factory's store ahead of any response, as if it had
// been handed over by another service: then every request carries it even
// on a broker that sends none back (Apache Kafka 4.4), which is what makes
// the stamping cost measurable there.
//
// mode is the factory's consistency.mode: a handed token beyond the
// cluster's log needs ModeNative (an emulating factory would wait for the
// cluster to reach it, then heal the store).
//
// also adds a factory per mode after the control, each with a store of its
// own that starts with token too.
func newSenders(addrs []string, topic string, token consistency.Token, mode factory.ConsistencyMode, also ...factory.ConsistencyMode) ([]sender, error) {
	var s []sender
	closeAll := func() {
		for _, made := range s {
			made.close()
		}
	}
	newFactory := func(mode factory.ConsistencyMode) (sender, error) {
		store := consistency.NewMemoryStore()
		if _, err := store.Advance(token); err != nil {
			return sender{}, err
		}
		f, err := factory.New(factory.WithStore(store), factory.BootstrapServers(addrs...), factory.RequiredAcks(factory.AllISRAcks), factory.Idempotence(true),
			factory.Compression(factory.CodecNone), factory.KgoOpts(kgo.ProducerLinger(0)), factory.Consistency(mode))
		if err != nil {
			return sender{}, err
		}
		p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
		if err != nil {
			f.Close(context.Background())
			return sender{}, err
		}
		return sender{
			async: func(ctx context.Context, v []byte, done func(error)) {
				err := p.ProduceAsync(ctx, producer.Record[[]byte, []byte]{Topic: topic, Value: v},
					func(_ producer.Result, err error) { done(err) })
				if err != nil {
					done(err)
				}
			},
			close: func() { _ = p.Close(context.Background()); f.Close(context.Background()) },
			token: f.Token,
		}, nil
	}
	fs, err := newFactory(mode)
	if err != nil {
		return nil, err
	}
	s = append(s, fs)
	for range []int{vPlain, vControl} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ClientID("kconsist"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
		if err != nil {
			closeAll()
			return nil, err
		}
		s = append(s, sender{
			async: func(ctx context.Context, v []byte, done func(error)) {
				cl.Produce(ctx, &kgo.Record{Topic: topic, Value: v}, func(_ *kgo.Record, err error) { done(err) })
			},
			close: cl.Close,
		})
	}
	for _, m := range also {
		fs, err := newFactory(m)
		if err != nil {
			closeAll()
			return nil, err
		}
		s = append(s, fs)
	}
	return s, nil
}

// burst produces n records as fast as the client takes them and returns the
// time from the first produce to the last acknowledgement.
//
// When ctx ends first, burst returns without waiting for the rest, and the
// records not acknowledged count as failed: an idempotent franz-go producer
// never gives up on a batch whose request died on a connection, so with a
// dead broker the acknowledgements would never come.
func (s sender) burst(ctx context.Context, n int, value []byte) (time.Duration, int) {
	var left, errs atomic.Int64
	left.Store(int64(n))
	all := make(chan struct{})
	start := time.Now()
	for range n {
		s.async(ctx, value, func(err error) {
			if err != nil {
				errs.Add(1)
			}
			if left.Add(-1) == 0 {
				close(all)
			}
		})
	}
	select {
	case <-all:
		return time.Since(start), int(errs.Load())
	case <-ctx.Done():
		return time.Since(start), int(errs.Load() + left.Load())
	}
}

// latencies produces n records per sender, one at a time, each waiting for
// its acknowledgement, and returns every sender's round trips in ms and its
// failures. The senders take turns record by record, in the order given, so
// that a slow stretch of the cluster or the machine (a broker's GC pause, a
// log roll, a neighbour on the host) lands on all of them alike instead of
// on whichever client happened to be measured then. When ctx ends it stops,
// counting the record it waited for as failed.
func latencies(ctx context.Context, s []sender, n int, value []byte) ([][]float64, []int) {
	out := make([][]float64, len(s))
	for i := range out {
		out[i] = make([]float64, 0, n)
	}
	errs := make([]int, len(s))
	done := make(chan error, 1) // a late answer after ctx ended does not block
	for range n {
		for i, c := range s {
			start := time.Now()
			c.async(ctx, value, func(err error) { done <- err })
			select {
			case err := <-done:
				if err != nil {
					errs[i]++
					continue
				}
				out[i] = append(out[i], ms(time.Since(start)))
			case <-ctx.Done():
				errs[i]++
				return out, errs
			}
		}
	}
	return out, errs
}

// runOverhead compares the factory producer with plain kgo, and a second
// plain kgo client (the control) with the first, on the cluster at addrs, on
// an existing topic.
//
// The rounds run in cfg.Blocks blocks; each block makes a fresh pair of
// clients (and warms them up), so that what differs between two client
// instances but is not the SDK (which connections they got, where their
// buffers landed) averages out instead of biasing a whole run. Rounds go
// through roundOrders so drift and noise hit every client alike.
//
// settle, when not nil, runs before every timed step (e.g. to drop the
// records an in-memory cluster holds); a forced GC follows it, so neither
// client pays for the other's garbage.
func runOverhead(ctx context.Context, where string, addrs []string, topic string, token consistency.Token, cfg overheadConfig, settle func(context.Context) error, logf func(string, ...any)) (*overheadResult, error) {
	value := make([]byte, cfg.ValueSize)
	_, _ = rand.Read(value)
	res := newOverheadResult(where, cfg)
	t0 := time.Now()
	blocks := max(cfg.Blocks, 1)
	for b := range blocks {
		// Rounds spread over the blocks as evenly as they go.
		rounds := cfg.Rounds*(b+1)/blocks - cfg.Rounds*b/blocks
		if err := overheadBlock(ctx, res, b, rounds, addrs, topic, token, value, settle, logf); err != nil {
			return nil, err
		}
	}
	res.Elapsed = time.Since(t0)
	return res, nil
}

// overheadBlock runs rounds rounds with a fresh pair of clients.
func overheadBlock(ctx context.Context, res *overheadResult, block, rounds int, addrs []string, topic string, token consistency.Token, value []byte, settle func(context.Context) error, logf func(string, ...any)) error {
	cfg := res.Cfg
	s, err := newSenders(addrs, topic, token, cfg.Mode, cfg.AlsoModes...)
	if err != nil {
		return err
	}
	for _, c := range s {
		defer c.close()
	}
	defer func() {
		for v, c := range s {
			if c.token == nil {
				continue
			}
			res.Tokens[v] = "none"
			if t := c.token(); !t.IsUnknown() {
				res.Tokens[v] = fmt.Sprint(t.Offset())
			}
		}
		res.Token = res.Tokens[vFactory]
	}()
	// Warm-up: connections, producer ids, metadata, buffers.
	for v := range s {
		if _, errs := s[v].burst(ctx, max(cfg.Records/4, 100), value); errs > 0 {
			return fmt.Errorf("overhead warm-up: %s: %d records failed", res.nameOf(v), errs)
		}
	}
	latencies(ctx, s, 20, value)
	// beforeStep runs before every timed step: settle, then a forced GC.
	beforeStep := func() error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if settle != nil {
			if err := settle(ctx); err != nil {
				return err
			}
		}
		runtime.GC()
		return nil
	}
	for range rounds {
		r := len(res.Block)
		orders := ordersFor(len(s))
		order := orders[r%len(orders)]
		for _, v := range order {
			if err := beforeStep(); err != nil {
				return err
			}
			cpu0, okCPU := processCPU()
			d, errs := s[v].burst(ctx, cfg.Records, value)
			if cpu1, ok := processCPU(); ok && okCPU {
				res.CPU[v] = append(res.CPU[v], float64((cpu1-cpu0).Nanoseconds())/1e3/float64(max(cfg.Records-errs, 1)))
			}
			res.Errors[v] += errs
			res.Tput[v] = append(res.Tput[v], float64(cfg.Records-errs)/d.Seconds())
		}
		if err := beforeStep(); err != nil {
			return err
		}
		ordered := make([]sender, len(order))
		for i, v := range order {
			ordered[i] = s[v]
		}
		lat, errs := latencies(ctx, ordered, cfg.Latencies, value)
		for i, v := range order {
			res.Errors[v] += errs[i]
			res.Lat[v] = append(res.Lat[v], lat[i]...)
			res.LatR[v] = append(res.LatR[v], lat[i])
			res.RoundP[v] = append(res.RoundP[v], [2]float64{quantile(lat[i], 0.5), quantile(lat[i], 0.99)})
		}
		res.Block = append(res.Block, block)
		var line strings.Builder
		for v := range s {
			if v > 0 {
				line.WriteString(", ")
			}
			fmt.Fprintf(&line, "%s %.0f %.2f %.3f", res.nameOf(v), res.Tput[v][r], last(res.CPU[v]), res.RoundP[v][r][1])
		}
		logf("overhead %s round %d/%d (block %d): records/s, CPU µs/record, p99 ms: %s", res.Where, r+1, cfg.Rounds, block+1, line.String())
	}
	return nil
}

// baseline is what client v is compared with. The factory is compared
// with both plain kgo clients, which differ in nothing, so that a burst of
// either that met a slow moment of the cluster weighs half as much; the
// control is compared with plain kgo alone, and that ratio is the
// harness's own error.
func baseline(v int) []int {
	if v == vControl {
		return []int{vPlain}
	}
	return []int{vPlain, vControl}
}

// ratios returns the per-round ratios of f for client v over its baseline
// (the geometric mean of the baseline clients' values in that round).
func (r *overheadResult) ratios(v int, f func(v, round int) float64) []float64 {
	base := baseline(v)
	out := make([]float64, len(r.Block))
	for i := range out {
		prod := 1.0
		for _, b := range base {
			prod *= f(b, i)
		}
		out[i] = f(v, i) / math.Pow(prod, 1/float64(len(base)))
	}
	return out
}

func (r *overheadResult) tputRatios(v int) []float64 {
	return r.ratios(v, func(v, i int) float64 { return r.Tput[v][i] })
}

// cpuRatios returns nil where the process CPU was not measured.
func (r *overheadResult) cpuRatios(v int) []float64 {
	for _, c := range append(baseline(v), v) {
		if len(r.CPU[c]) != len(r.Block) {
			return nil
		}
	}
	return r.ratios(v, func(v, i int) float64 { return r.CPU[v][i] })
}

func (r *overheadResult) p99Ratios(v int) []float64 {
	return r.ratios(v, func(v, i int) float64 { return r.RoundP[v][i][1] })
}

func (r *overheadResult) p50Ratios(v int) []float64 {
	return r.ratios(v, func(v, i int) float64 { return r.RoundP[v][i][0] })
}

// medianCI is a 95% bootstrap interval of the median of per-round ratios,
// resampling whole blocks: rounds of one set of clients are not
// independent of each other.
func (r *overheadResult) medianCI(ratios []float64) (lo, hi float64) {
	if len(ratios) == 0 {
		return math.NaN(), math.NaN()
	}
	return r.blockCI(func(rounds []int) float64 {
		xs := make([]float64, len(rounds))
		for i, j := range rounds {
			xs[i] = ratios[j]
		}
		return quantile(xs, 0.5)
	})
}

// pooledRatio is quantile q of client v's pooled latency samples over
// that of its baseline's (the samples of the baseline clients together).
func (r *overheadResult) pooledRatio(v int, q float64) float64 {
	var base []float64
	for _, b := range baseline(v) {
		base = append(base, r.Lat[b]...)
	}
	return quantile(r.Lat[v], q) / quantile(base, q)
}

// pooledCI is a 95% bootstrap interval of pooledRatio(v, q), resampling
// whole blocks (the clients' samples of a round go together, as they shared
// the machine's state).
func (r *overheadResult) pooledCI(v int, q float64) (lo, hi float64) {
	units := r.units()
	pooled := func(cs []int) *pooledSamples {
		groups := make([][]float64, len(units))
		for i, rounds := range units {
			for _, j := range rounds {
				for _, c := range cs {
					groups[i] = append(groups[i], r.LatR[c][j]...)
				}
			}
		}
		return newPooledSamples(groups)
	}
	a, b := pooled([]int{v}), pooled(baseline(v))
	return bootstrapCI(len(units), func(idx []int) float64 {
		return a.quantile(idx, q) / b.quantile(idx, q)
	})
}

// blockCI is a 95% bootstrap interval of stat, which gets the rounds of a
// resample of the blocks (with replacement).
func (r *overheadResult) blockCI(stat func(rounds []int) float64) (lo, hi float64) {
	units := r.units()
	return bootstrapCI(len(units), func(idx []int) float64 {
		var rounds []int
		for _, j := range idx {
			rounds = append(rounds, units[j]...)
		}
		return stat(rounds)
	})
}

// units are what the bootstrap resamples: the blocks, each the list of its
// rounds, or the single rounds when all ran in one block.
func (r *overheadResult) units() [][]int {
	var blocks [][]int
	for i, b := range r.Block {
		for len(blocks) <= b {
			blocks = append(blocks, nil)
		}
		blocks[b] = append(blocks[b], i)
	}
	if len(blocks) == 1 { // one set of clients: rounds are all there is
		blocks = blocks[:0]
		for i := range r.Block {
			blocks = append(blocks, []int{i})
		}
	}
	return blocks
}

func last(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return xs[len(xs)-1]
}
