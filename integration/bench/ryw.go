package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

// rywConfig sizes the read-your-writes measurement.
type rywConfig struct {
	Lags   []time.Duration // apply lag of brokers 1 and 2 (broker 0 has none)
	Trials int             // per lag and client, after one untimed warm-up each
	// Timeout bounds one trial; a trial that has not consumed its record by
	// then is a failure.
	Timeout time.Duration
}

// rywTrial is one create → produce → consume.
type rywTrial struct {
	Create, Produce, Consume time.Duration // stage times
	Read                     time.Duration // real Kafka: Metadata from every broker after the create
	Total                    time.Duration
	Failed                   string // empty when the record came back
	StaleAnswers             int64  // answers the cluster served from a lagging image
	SurfacedErrors           int    // errors the application saw (and retried) before success
}

// rywResult holds every trial of one lag: indexed by vFactory and vPlain,
// and, where a second factory ran (-realkafka-ryw -kip1243), rywFactory2.
type rywResult struct {
	Lag    time.Duration
	Trials [3][]rywTrial
}

// rywFactory2 is the index of a second factory's read-your-writes trials.
const rywFactory2 = 2

// rywClients are the admin, producer and consumer of one side.
type rywClients struct {
	create  func(ctx context.Context, topic string) error
	produce func(ctx context.Context, topic string, v []byte) error
	// consume waits for the first record of topic; it returns the errors it
	// saw along the way.
	consume func(ctx context.Context, topic string) (int, error)
	// probe, on real Kafka, asks every broker for topic's metadata through
	// this side's clients and returns how many did not know it: there is
	// no cluster-side count of stale answers there. Nil on the local
	// cluster.
	probe func(ctx context.Context, topic string) (int, error)
	close func()
}

// factoryRYW makes the clients of one factory; opts are added to its
// settings (e.g. factory.Consistency).
func factoryRYW(addrs []string, opts ...factory.Opt) (*rywClients, error) {
	f, err := factory.New(append([]factory.Opt{factory.BootstrapServers(addrs...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	fkgo, err := f.KgoClient()
	if err != nil {
		f.Close(context.Background())
		return nil, err
	}
	adm, err := f.Admin()
	if err != nil {
		fkgo.Close()
		f.Close(context.Background())
		return nil, err
	}
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		adm.Close(context.Background())
		fkgo.Close()
		f.Close(context.Background())
		return nil, err
	}
	c, err := factory.NewConsumer(f, consumer.Bytes(), consumer.Bytes())
	if err != nil {
		adm.Close(context.Background())
		_ = p.Close(context.Background())
		fkgo.Close()
		f.Close(context.Background())
		return nil, err
	}
	return &rywClients{
		create: func(ctx context.Context, topic string) error {
			r, err := adm.CreateTopic(ctx, 1, -1, nil, topic)
			if err != nil {
				return err
			}
			return r.Err
		},
		produce: func(ctx context.Context, topic string, v []byte) error {
			_, err := p.Produce(ctx, producer.Record[[]byte, []byte]{Topic: topic, Value: v})
			return err
		},
		consume: func(ctx context.Context, topic string) (int, error) {
			if err := c.Assign(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}); err != nil {
				return 0, err
			}
			defer c.Kgo().RemoveConsumePartitions(map[string][]int32{topic: {0}})
			seen := 0
			for {
				recs, err := c.Poll(ctx, 0)
				for _, r := range recs {
					if r.Topic == topic {
						return seen, nil
					}
				}
				if err != nil {
					if ctx.Err() != nil {
						return seen, err
					}
					seen += countJoined(err)
				}
			}
		},
		probe: func(ctx context.Context, topic string) (int, error) { return staleBrokers(ctx, fkgo, topic) },
		close: func() {
			c.Close(context.Background())
			_ = p.Close(context.Background())
			adm.Close(context.Background())
			fkgo.Close()
			f.Close(context.Background())
		},
	}, nil
}

func plainRYW(addrs []string) (*rywClients, error) {
	var cls []*kgo.Client
	mk := func() (*kgo.Client, error) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
		if err == nil {
			cls = append(cls, cl)
		}
		return cl, err
	}
	closeAll := func() {
		for _, cl := range cls {
			cl.Close()
		}
	}
	acl, err := mk()
	if err != nil {
		return nil, err
	}
	pcl, err := mk()
	if err != nil {
		closeAll()
		return nil, err
	}
	ccl, err := mk()
	if err != nil {
		closeAll()
		return nil, err
	}
	adm := kadm.NewClient(acl)
	return &rywClients{
		create: func(ctx context.Context, topic string) error {
			r, err := adm.CreateTopic(ctx, 1, -1, nil, topic)
			if err != nil {
				return err
			}
			return r.Err
		},
		produce: func(ctx context.Context, topic string, v []byte) error {
			return pcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: v}).FirstErr()
		},
		consume: func(ctx context.Context, topic string) (int, error) {
			ccl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}})
			defer ccl.RemoveConsumePartitions(map[string][]int32{topic: {0}})
			seen := 0
			for {
				fs := ccl.PollFetches(ctx)
				found := false
				fs.EachRecord(func(r *kgo.Record) { found = found || r.Topic == topic })
				if found {
					return seen, nil
				}
				if ctx.Err() != nil {
					return seen, ctx.Err()
				}
				fs.EachError(func(string, int32, error) { seen++ })
			}
		},
		probe: func(ctx context.Context, topic string) (int, error) { return staleBrokers(ctx, acl, topic) },
		close: closeAll,
	}, nil
}

