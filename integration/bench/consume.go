package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/integration/localcluster"
)

// The consumer comparison's readers. The factory reads with Bytes() values
// through each of its three reads, Records, Poll (the consumer's slice) and
// AppendPoll (a slice the reader reuses), the rows issue #40's target is
// for; and with Records and JSON values (the deserializer's cost, which is
// the user's choice). Plain kgo and the control are two identical plain
// franz-go readers (PollFetches, EachRecord), as in the producer overhead.
const (
	rFactory = iota
	rFactoryPoll
	rFactoryAppend
	rFactoryJSON
	rPlain
	rControl
	numReaders
)

var readerNames = [numReaders]string{
	"factory `Records`, `Bytes()`", "factory `Poll`, `Bytes()`", "factory `AppendPoll`, `Bytes()`", "factory `Records`, `JSON`",
	"plain kgo `PollFetches`", "control (plain kgo)",
}

// consumeTarget is issue #40's target for the rows it names: throughput at
// least this times plain kgo's.
const consumeTarget = 0.95

// hasTarget reports whether reader v's row has consumeTarget: the
// factory's Bytes() readers, each of its three reads.
func hasTarget(v int) bool { return v == rFactory || v == rFactoryPoll || v == rFactoryAppend }

// consumeConfig sizes one consumer comparison.
type consumeConfig struct {
	Rounds    int // each reader reads the topic once per round; runConsume rounds it up to whole sets (consumeRounds)
	Records   int // records in the topic, all read by every read
	ValueSize int
}

// consumeResult is what the consumer comparison measured.
type consumeResult struct {
	Where   string
	Cfg     consumeConfig         // as run: Rounds is consumeRounds of the rounds asked
	Asked   int                   // the rounds asked for
	Tput    [numReaders][]float64 // records/s, one per round
	CPU     [numReaders][]float64 // process CPU µs per record, one per round (nil where not measured)
	Elapsed time.Duration
}

// reading is the JSON value of every record, padded to the value size.
type reading struct {
	Sensor string `json:"sensor"`
	Value  int    `json:"value"`
	Pad    string `json:"pad"`
}

// consumeValue is record i's value: a reading of exactly size bytes (at
// least its JSON without padding), so the bytes and JSON readers read the
// same records.
func consumeValue(i, size int) []byte {
	v := fmt.Appendf(nil, `{"sensor":"s%06d","value":%d,"pad":""}`, i%1000000, i)
	if pad := size - len(v); pad > 0 {
		v = fmt.Appendf(nil, `{"sensor":"s%06d","value":%d,"pad":"%s"}`, i%1000000, i, bytes.Repeat([]byte("x"), pad))
	}
	return v
}

// fillTopic produces cfg.Records records to topic through a plain client.
func fillTopic(ctx context.Context, addrs []string, topic string, cfg consumeConfig) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed atomic.Int64
	var first atomic.Value
	for i := range cfg.Records {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: consumeValue(i, cfg.ValueSize)}, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				first.Store(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("fill %s: %w", topic, err)
	}
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("fill %s: %d records failed, the first with %v", topic, n, first.Load())
	}
	return nil
}

