package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
	Total                    time.Duration
	Failed                   string // empty when the record came back
	StaleAnswers             int64  // answers the cluster served from a lagging image
	SurfacedErrors           int    // errors the application saw (and retried) before success
}

// rywResult holds every trial of one lag.
type rywResult struct {
	Lag    time.Duration
	Trials [2][]rywTrial
}

// rywClients are the admin, producer and consumer of one side.
type rywClients struct {
	create  func(ctx context.Context, topic string) error
	produce func(ctx context.Context, topic string, v []byte) error
	// consume waits for the first record of topic; it returns the errors it
	// saw along the way.
	consume func(ctx context.Context, topic string) (int, error)
	close   func()
}

func factoryRYW(addrs []string) (*rywClients, error) {
	f, err := factory.New(nil, factory.BootstrapServers(addrs...))
	if err != nil {
		return nil, err
	}
	adm, err := f.Admin()
	if err != nil {
		return nil, err
	}
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		adm.Close()
		return nil, err
	}
	c, err := factory.NewConsumer(f, consumer.Bytes(), consumer.Bytes(), nil)
	if err != nil {
		adm.Close()
		_ = p.Close(context.Background())
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
		close: func() {
			c.Close()
			_ = p.Close(context.Background())
			adm.Close()
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
		close: closeAll,
	}, nil
}

func countJoined(err error) int {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return len(j.Unwrap())
	}
	return 1
}

// trial runs create → produce → consume on a new topic.
func (c *rywClients) trial(ctx context.Context, lc *localcluster.Cluster, topic string, timeout time.Duration) (tr rywTrial) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	stale0 := lc.Stats().StaleAnswers
	defer func() { tr.StaleAnswers = lc.Stats().StaleAnswers - stale0 }()
	t0 := time.Now()
	if err := c.create(ctx, topic); err != nil {
		tr.Failed = "create: " + short(err)
		return tr
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
	tr.Create, tr.Produce, tr.Consume, tr.Total = t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t3.Sub(t0)
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
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.BrokerLag(1, lag), localcluster.BrokerLag(2, lag))
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
	ConsumeP50               float64
	FailureKinds             map[string]int
}

func (r *rywResult) summary(v int) rywSummary {
	s := rywSummary{FailureKinds: map[string]int{}}
	var total, create, prod, cons []float64
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
	}
	s.P50, s.P99 = quantile(total, 0.5), quantile(total, 0.99)
	s.Max = quantile(total, 1)
	s.CreateP50, s.ProduceP50, s.ConsumeP50 = quantile(create, 0.5), quantile(prod, 0.5), quantile(cons, 0.5)
	return s
}