// staleBrokers asks every broker cl knows for topic's metadata, one after
// the other, and counts those that answer without it.
func staleBrokers(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		return 0, err
	}
	stale := 0
	for _, b := range brokers {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return stale, fmt.Errorf("metadata from broker %d: %w", b.NodeID, err)
		}
		known := false
		for _, t := range resp.Topics {
			known = known || (t.Topic != nil && *t.Topic == topic && t.ErrorCode == 0)
		}
		if !known {
			stale++
		}
	}
	return stale, nil
}

func countJoined(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// trial runs create → produce → consume on a new topic; on real Kafka (lc
// nil) create → read every broker → produce → consume.
func (c *rywClients) trial(ctx context.Context, lc *localcluster.Cluster, topic string, timeout time.Duration) (tr rywTrial) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if lc != nil {
		stale0 := lc.Stats().StaleAnswers
		defer func() { tr.StaleAnswers = lc.Stats().StaleAnswers - stale0 }()
	}
	t0 := time.Now()
	if err := c.create(ctx, topic); err != nil {
		tr.Failed = "create: " + short(err)
		return tr
	}
	if lc == nil {
		tc := time.Now()
		stale, err := c.probe(ctx, topic)
		tr.StaleAnswers, tr.Read = int64(stale), time.Since(tc)
		if err != nil {
			tr.Failed = "read: " + short(err)
			return tr
		}
	}
	t1 := time.Now()
	if err := c.produce(ctx, topic, []byte("first")); err != nil {
		tr.Failed = "produce: " + short(err)
		return tr
	}
	t2 := time.Now()
	n, err := c.consume(ctx, topic)
	tr.SurfacedErrors = n
	if err != nil {
		tr.Failed = "consume: " + short(err)
		return tr
	}
	t3 := time.Now()
	tr.Create, tr.Produce, tr.Consume, tr.Total = t1.Sub(t0)-tr.Read, t2.Sub(t1), t3.Sub(t2), t3.Sub(t0)
	return tr
}

func short(err error) string {
	s := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		s = "timed out"
	}
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// runRYW measures read-your-writes latency at each lag, on a fresh 3-broker
// cluster per lag whose brokers 1 and 2 apply metadata late.
func runRYW(ctx context.Context, cfg rywConfig, logf func(string, ...any)) ([]rywResult, error) {
	var out []rywResult
	for _, lag := range cfg.Lags {
		res, err := rywAtLag(ctx, lag, cfg, logf)
		if err != nil {
			return nil, fmt.Errorf("read-your-writes at lag %v: %w", lag, err)
		}
		out = append(out, *res)
	}
	return out, nil
}