// readTopic reads all cfg.Records records of topic's partitions from the
// start with a fresh client of reader v, and returns the time from making
// the client to the last record in hand.
func readTopic(ctx context.Context, v int, f *factory.Factory, addrs []string, topic string, partitions int32, n int) (time.Duration, error) {
	at := map[string]map[int32]kgo.Offset{topic: {}}
	for p := range partitions {
		at[topic][p] = kgo.NewOffset().AtStart()
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	got := 0
	switch v {
	case rPlain, rControl:
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ClientID("kconsist"), kgo.ConsumePartitions(at))
		if err != nil {
			return 0, err
		}
		defer cl.Close()
		for got < n {
			fs := cl.PollFetches(ctx)
			if err := fs.Err0(); err != nil {
				return 0, fmt.Errorf("%s: %w", readerNames[v], err)
			}
			fs.EachRecord(func(r *kgo.Record) { got += min(len(r.Value), 1) })
		}
	case rFactory, rFactoryPoll, rFactoryAppend:
		c, err := factory.NewConsumer(f, consumer.Bytes(), consumer.Bytes())
		if err != nil {
			return 0, err
		}
		defer c.Close(context.Background())
		if err := c.Assign(at); err != nil {
			return 0, err
		}
		if v == rFactory {
			for r, err := range c.Records(ctx) {
				if err != nil {
					return 0, fmt.Errorf("%s: %w", readerNames[v], err)
				}
				if got += min(len(r.Value), 1); got == n {
					break
				}
			}
		}
		if v == rFactoryAppend {
			// As Poll below (the default batch, each record's value
			// touched alike), into a slice passed back each time.
			var dst []consumer.Record[[]byte, []byte]
			for got < n {
				if dst, err = c.AppendPoll(ctx, dst[:0], 0); err != nil {
					return 0, fmt.Errorf("%s: %w", readerNames[v], err)
				}
				for _, r := range dst {
					got += min(len(r.Value), 1)
				}
			}
		}
		for got < n {
			recs, err := c.Poll(ctx, 0)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", readerNames[v], err)
			}
			for _, r := range recs {
				got += min(len(r.Value), 1)
			}
		}
	case rFactoryJSON:
		c, err := factory.NewConsumer(f, consumer.Bytes(), consumer.JSON[reading]())
		if err != nil {
			return 0, err
		}
		defer c.Close(context.Background())
		if err := c.Assign(at); err != nil {
			return 0, err
		}
		for r, err := range c.Records(ctx) {
			if err != nil {
				return 0, fmt.Errorf("%s: %w", readerNames[v], err)
			}
			if got += min(len(r.Value.Sensor), 1); got == n {
				break
			}
		}
	}
	d := time.Since(start)
	if got != n {
		return 0, fmt.Errorf("%s: read %d of %d records: %w", readerNames[v], got, n, ctx.Err())
	}
	return d, nil
}

// readOrders returns a balanced set of orders in which n readers read
// within a round (a Williams design): every reader is at every position,
// and directly follows every other reader, equally often over the set. A
// read's speed depends on the state the previous read left behind, so a
// fixed cycle (a rotation) gives each reader the same predecessor every
// round and a bias of its own: in the plain cycle plain kgo always read
// right after the JSON reader, which leaves the most freed heap to reuse,
// and was ~10% faster than the identical control that followed it. The set
// has n orders for an even n and 2n for an odd n above 1.
//
// For an even n one square is a Williams design; for an odd n no single
// square is (an odd number of orders cannot put each of the n-1 others
// right after a reader equally often), so two are needed.
func readOrders(n int) [][]int {
	if n < 1 {
		return nil
	}
	// First order 0, 1, n-1, 2, n-2, …: its successive differences are
	// all distinct mod n, so its n shifts are a Latin square in which
	// every ordered pair is adjacent once; for an odd n, the reversed
	// shifts balance the pairs that an odd square leaves uneven.
	first := make([]int, n)
	for i, lo, hi := 1, 1, n-1; i < n; i++ {
		if i%2 == 1 {
			first[i], lo = lo, lo+1
		} else {
			first[i], hi = hi, hi-1
		}
	}
	var out [][]int
	for s := range n {
		o := make([]int, n)
		for i, v := range first {
			o[i] = (v + s) % n
		}
		out = append(out, o)
	}
	if n%2 == 1 && n > 1 {
		for s := range n {
			o := slices.Clone(out[s])
			slices.Reverse(o)
			out = append(out, o)
		}
	}
	return out
}

// settle leaves the process in the same state before every timed read: no
// garbage of the previous read and no freed heap kept mapped. A forced GC
// alone is not enough: the pages the previous reader freed stay mapped
// until the background scavenger returns them, so whoever reads next grows
// its heap without page faults, and the reader after it pays for them
// (measured: 2,500 against 17,000 minor faults per read of 1,000,000
// records, the difference between plain kgo and the control). Returning
// everything makes each reader fault in its own heap.
func settle() { debug.FreeOSMemory() }

