package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
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
	Create   time.Duration // of that, the create call
	Wait     time.Duration // the method's wait (none for use at once)
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

func newUsableSides(addrs []string, nodes []int32, every time.Duration) ([numUsable]usableSide, error) {
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
				return pollDescribe(ctx, cl, []string{topic}, 3, nodes, every)
			}
		}
		s[m] = side
	}
	return s, nil
}

// usableOnce runs one trial of side on a new topic of a cluster whose
// brokers are nodes; count, when not nil, counts the requests the brokers
// read (-1 without it).
func usableOnce(ctx context.Context, count func() int64, side usableSide, topic string, nodes []int32) (usableTrial, error) {
	tr := usableTrial{Requests: -1}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var r0 int64
	if count != nil {
		r0 = count()
	}
	start := time.Now()
	r, err := side.admin.CreateTopic(ctx, 3, int16(min(3, len(nodes))), nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return tr, fmt.Errorf("create %s: %w", topic, err)
	}
	tr.Create = time.Since(start)
	if side.wait != nil {
		if err := side.wait(ctx, topic); err != nil {
			return tr, fmt.Errorf("wait for %s: %w", topic, err)
		}
	}
	tr.Wait = time.Since(start) - tr.Create
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
	for _, node := range nodes {
		err := retry(func() error {
			req := kmsg.NewPtrMetadataRequest()
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, t)
			resp, err := side.reads.Broker(int(node)).Request(ctx, req)
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
	if count != nil {
		tr.Requests = count() - r0
	}
	return tr, nil
}

// runUsable measures the three methods on the cluster at addrs, whose
// brokers are nodes, trials times each after one untimed trial, the
// methods in rotating order. settle, when not nil, runs before each trial.
func runUsable(ctx context.Context, cfg scaleConfig, addrs []string, nodes []int32, count func() int64, settle func(context.Context) error, where string, logf func(string, ...any)) ([numUsable][]usableTrial, error) {
	var out [numUsable][]usableTrial
	sides, err := newUsableSides(addrs, nodes, cfg.PollEvery)
	if err != nil {
		return out, err
	}
	defer func() {
		for _, s := range sides {
			s.close()
		}
	}()
	for m := range numUsable { // warm-up
		if _, err := usableOnce(ctx, count, sides[m], fmt.Sprintf("uwarm-%d", m), nodes); err != nil {
			return out, fmt.Errorf("%s: %w", usableNames[m], err)
		}
	}
	for i := range cfg.UsableTrials {
		for j := range numUsable {
			m := (i + j) % numUsable
			if settle != nil {
				if err := settle(ctx); err != nil {
					return out, err
				}
			}
			tr, err := usableOnce(ctx, count, sides[m], fmt.Sprintf("u%d-%d", i, m), nodes)
			if err != nil {
				return out, fmt.Errorf("%s: %w", usableNames[m], err)
			}
			out[m] = append(out[m], tr)
		}
	}
	logf("scale usable %s: p50 ms wait %.1f, poll %.1f, retries %.1f", where,
		medianOf(out[usableWait], func(t usableTrial) float64 { return ms(t.Usable) }),
		medianOf(out[usablePoll], func(t usableTrial) float64 { return ms(t.Usable) }),
		medianOf(out[usableRetries], func(t usableTrial) float64 { return ms(t.Usable) }))
	return out, nil
}

// runUsableCurve measures the three methods on a local cluster of brokers
// brokers, emulated, every broker applying metadata cfg.UsableLag late;
// before each trial every broker has applied the previous one.
func runUsableCurve(ctx context.Context, cfg scaleConfig, brokers int, logf func(string, ...any)) ([numUsable][]usableTrial, error) {
	lc, err := localcluster.New(localcluster.Brokers(brokers), localcluster.Native(false), localcluster.Lag(cfg.UsableLag))
	if err != nil {
		return [numUsable][]usableTrial{}, err
	}
	defer lc.Close()
	return runUsable(ctx, cfg, lc.Addrs(), nodeIDs(brokers), func() int64 { return lc.Stats().Requests },
		func(ctx context.Context) error { return waitAllApplied(ctx, lc, brokers) }, fmt.Sprintf("local, %d brokers", brokers), logf)
}

// scaleKafkaSection is the section of -curves-only -realkafka.
const scaleKafkaSection = "scale-realkafka"

// runScaleKafka measures time to usable on three Apache Kafka 4.4 nodes,
// where the factory emulates tokens, and then on three nodes with the
// KIP-1243 agent (kafkatest.KIP1243), where it uses the brokers' own.
func runScaleKafka(ctx context.Context, o options, _ plan, m machine) (string, error) {
	t0 := time.Now()
	cfg := scalePlan(o.Quick)
	load := [2]string{loadAvg()}
	kinds := []struct {
		name, where string
		opts        []kafkatest.Opt
	}{
		{"emulated", "the factory emulates tokens (Kafka 4.4 has no KIP-1243)", nil},
		{"native", "the nodes run the KIP-1243 agent (`kafkatest.KIP1243()`), so the factory uses the brokers' own tokens", []kafkatest.Opt{kafkatest.KIP1243()}},
	}
	var res [2][numUsable][]usableTrial
	var startup [2]time.Duration
	for i, k := range kinds {
		var err error
		startup[i], err = withKafka(ctx, o.Logf, func(ctx context.Context, c *kafkatest.Cluster) error {
			var err error
			res[i], err = runUsable(ctx, cfg, c.BootstrapAddrs(), c.NodeIDs(), nil, nil, "Apache Kafka 4.4, "+k.name, o.Logf)
			return err
		}, k.opts...)
		if err != nil {
			return "", fmt.Errorf("time to usable on real Kafka, %s: %w", k.name, err)
		}
	}
	load[1] = loadAvg()
	var body bytes.Buffer
	header(&body, o, m, time.Since(t0))
	fmt.Fprintf(&body, "Machine load (`/proc/loadavg`, 1/5/15 min) at the start: %s; at the end: %s.\n\n", load[0], load[1])
	for i, k := range kinds {
		fmt.Fprintf(&body, "**%s.** Three combined broker+controller JVMs started by `integration/kafkatest` (ready in %v); %s. ",
			strings.ToUpper(k.name[:1])+k.name[1:], startup[i].Round(time.Second), k.where)
		usableMarkdown(&body, res[i], cfg, "Apache Kafka 4.4, 3 nodes; brokers apply metadata as fast as they do (no added lag); "+
			"requests are not counted (no gateway in front of Kafka)")
	}
	return body.String(), nil
}
