package realkafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// rywSide is one way of talking to the cluster: the factory's clients, or
// plain franz-go. It counts the broker answers that did not show a write
// the same side had just made.
type rywSide struct {
	name  string
	adm   rywAdmin
	kgo   *kgo.Client
	reads map[string]int // broker answers read, by operation
	stale map[string]int // answers that did not show the write
}

// rywAdmin is what the test asks of an admin client: kadm's calls, which
// the factory's admin.Client offers too.
type rywAdmin interface {
	CreateTopic(ctx context.Context, partitions int32, replicationFactor int16, configs map[string]*string, topic string) (kadm.CreateTopicResponse, error)
	ListTopics(ctx context.Context, topics ...string) (kadm.TopicDetails, error)
	CreatePartitions(ctx context.Context, add int, topics ...string) (kadm.CreatePartitionsResponses, error)
	AlterTopicConfigs(ctx context.Context, configs []kadm.AlterConfig, topics ...string) (kadm.AlterConfigsResponses, error)
	DeleteTopic(ctx context.Context, topic string) (kadm.DeleteTopicResponse, error)
}

func (s *rywSide) saw(op string, fresh bool) {
	s.reads[op]++
	if !fresh {
		s.stale[op]++
	}
}

func (s *rywSide) staleTotal() int {
	n := 0
	for _, v := range s.stale {
		n += v
	}
	return n
}

// topicOn asks broker id for topic's metadata: whether it knows the topic,
// and with how many partitions.
func topicOn(ctx context.Context, cl *kgo.Client, id int32, topic string) (bool, int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return false, 0, err
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic {
			if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
				if err == kerr.UnknownTopicOrPartition {
					return false, 0, nil
				}
				return false, 0, err
			}
			return true, len(t.Partitions), nil
		}
	}
	return false, 0, nil
}

// configOn asks broker id for the value of topic's config key.
func configOn(ctx context.Context, cl *kgo.Client, id int32, topic, key string) (string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	r := kmsg.NewDescribeConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = topic
	r.ConfigNames = []string{key}
	req.Resources = append(req.Resources, r)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return "", err
	}
	for _, res := range resp.Resources {
		if err := kerr.ErrorForCode(res.ErrorCode); err != nil {
			return "", nil // a broker that does not know the topic yet
		}
		for _, c := range res.Configs {
			if c.Name == key && c.Value != nil {
				return *c.Value, nil
			}
		}
	}
	return "", nil
}

// TestReadYourWritesOnKafka makes metadata writes on three real Kafka
// nodes and reads each back at once from every broker: through a factory
// (ModeAuto: tokens made from KRaft's offsets, since no released Kafka
// sends any) no answer may be stale; plain franz-go in the same run shows
// what the factory prevents. It runs on each release of
// kafkatest.MatrixVersions (KCONSIST_KAFKA_VERSIONS), one after another.
func TestReadYourWritesOnKafka(t *testing.T) {
	for _, v := range matrixVersions(t) {
		t.Run(v, func(t *testing.T) { readYourWritesOn(t, v) })
	}
}