// consumeRounds returns the rounds a consumer comparison runs when asked
// for asked: asked rounded up to whole sets of readOrders (at least one),
// so that the balance holds over the run. With 6 readers a set is 6
// orders: the plan's 20 rounds run as 24, 10 as 12, -quick's 2 as 6.
func consumeRounds(asked int) int {
	set := len(readOrders(numReaders))
	return max(1, (asked+set-1)/set) * set
}

// runConsume compares the factory's consumer with plain kgo on topic, which
// fillTopic has filled: after one untimed read each, every round each
// reader reads the whole topic once from the start with a fresh client,
// in the round's order from readOrders, the process settled before each
// read; cfg.Rounds is rounded up to whole sets of orders (consumeRounds),
// and the result's Cfg holds the rounds run. The factory's store holds
// token, as in the producer overhead, so every request it sends carries
// one.
func runConsume(ctx context.Context, where string, addrs []string, topic string, partitions int32, token consistency.Token, cfg consumeConfig, logf func(string, ...any)) (*consumeResult, error) {
	store := consistency.NewMemoryStore()
	if _, err := store.Advance(token); err != nil {
		return nil, err
	}
	f, err := factory.New(factory.WithStore(store), factory.BootstrapServers(addrs...))
	if err != nil {
		return nil, err
	}
	defer f.Close(context.Background())
	res := &consumeResult{Where: where, Cfg: cfg, Asked: cfg.Rounds}
	cfg.Rounds = consumeRounds(cfg.Rounds)
	res.Cfg.Rounds = cfg.Rounds
	t0 := time.Now()
	// Warm-up: one untimed read each, so no timed read is the first to
	// touch the cluster's data or grow the cluster's and runtime's
	// structures.
	for v := range numReaders {
		if _, err := readTopic(ctx, v, f, addrs, topic, partitions, cfg.Records); err != nil {
			return nil, fmt.Errorf("consume warm-up: %w", err)
		}
	}
	orders := readOrders(numReaders)
	for r := range cfg.Rounds {
		for _, v := range orders[r%len(orders)] {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			settle()
			cpu0, okCPU := processCPU()
			d, err := readTopic(ctx, v, f, addrs, topic, partitions, cfg.Records)
			if err != nil {
				return nil, err
			}
			if cpu1, ok := processCPU(); ok && okCPU {
				res.CPU[v] = append(res.CPU[v], float64((cpu1-cpu0).Nanoseconds())/1e3/float64(cfg.Records))
			}
			res.Tput[v] = append(res.Tput[v], float64(cfg.Records)/d.Seconds())
		}
		logf("consume %s round %d/%d: records/s factory %.0f, poll %.0f, appendpoll %.0f, json %.0f, plain %.0f, control %.0f", where, r+1, cfg.Rounds,
			last(res.Tput[rFactory]), last(res.Tput[rFactoryPoll]), last(res.Tput[rFactoryAppend]), last(res.Tput[rFactoryJSON]),
			last(res.Tput[rPlain]), last(res.Tput[rControl]))
	}
	res.Elapsed = time.Since(t0)
	return res, nil
}

// ratios returns the per-round ratios of series x of reader v over plain
// kgo: the geometric mean of the plain and control readers' values that
// round, or over plain alone for the control.
func (r *consumeResult) ratios(x *[numReaders][]float64, v int) []float64 {
	if len(x[v]) != r.Cfg.Rounds || len(x[rPlain]) != r.Cfg.Rounds || len(x[rControl]) != r.Cfg.Rounds {
		return nil
	}
	out := make([]float64, r.Cfg.Rounds)
	for i := range out {
		base := math.Sqrt(x[rPlain][i] * x[rControl][i])
		if v == rControl {
			base = x[rPlain][i]
		}
		out[i] = x[v][i] / base
	}
	return out
}