func rywAtLag(ctx context.Context, lag time.Duration, cfg rywConfig, logf func(string, ...any)) (*rywResult, error) {
	// Writes answered at commit, as Kafka 4.4 answers them and as the
	// KIP allows (localcluster.WritesAtCommit): by default the answering
	// broker holds a write's answer until it applied it, and with both
	// lagging brokers equally late that hold alone keeps plain franz-go's
	// next reads fresh (0 of 50 trials stale at 100 and 500 ms on
	// 2026-12-06), which is not what this step compares.
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.BrokerLag(1, lag), localcluster.BrokerLag(2, lag),
		localcluster.WriteAnswers(localcluster.WritesAtCommit))
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	var cs [2]*rywClients
	if cs[vFactory], err = factoryRYW(lc.Addrs()); err != nil {
		return nil, err
	}
	defer cs[vFactory].close()
	if cs[vPlain], err = plainRYW(lc.Addrs()); err != nil {
		return nil, err
	}
	defer cs[vPlain].close()
	res := &rywResult{Lag: lag}
	tag := [2]string{"f", "p"}
	for v := range 2 { // warm-up: connections and producer ids
		cs[v].trial(ctx, lc, fmt.Sprintf("warm-%s-%d", tag[v], lag.Milliseconds()), cfg.Timeout+lag)
	}
	for i := range cfg.Trials {
		order := [2]int{vFactory, vPlain}
		if i%2 == 1 {
			order = [2]int{vPlain, vFactory}
		}
		for _, v := range order {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Each trial starts from a settled cluster: otherwise a trial
			// right after a fast one pays for the last write's lag in its
			// create (a token the broker has not applied yet).
			for node := range int32(3) {
				if err := lc.WaitApplied(ctx, node, lc.LogEnd()); err != nil {
					return nil, err
				}
			}
			tr := cs[v].trial(ctx, lc, fmt.Sprintf("ryw-%s-%d-%d", tag[v], lag.Milliseconds(), i), cfg.Timeout+lag)
			res.Trials[v] = append(res.Trials[v], tr)
			if v == vFactory && (tr.Failed != "" || tr.Total > lag+50*time.Millisecond) {
				logf("ryw lag %v factory trial %d: total %v (create %v, produce %v, consume %v) failed %q stale %d",
					lag, i, tr.Total, tr.Create, tr.Produce, tr.Consume, tr.Failed, tr.StaleAnswers)
			}
		}
	}
	for v := range 2 {
		s := res.summary(v)
		logf("ryw lag %v %s: p50 %.1fms p99 %.1fms failures %d stale trials %d", lag, variantNames[v], s.P50, s.P99, s.Failures, s.StaleTrials)
	}
	return res, nil
}

// rywSummary condenses the trials of one client at one lag.
type rywSummary struct {
	N, Failures, StaleTrials int
	StaleAnswers             int64
	SurfacedErrors           int
	P50, P99, Max            float64 // total, ms, successful trials
	CreateP50, ProduceP50    float64
	ConsumeP50, ReadP50      float64
	FailureKinds             map[string]int
}

func (r *rywResult) summary(v int) rywSummary {
	s := rywSummary{FailureKinds: map[string]int{}}
	var total, create, prod, cons, read []float64
	for _, tr := range r.Trials[v] {
		s.N++
		s.StaleAnswers += tr.StaleAnswers
		s.SurfacedErrors += tr.SurfacedErrors
		if tr.StaleAnswers > 0 {
			s.StaleTrials++
		}
		if tr.Failed != "" {
			s.Failures++
			s.FailureKinds[tr.Failed]++
			continue
		}
		total = append(total, ms(tr.Total))
		create = append(create, ms(tr.Create))
		prod = append(prod, ms(tr.Produce))
		cons = append(cons, ms(tr.Consume))
		read = append(read, ms(tr.Read))
	}
	s.P50, s.P99 = quantile(total, 0.5), quantile(total, 0.99)
	s.Max = quantile(total, 1)
	s.CreateP50, s.ProduceP50, s.ConsumeP50 = quantile(create, 0.5), quantile(prod, 0.5), quantile(cons, 0.5)
	s.ReadP50 = quantile(read, 0.5)
	return s
}

// rywOnKafka runs read-your-writes trials on a real cluster, factory (in
// its default consistency mode, auto: Kafka 4.4 sends no tokens, so it
// emulates them) against plain kgo, alternating; nothing is settled
// between trials, as there is no way to wait for a real broker to apply.
func rywOnKafka(ctx context.Context, addrs []string, cfg rywConfig, logf func(string, ...any)) (*rywResult, error) {
	return rywSidesOnKafka(ctx, addrs, cfg, []rywSide{
		{vFactory, variantNames[vFactory], "f", func(addrs []string) (*rywClients, error) { return factoryRYW(addrs) }},
		{vPlain, variantNames[vPlain], "p", plainRYW},
	}, logf)
}

// rywSide is one client of a read-your-writes comparison on real Kafka.
type rywSide struct {
	v         int    // its index in rywResult.Trials
	name, tag string // tag names its topics
	make      func(addrs []string) (*rywClients, error)
}

