package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

// Curve 4: time to usable after a create, against what people do today.
const (
	usableWait    = iota // factory: CreateTopic, WaitApplied(token, WaitTopics), then use
	usablePoll           // plain kgo: CreateTopic, describe every 100 ms until every partition has a leader, then use
	usableRetries        // plain kgo: CreateTopic, then use at once, franz-go's default retries
	numUsable
)

var usableNames = [numUsable]string{"factory `WaitApplied` + `WaitTopics`", "plain kgo, describe every 100 ms", "plain kgo, use at once (default retries)"}

// usableTrial is one create and the time until a produce and a Metadata
// read on every broker succeeded.
type usableTrial struct {
	Usable   time.Duration // from the create call to the last success
	Requests int64         // at the gateways, the whole trial
	Failures int           // errors and reads without the topic the application saw
}

// usableSide is what one method uses: its admin path, the client its
// produce and reads go through, and (the factory) the wait.
type usableSide struct {
	admin   *kadm.Client
	reads   *kgo.Client
	produce func(ctx context.Context, topic string) error
	wait    func(ctx context.Context, topic string) error
	close   func()
}

func newUsableSides(addrs []string, brokers int, every time.Duration) ([numUsable]usableSide, error) {
	var s [numUsable]usableSide
	f, err := factory.New(factory.BootstrapServers(addrs...))
	if err != nil {
		return s, err
	}
	adm, err := f.Admin()
	if err != nil {
		f.Close(context.Background())
		return s, err
	}
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		_ = adm.Close(context.Background())
		f.Close(context.Background())
		return s, err
	}
	s[usableWait] = usableSide{admin: kadm.NewClient(adm.Kgo()), reads: adm.Kgo(),
		produce: func(ctx context.Context, topic string) error {
			_, err := p.Produce(ctx, producer.Record[[]byte, []byte]{Topic: topic, Value: []byte("v")})
			return err
		},
		wait: func(ctx context.Context, topic string) error {
			return f.WaitApplied(ctx, f.Token(), factory.WaitTopics(topic))
		},
		close: func() {
			_ = p.Close(context.Background())
			_ = adm.Close(context.Background())
			f.Close(context.Background())
		}}
	for _, m := range []int{usablePoll, usableRetries} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
		if err != nil {
			for _, made := range s {
				if made.close != nil {
					made.close()
				}
			}
			return s, err
		}
		side := usableSide{admin: kadm.NewClient(cl), reads: cl, close: cl.Close,
			produce: func(ctx context.Context, topic string) error {
				return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
			}}
		if m == usablePoll {
			side.wait = func(ctx context.Context, topic string) error {
				return pollDescribe(ctx, cl, []string{topic}, 3, brokers, every)
			}
		}
		s[m] = side
	}
	return s, nil
}

// usableOnce runs one trial of side on a new topic.
func usableOnce(ctx context.Context, lc *localcluster.Cluster, side usableSide, topic string, brokers int) (usableTrial, error) {
	var tr usableTrial
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	r0 := lc.Stats().Requests
	start := time.Now()
	r, err := side.admin.CreateTopic(ctx, 3, int16(min(3, brokers)), nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return tr, fmt.Errorf("create %s: %w", topic, err)
	}
	if side.wait != nil {
		if err := side.wait(ctx, topic); err != nil {
			return tr, fmt.Errorf("wait for %s: %w", topic, err)
		}
	}
	// Use it: a produce, then a read on every broker; what fails is what
	// the application sees, and it tries again 10 ms later.
	retry := func(fn func() error) error {
		for {
			err := fn()
			if err == nil {
				return nil
			}
			tr.Failures++
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: %w (last: %w)", topic, ctx.Err(), err)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	if err := retry(func() error { return side.produce(ctx, topic) }); err != nil {
		return tr, err
	}
	for node := range brokers {
		err := retry(func() error {
			req := kmsg.NewPtrMetadataRequest()
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, t)
			resp, err := side.reads.Broker(node).Request(ctx, req)
			if err != nil {
				return err
			}
			if !servesTopic(resp.(*kmsg.MetadataResponse), topic, 3) {
				return fmt.Errorf("broker %d does not serve %s", node, topic)
			}
			return nil
		})
		if err != nil {
			return tr, err
		}
	}
	tr.Usable = time.Since(start)
	tr.Requests = lc.Stats().Requests - r0
	return tr, nil
}

// runUsableCurve measures the three methods on a local cluster of brokers
// brokers, emulated, every broker applying metadata cfg.UsableLag late.
func runUsableCurve(ctx context.Context, cfg scaleConfig, brokers int, logf func(string, ...any)) ([numUsable][]usableTrial, error) {
	var out [numUsable][]usableTrial
	opts := []localcluster.Opt{localcluster.Brokers(brokers), localcluster.Native(false), localcluster.Lag(cfg.UsableLag)}
	lc, err := localcluster.New(opts...)
	if err != nil {
		return out, err
	}
	defer lc.Close()
	sides, err := newUsableSides(lc.Addrs(), brokers, cfg.PollEvery)
	if err != nil {
		return out, err
	}
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	for m := range numUsable { // warm-up
		if _, err := usableOnce(ctx, lc, sides[m], fmt.Sprintf("uwarm-%d", m), brokers); err != nil {
			return out, fmt.Errorf("%s: %w", usableNames[m], err)
		}
	}
	for i := range cfg.UsableTrials {
		for j := range numUsable {
			m := (i + j) % numUsable
			if err := waitAllApplied(ctx, lc, brokers); err != nil {
				return out, err
			}
			tr, err := usableOnce(ctx, lc, sides[m], fmt.Sprintf("u%d-%d", i, m), brokers)
			if err != nil {
				return out, fmt.Errorf("%s: %w", usableNames[m], err)
			}
			out[m] = append(out[m], tr)
		}
	}
	logf("scale usable brokers=%d: p50 ms wait %.1f, poll %.1f, retries %.1f", brokers,
		medianOf(out[usableWait], func(t usableTrial) float64 { return ms(t.Usable) }),
		medianOf(out[usablePoll], func(t usableTrial) float64 { return ms(t.Usable) }),
		medianOf(out[usableRetries], func(t usableTrial) float64 { return ms(t.Usable) }))
	return out, nil
}