// ratioMedian is the median of per-round ratios; of an even number, the
// geometric mean of the middle two, so that the median of y/x is exactly 1
// over the median of x/y. The nearest rank (quantile) takes the lower of
// the two: with 20 noisy rounds that alone put the control 1–2% below
// plain kgo, and every factory row as far below its true median.
func ratioMedian(ratios []float64) float64 {
	n := len(ratios)
	if n == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(ratios))
	if n%2 == 1 {
		return s[n/2]
	}
	return math.Sqrt(s[n/2-1] * s[n/2])
}

// ratioCI is a 95% bootstrap interval of the median of per-round ratios;
// rounds are the units (every read has fresh clients).
func ratioCI(ratios []float64) (lo, hi float64) {
	xs := make([]float64, len(ratios))
	return bootstrapCI(len(ratios), func(idx []int) float64 {
		for i, j := range idx {
			xs[i] = ratios[j]
		}
		return ratioMedian(xs)
	})
}

// consumeMarkdown writes the consumer table of r.
func consumeMarkdown(w *bytes.Buffer, r *consumeResult) {
	c := r.Cfg
	fmt.Fprintf(w, "Where: %s. One topic of %d records of %d bytes (a JSON object, so that every reader reads the same records). "+
		"Each read makes a fresh client, assigns every partition from the start and reads until it has all %d records in hand; "+
		"throughput = records / time from making the client to the last record (connecting and the first fetches included, "+
		"for every reader alike); CPU = user + system time of the whole process during the read, per record. Readers: "+
		"the factory consumer (`factory.NewConsumer`, `Assign`) reading `consumer.Bytes()` values with `Records`, with `Poll` and "+
		"with `AppendPoll` into a slice passed back each time (`Poll` and `AppendPoll` alike: batches of the default size, every "+
		"record's value touched; the three rows of the target, ≥ %s× plain kgo each), and with `Records` and `consumer.JSON` values "+
		"(the deserializer's cost, which is the user's choice); "+
		"plain `kgo.Client` with `PollFetches` and `EachRecord`; and a second identical plain client, the **control**. The factory "+
		"rows are compared with both plain clients (per round, the geometric mean of their two values), the control with plain "+
		"kgo alone: its ratio is the harness's own error. The factory's store starts with a token of the cluster, so every request "+
		"it sends is stamped.\n\n", r.Where, c.Records, c.ValueSize, c.Records, f2(consumeTarget))
	orders := len(readOrders(numReaders))
	balance := fmt.Sprintf("%d rounds are %d whole sets", c.Rounds, c.Rounds/orders)
	if c.Rounds == orders {
		balance = fmt.Sprintf("%d rounds are 1 whole set", c.Rounds)
	}
	if c.Rounds%orders != 0 {
		balance = fmt.Sprintf("%d rounds are not a whole number of sets: the balance is partial", c.Rounds)
	}
	if r.Asked != c.Rounds {
		balance += fmt.Sprintf(", the %d rounds asked rounded up", r.Asked)
	}
	square := "one square suffices for an even number of readers"
	if numReaders%2 == 1 {
		square = "two squares, as an odd number of readers needs"
	}
	fmt.Fprintf(w, "Repetitions: %d rounds after one untimed read each; in each round every reader reads once. Fairness: a read's "+
		"speed depends on what the read before it left behind, so the rounds take their orders from a balanced set of %d "+
		"(a Williams design of %d readers: %s) in which every reader is at every position and directly follows every other "+
		"reader equally often (%s); and before each read the process is settled with `debug.FreeOSMemory` (a GC that also returns the freed "+
		"heap), so that no reader grows its heap into pages the previous one left mapped and the next would fault in. "+
		"Spread: median [min–max] over rounds; ratios: median of per-round ratios (of an even number, the geometric mean of "+
		"the middle two) with a 95%% bootstrap interval over rounds. "+
		"Run time %v.\n\n", c.Rounds, orders, numReaders, square, balance, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "| reader | records/s | CPU µs per record | throughput / kgo ×2 | CPU / kgo ×2 | target | result |\n|---|---|---|---|---|---|---|\n")
	for v := range numReaders {
		tcell, ccell, target, result := "1", "1", "–", "–"
		if v != rPlain {
			tr := r.ratios(&r.Tput, v)
			lo, hi := ratioCI(tr)
			sp := spreadOf(tr)
			tcell = fmt.Sprintf("%s, 95%% CI [%s, %s]; per-round [%s–%s]", f3(ratioMedian(tr)), f3(lo), f3(hi), f3(sp.Min), f3(sp.Max))
			if cr := r.ratios(&r.CPU, v); cr != nil {
				lo, hi := ratioCI(cr)
				ccell = fmt.Sprintf("%s, 95%% CI [%s, %s]", f3(ratioMedian(cr)), f3(lo), f3(hi))
			} else {
				ccell = "–"
			}
			if hasTarget(v) {
				target, result = "≥ "+f2(consumeTarget), verdict(lo, hi, consumeTarget, true)
			}
			if v == rControl {
				tcell += " (over plain kgo: harness error)"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", readerNames[v], spreadText(spreadOf(r.Tput[v]), f0),
			spreadText(spreadOf(r.CPU[v]), f2), tcell, ccell, target, result)
	}
	fmt.Fprintln(w)
}

// The consumer comparison's sections of the report.
const (
	consumeSection  = "consume-local"
	kconsumeSection = "consume-realkafka"
)

// runLocalConsume runs the consumer comparison on a local cluster that
// never lags, 3 brokers like the producer overhead's.
func runLocalConsume(ctx context.Context, o options, p plan, m machine) (string, error) {
	t0 := time.Now()
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(0))
	if err != nil {
		return "", err
	}
	defer lc.Close()
	if err := createAndWait(ctx, lc, "consume"); err != nil {
		return "", err
	}
	if err := fillTopic(ctx, lc.Addrs(), "consume", p.consume); err != nil {
		return "", err
	}
	res, err := runConsume(ctx, "in-process local cluster (integration/localcluster), 3 brokers, apply lag 0, topic of 3 partitions",
		lc.Addrs(), "consume", 3, consistency.Unknown(), p.consume, o.Logf)
	if err != nil {
		return "", fmt.Errorf("consume: %w", err)
	}
	var tables bytes.Buffer
	consumeMarkdown(&tables, res)
	var body bytes.Buffer
	header(&body, o, m, time.Since(t0))
	body.Write(tables.Bytes())
	return body.String(), nil
}