// rywSidesOnKafka runs read-your-writes trials of every side on a real
// cluster, the sides taking turns trial by trial in a rotating order (with
// two: alternating), each warmed with one untimed trial first.
func rywSidesOnKafka(ctx context.Context, addrs []string, cfg rywConfig, sides []rywSide, logf func(string, ...any)) (*rywResult, error) {
	cs := make([]*rywClients, len(sides))
	for i, sd := range sides {
		c, err := sd.make(addrs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sd.name, err)
		}
		defer c.close()
		cs[i] = c
	}
	res := &rywResult{}
	for i, sd := range sides { // warm-up: connections and producer ids
		cs[i].trial(ctx, nil, "warm-kafka-"+sd.tag, cfg.Timeout)
	}
	for i := range cfg.Trials {
		for k := range sides {
			j := (i + k) % len(sides)
			sd := sides[j]
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			tr := cs[j].trial(ctx, nil, fmt.Sprintf("ryw-kafka-%s-%d", sd.tag, i), cfg.Timeout)
			res.Trials[sd.v] = append(res.Trials[sd.v], tr)
			if tr.Failed != "" || tr.StaleAnswers > 0 {
				logf("ryw real Kafka %s trial %d: total %v (create %v, read %v, produce %v, consume %v) failed %q stale %d",
					sd.name, i, tr.Total, tr.Create, tr.Read, tr.Produce, tr.Consume, tr.Failed, tr.StaleAnswers)
			}
		}
	}
	for _, sd := range sides {
		s := res.summary(sd.v)
		logf("ryw real Kafka %s: p50 %.1fms p99 %.1fms failures %d stale trials %d (answers %d)", sd.name, s.P50, s.P99, s.Failures, s.StaleTrials, s.StaleAnswers)
	}
	return res, nil
}

// rywKafkaMarkdown writes the table of rywOnKafka.
func rywKafkaMarkdown(w *bytes.Buffer, r *rywResult, cfg rywConfig) {
	fmt.Fprintf(w, "One trial: `CreateTopic` (1 partition, the brokers' default replication factor) through the admin client → "+
		"a Metadata request for the topic to every broker, one after the other, through a client of the same side "+
		"(`f.KgoClient()` of the factory; plain: the admin's `kgo.Client`) → first record produced and acknowledged → "+
		"that record consumed from the start of the partition by a consumer assigned to it. Time is from the create call to "+
		"the record in hand. Factory: `f.Admin()`, `f.KgoClient()`, `factory.NewProducer`, `factory.NewConsumer` of one "+
		"factory, default settings (consistency.mode auto: Kafka 4.4 sends no tokens, so the factory makes them from "+
		"KRaft's offsets). Plain: three `kgo.Client`s (kadm, producer, consumer) with franz-go's defaults, retries included. "+
		"Clients are made once and warmed with one untimed trial each; trials follow each other without a pause, so a "+
		"trial may meet brokers still applying the previous trial's write, as an application would.\n\n")
	fmt.Fprintf(w, "Repetitions: %d trials per client, alternating factory/plain; a trial that has not consumed its record after "+
		"%v is a failure. p50/p99/max are over successful trials (nearest rank). *Stale answers*: Metadata answers, in "+
		"the read step, of a broker that did not know the topic its client had just created (3 brokers: 3 answers per trial). "+
		"*Errors seen*: errors the consumer surfaced to the application before the record came.\n\n", cfg.Trials, cfg.Timeout)
	fmt.Fprintf(w, "| client | trials | p50 ms | p99 ms | max ms | p50 create / read / produce / consume ms | failures | trials with stale answers (answers) | errors seen |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|\n")
	for v := range 2 {
		s := r.summary(v)
		fails := fmt.Sprint(s.Failures)
		for k, n := range s.FailureKinds {
			fails += fmt.Sprintf("; %d× %s", n, strings.ReplaceAll(k, "|", "/"))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s / %s / %s / %s | %s | %d (%d) | %d |\n",
			variantNames[v], s.N, f1(s.P50), f1(s.P99), f1(s.Max), f1(s.CreateP50), f1(s.ReadP50), f1(s.ProduceP50), f1(s.ConsumeP50),
			fails, s.StaleTrials, s.StaleAnswers, s.SurfacedErrors)
	}
	fmt.Fprintln(w)
}
