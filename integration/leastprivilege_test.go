package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
)

// readBack is what one broker showed of a topic: whether it lists it,
// its partition count, and the value of one topic config ("" for none).
type readBack struct {
	listed     bool
	partitions int
	config     string
}

// readBackOn asks broker id, through cl, what it shows of topic and of its
// config key.
func readBackOn(ctx context.Context, cl *kgo.Client, id int32, topic, key string) (readBack, error) {
	var rb readBack
	partitions, err := partitionsOn(ctx, cl, id, topic)
	if err != nil || partitions < 0 {
		return rb, err
	}
	rb.listed, rb.partitions = true, partitions
	d := kmsg.NewPtrDescribeConfigsRequest()
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{key}
	d.Resources = append(d.Resources, res)
	dresp, err := d.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return rb, err
	}
	for _, r := range dresp.Resources {
		for _, c := range r.Configs {
			if c.Name == key && c.Value != nil && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
				rb.config = *c.Value
			}
		}
	}
	return rb, nil
}

// writesReadBack makes rounds topics through cl and, after each write
// (create, create partitions, set a config, delete), reads it back from
// every broker at once; it returns the answers that did not show the
// write, how many were read, and how many admin calls failed. Strict: an
// admin call that fails fails the test; else it is retried, as its user
// would, and counted (plain kadm's create partitions fails on a broker
// that does not list the topic yet).
func writesReadBack(ctx context.Context, t *testing.T, cl *kgo.Client, prefix string, rounds int, strict bool) (stale, reads, failed int) {
	t.Helper()
	adm := kadm.NewClient(cl)
	const key = "retention.ms"
	check := func(topic string, want readBack) {
		for id := int32(2); id >= 0; id-- { // the lagging broker first: no read before it teaches it the token
			got, err := readBackOn(ctx, cl, id, topic, key)
			require.NoError(t, err, "broker %d", id)
			reads++
			if got != want {
				stale++
				t.Logf("%s: broker %d shows %+v, want %+v", prefix, id, got, want)
			}
		}
	}
	do := func(what string, call func() error) bool {
		for range 50 {
			err := call()
			if err == nil {
				return true
			}
			require.False(t, strict, "%s: %v", what, err)
			failed++
			select { // a user's retry pause, not a bound
			case <-ctx.Done():
				require.NoError(t, ctx.Err(), "%s: %v", what, err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		return false // the round ends here
	}
	for i := range rounds {
		topic := fmt.Sprintf("%s-%d", prefix, i)
		if !do("create", func() error {
			created, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
			if err == nil {
				err = created.Err
			}
			return err
		}) {
			continue
		}
		check(topic, readBack{listed: true, partitions: 1})

		if !do("create partitions", func() error {
			cps, err := adm.CreatePartitions(ctx, 2, topic)
			if err == nil {
				err = cps[topic].Err
			}
			return err
		}) {
			continue
		}
		check(topic, readBack{listed: true, partitions: 3})

		value := fmt.Sprint(3600000 + i)
		if !do("alter config", func() error {
			alts, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: &value}}, topic)
			if err == nil {
				err = alts[0].Err
			}
			return err
		}) {
			continue
		}
		check(topic, readBack{listed: true, partitions: 3, config: value})

		if !do("delete", func() error {
			dels, err := adm.DeleteTopics(ctx, topic)
			if err == nil {
				err = dels[topic].Err
			}
			return err
		}) {
			continue
		}
		check(topic, readBack{})
	}
	return stale, reads, failed
}

// TestLimitedWithoutDescribeCluster: a principal without DESCRIBE on
// CLUSTER (DescribeQuorum refused, as Kafka refuses it) keeps
// read-your-writes for the factory's own topic writes and monotonic
// reads, on a cluster like Kafka 4.4 whose broker 2 applies metadata
// 300ms late, and is told once what is lost and which ACL would give it.
// Plain franz-go on the same cluster reads stale answers (the control).
func TestLimitedWithoutDescribeCluster(t *testing.T) {
	c, err := localcluster.New(localcluster.Brokers(3), localcluster.BrokerLag(2, 300*time.Millisecond), localcluster.Native(false),
		localcluster.DescribeQuorumAllowed(false), localcluster.WriteAnswers(localcluster.WritesAtCommit))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := testkit.CtxFor(t, time.Minute)
	events := &kinds{}
	f, err := factory.New(factory.BootstrapServers(c.Addrs()...), factory.WithObserver(events))
	require.NoError(t, err)
	defer f.Close(context.Background())
	cl, err := f.KgoClient()
	require.NoError(t, err)
	defer cl.Close()

	stale, reads, _ := writesReadBack(ctx, t, cl, "lp", 3, true)
	t.Logf("factory without DESCRIBE on CLUSTER: %d stale of %d answers; token %v", stale, reads, f.Token())
	require.Zero(t, stale)

	// Monotonic reads: a topic another client made, seen on broker 0, is
	// then seen on the lagging broker 2 too.
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer plain.Close()
	for i := range 3 {
		topic := fmt.Sprintf("lp-other-%d", i)
		created, err := kadm.NewClient(plain).CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, created.Err)
		var seen bool
		for !seen {
			seen, err = knownOn(ctx, cl, 0, topic)
			require.NoError(t, err)
		}
		later, err := knownOn(ctx, cl, 2, topic)
		require.NoError(t, err)
		require.True(t, later, "broker 2 showed an older image than broker 0 had shown")
	}

	// Events reach the observer on the factory's event goroutine: wait
	// for the one expected, then give any other queued with it the
	// time to arrive (Flush is internal; the factory stays in use).
	testkit.WaitFor(ctx, t, "EventConsistencyLimited", func() bool { return events.count(factory.EventConsistencyLimited) > 0 })
	require.Zero(t, events.count(factory.EventConsistencyOff))
	require.Equal(t, 1, events.count(factory.EventConsistencyLimited))
	limited := events.first(factory.EventConsistencyLimited)
	require.ErrorIs(t, limited.Err, kerr.ClusterAuthorizationFailed)
	for _, want := range []string{"DESCRIBE on CLUSTER", "not covered", "--operation Describe --cluster"} {
		require.True(t, strings.Contains(limited.Err.Error(), want), "the event names %q: %v", want, limited.Err)
	}

	plainStale, plainReads, plainFailed := writesReadBack(ctx, t, plain, "lp-plain", 3, false)
	t.Logf("plain kgo: %d stale of %d answers, %d admin calls failed on a stale answer", plainStale, plainReads, plainFailed)
	require.Positive(t, plainStale, "the cluster must lag for the test to show anything")
}