func readYourWritesOn(t *testing.T, version string) {
	c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.Version(version))
	ctx := testkit.CtxFor(t, 5*time.Minute)
	ids := c.NodeIDs()

	var mu sync.Mutex
	var offs, unchecked []factory.Event
	f, err := factory.New(factory.BootstrapServers(c.BootstrapAddrs()...), factory.ClientID("ryw"),
		factory.AutoOffsetReset(factory.ResetEarliest),
		factory.WithObserver(factory.ObserverFunc(func(ev factory.Event) {
			mu.Lock()
			defer mu.Unlock()
			switch ev.Kind {
			case factory.EventConsistencyOff:
				offs = append(offs, ev)
			case factory.EventClusterCheckOff:
				unchecked = append(unchecked, ev)
			}
		})))
	require.NoError(t, err)
	defer f.Close(context.Background())
	fadm, err := f.Admin()
	require.NoError(t, err)
	defer fadm.Close(context.Background())
	fkgo, err := f.KgoClient()
	require.NoError(t, err)
	defer fkgo.Close()
	plain := plainClient(t, c)

	sides := []*rywSide{
		{name: "factory", adm: fadm, kgo: fkgo},
		{name: "plain kgo", adm: kadm.NewClient(plain), kgo: plain},
	}
	for _, s := range sides {
		s.reads, s.stale = map[string]int{}, map[string]int{}
	}
	readAll := func(s *rywSide, op, topic string, want func(known bool, parts int) bool) {
		for _, id := range ids {
			known, parts, err := topicOn(ctx, s.kgo, id, topic)
			require.NoError(t, err, "%s: %s: Metadata from broker %d", s.name, op, id)
			s.saw(op, want(known, parts))
		}
	}
	// must runs an admin write. The factory's must succeed at once; plain
	// franz-go's may fail on a stale answer (kadm looks the topic up
	// first, perhaps on a broker that does not know it yet): each such
	// failure counts as a stale answer, and the write is tried again.
	must := func(s *rywSide, op string, call func() error) {
		// franz-go's metadata cache (MetadataMinAge, 5s) can keep
		// plain kadm failing for that long.
		deadline := time.Now().Add(15 * time.Second)
		for {
			err := call()
			if err == nil {
				return
			}
			// kadm does not always wrap the code it saw ("unable to
			// determine the current partition count: ...").
			unknown := errors.Is(err, kerr.UnknownTopicOrPartition) || strings.Contains(err.Error(), kerr.UnknownTopicOrPartition.Message)
			if s.name == "factory" || time.Now().After(deadline) || !unknown {
				require.NoError(t, err, "%s: %s", s.name, op)
			}
			s.saw(op+" (admin error)", false)
			time.Sleep(100 * time.Millisecond)
		}
	}
	trial := func(s *rywSide, i int) {
		topic := fmt.Sprintf("ryw-%d-%s", i, map[string]string{"factory": "f", "plain kgo": "p"}[s.name])
		must(s, "create", func() error { return createTopic3(ctx, s.adm, topic) })
		readAll(s, "create", topic, func(known bool, _ int) bool { return known })
		listed, err := s.adm.ListTopics(ctx, topic)
		require.NoError(t, err)
		s.saw("create (admin ListTopics)", listed.Has(topic) && listed[topic].Err == nil)

		must(s, "create-partitions", func() error { return growBy2(ctx, s.adm, topic) })
		readAll(s, "create-partitions", topic, func(_ bool, parts int) bool { return parts == 3 })

		want := strconv.Itoa(3_600_000 + i)
		must(s, "alter-config", func() error { return setRetention(ctx, s.adm, topic, want) })
		for _, id := range ids {
			got, err := configOn(ctx, s.kgo, id, topic, "retention.ms")
			require.NoError(t, err)
			s.saw("alter-config", got == want)
		}

		must(s, "delete", func() error {
			deleted, err := s.adm.DeleteTopic(ctx, topic)
			if err == nil {
				err = deleted.Err
			}
			return err
		})
		readAll(s, "delete", topic, func(known bool, _ int) bool { return !known })
	}
	const minTrials, maxTrials = 15, 60
	i := 0
	for ; i < maxTrials && (i < minTrials || sides[1].staleTotal() == 0); i++ {
		for _, s := range sides {
			trial(s, i)
		}
	}
	for _, s := range sides {
		t.Logf("%-9s: %d stale of %d answers after %d trials: %v (reads %v)", s.name, s.staleTotal(), sumOf(s.reads), i, s.stale, s.reads)
	}
	require.Zero(t, sides[0].staleTotal(), "the factory read an answer older than its own write")
	require.Positive(t, sides[1].staleTotal(), "plain franz-go saw no stale answer in %d trials: the test shows nothing", i)
	if version != kafkatest.KafkaVersion {
		// Events reach the observer on the factory's event goroutine.
		testkit.WaitFor(ctx, t, "EventClusterCheckOff", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(unchecked) > 0
		})
	}
	mu.Lock()
	require.Empty(t, offs, "the emulation turned itself off")
	// Before 4.4 (ApiVersions v3 on 3.6, v4 on 3.9 to 4.2) the brokers
	// cannot run the KIP-1242 check: said once; 4.4 runs it.
	if version == kafkatest.KafkaVersion {
		require.Empty(t, unchecked)
	} else {
		require.Len(t, unchecked, 1, "%v", unchecked)
		require.ErrorContains(t, unchecked[0].Err, "KIP-1242 needs v5")
		t.Logf("Kafka %s: %v", version, unchecked[0].Err)
	}
	mu.Unlock()
	st := f.Stats()
	t.Logf("factory: %+v", st)

	t.Run("ProduceAndConsumeRightAfterCreate", func(t *testing.T) {
		p, err := factory.NewProducer(f, producer.String(), producer.String())
		require.NoError(t, err)
		defer closeProducer(p)
		for k := range 5 {
			topic := fmt.Sprintf("ryw-data-%d", k)
			created, err := fadm.CreateTopic(ctx, 3, 3, nil, topic)
			require.NoError(t, err)
			require.NoError(t, created.Err)
			start := time.Now()
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err = p.Produce(pctx, producer.Record[string, string]{Topic: topic, Key: "k", Value: fmt.Sprint(k)})
			cancel()
			require.NoError(t, err)
			produced := time.Since(start)
			cons, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(topic))
			require.NoError(t, err)
			pctx, cancel = context.WithTimeout(ctx, 10*time.Second)
			var got []string
			for len(got) == 0 && pctx.Err() == nil {
				recs, err := cons.Poll(pctx, 10)
				if err != nil && pctx.Err() == nil {
					require.NoError(t, err)
				}
				for _, r := range recs {
					got = append(got, r.Value)
				}
			}
			cancel()
			cons.Close(context.Background())
			require.Equal(t, []string{fmt.Sprint(k)}, got)
			t.Logf("%s: produced %v after the create, consumed %v after it", topic, produced.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		}
	})
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// createTopic3 creates topic with one partition and three replicas,
// returning the request's or the topic's error.
func createTopic3(ctx context.Context, adm rywAdmin, topic string) error {
	created, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	if err == nil {
		err = created.Err
	}
	return err
}

// growBy2 adds two partitions to topic.
func growBy2(ctx context.Context, adm rywAdmin, topic string) error {
	grown, err := adm.CreatePartitions(ctx, 2, topic)
	if err == nil {
		err = grown.Error()
	}
	return err
}

// setRetention sets topic's retention.ms to want.
func setRetention(ctx context.Context, adm rywAdmin, topic, want string) error {
	altered, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "retention.ms", Value: &want}}, topic)
	if err != nil {
		return err
	}
	for _, a := range altered {
		if a.Err != nil {
			return a.Err
		}
	}
	return nil
}