// runRealConsume runs the consumer comparison on three Apache Kafka 4.4
// nodes of its own.
func runRealConsume(ctx context.Context, o options, p plan, m machine) (string, error) {
	t0 := time.Now()
	var res *consumeResult
	startup, err := withKafka(ctx, o.Logf, func(ctx context.Context, c *kafkatest.Cluster) error {
		if err := createInSync(ctx, c, "consume", nil); err != nil {
			return err
		}
		if err := fillTopic(ctx, c.BootstrapAddrs(), "consume", p.kconsume); err != nil {
			return err
		}
		var err error
		res, err = runConsume(ctx, "Apache Kafka 4.4, 3 nodes, topic of 3 partitions with replication factor 3",
			c.BootstrapAddrs(), "consume", 3, consistency.MustOf(c.ClusterID(), 1<<40), p.kconsume, o.Logf)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("consume: %w", err)
	}
	var tables bytes.Buffer
	fmt.Fprintf(&tables, "Three combined broker+controller JVMs started by `integration/kafkatest` (ready in %v). Kafka 4.4 skips "+
		"the header tag the factory stamps and sends none back.\n\n", startup.Round(time.Second))
	consumeMarkdown(&tables, res)
	var body bytes.Buffer
	header(&body, o, m, time.Since(t0))
	body.Write(tables.Bytes())
	return body.String(), nil
}
