package realkafka

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// TestSingleNodeClusters starts two single-node Kafka 4.4 clusters and
// shares them between the subtests. Cluster A advertises its node at a
// forwarder (which points at A unless a KIP1242 subtest switches it to B),
// so every byte a client exchanges with A's node can be observed.
func TestSingleNodeClusters(t *testing.T) {
	t0 := time.Now()
	fwd, err := kafkatest.NewForwarder("")
	require.NoError(t, err)
	t.Cleanup(func() { fwd.Close() })
	a := kafkatest.Start(t, kafkatest.AdvertisedAddr(1, fwd.Addr()))
	b := kafkatest.Start(t)
	require.NotEqual(t, a.ClusterID(), b.ClusterID())
	aAddr, err := a.ListenerAddr(1)
	require.NoError(t, err)
	bAddr, err := b.ListenerAddr(1)
	require.NoError(t, err)
	fwd.SetTarget(aAddr)
	t.Logf("clusters A (%s) and B (%s) ready in %v", a.ClusterID(), b.ClusterID(), time.Since(t0).Round(time.Millisecond))

	t.Run("Compatibility", func(t *testing.T) {
		for _, stamped := range []bool{true, false} {
			name := map[bool]string{true: "stamped", false: "plain"}[stamped]
			t.Run(name, func(t *testing.T) {
				t0 := time.Now()
				fwd.SetTarget(aAddr)
				testCompatibility(t, a, fwd, name, stamped)
				t.Logf("%s: %v", name, time.Since(t0).Round(time.Millisecond))
			})
		}
	})
	t.Run("KIP1242", func(t *testing.T) {
		for _, check := range []bool{true, false} {
			t.Run(fmt.Sprintf("check=%v", check), func(t *testing.T) {
				t0 := time.Now()
				fwd.SetTarget(aAddr)
				testKIP1242(t, a, b, fwd, aAddr, bAddr, check)
				t.Logf("check=%v: %v", check, time.Since(t0).Round(time.Millisecond))
			})
		}
	})
}

// testCompatibility runs admin, producer and consumer of one factory
// against cluster A, all of it through the forwarder (the seed is the
// forwarder, and A advertises it). Stamped, the store starts at a token of
// A's cluster as if handed over by another service, so every flexible
// request carries header tag 0, which Kafka 4.4 does not know. Plain, the
// store starts Unknown; Kafka 4.4 never returns a token, so it stays so and
// nothing is stamped.
func testCompatibility(t *testing.T, a *kafkatest.Cluster, fwd *kafkatest.Forwarder, name string, stamped bool) {
	ctx := testkit.CtxFor(t, 2*time.Minute)
	const n, partitions = 10_000, 3
	topic, group, clientID := "compat-"+name, "compat-group-"+name, "compat-"+name

	store := consistency.NewMemoryStore()
	handed := consistency.MustOf(a.ClusterID(), 1_000_000)
	if stamped {
		_, err := store.Advance(handed)
		require.NoError(t, err)
	}
	wl := newWireLog(clientID)
	fwd.Observe(wl.observe)
	defer fwd.Observe(nil)
	ev := &events{}
	f, err := factory.New(factory.WithStore(store), factory.BootstrapServers(fwd.Addr()), factory.ClientID(clientID),
		factory.AutoOffsetReset(factory.ResetEarliest), factory.WithObserver(ev),
		// What is under test is header stamping itself against a broker
		// that ignores it; emulated tokens have their own tests
		// (ryw_test.go).
		factory.Consistency(factory.ModeNative))
	require.NoError(t, err)
	defer f.Close(context.Background())

	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	created, err := adm.CreateTopic(ctx, partitions, 1, map[string]*string{"retention.ms": ptr("86400000")}, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)

	// Produce n records asynchronously; every one must be acknowledged.
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer closeProducer(p)
	var acked, failed atomic.Int64
	var firstErr firstError
	for i := range n {
		err := p.ProduceAsync(ctx, producer.Record[string, string]{Topic: topic, Key: fmt.Sprintf("k%05d", i), Value: fmt.Sprint(i)},
			func(_ producer.Result, err error) {
				if err != nil {
					failed.Add(1)
					firstErr.set(err)
					return
				}
				acked.Add(1)
			})
		require.NoError(t, err)
	}
	require.NoError(t, p.Flush(ctx))
	require.Zero(t, failed.Load(), "no produce failed (first error: %v)", firstErr.get())
	require.Equal(t, int64(n), acked.Load())
	require.NoError(t, p.Close(ctx))

	// Consume them all in a group, each key exactly once.
	c, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(topic), factory.GroupID(group))
	require.NoError(t, err)
	defer c.Close(context.Background())
	seen := make(map[string]int, n)
	for len(seen) < n {
		recs, err := c.Poll(ctx, 0)
		require.NoError(t, err, "consumed %d of %d", len(seen), n)
		for _, r := range recs {
			seen[r.Key]++
			require.Equal(t, 1, seen[r.Key], "key %s consumed twice", r.Key)
		}
	}
	// Nothing beyond the n records.
	pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	extra, err := c.Poll(pctx, 0)
	cancel()
	require.Empty(t, extra, "records beyond the %d produced", n)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NoError(t, c.Commit(ctx))
	c.Close(context.Background())

	// The group's committed offsets cover every record.
	committed, err := adm.FetchOffsets(ctx, group)
	require.NoError(t, err)
	require.NoError(t, committed.Error())
	var committedSum int64
	committed.Each(func(o kadm.OffsetResponse) { committedSum += o.At })
	require.Equal(t, int64(n), committedSum, "group %s committed every record", group)

	// Describe and list offsets.
	m, err := adm.Metadata(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, a.ClusterID(), m.Cluster)
	topics, err := adm.ListTopics(ctx, topic)
	require.NoError(t, err)
	require.True(t, topics.Has(topic))
	require.NoError(t, topics[topic].Err)
	require.Len(t, topics[topic].Partitions, partitions)
	cfgs, err := adm.DescribeTopicConfigs(ctx, topic)
	require.NoError(t, err)
	rc, err := cfgs.On(topic, nil)
	require.NoError(t, err)
	require.NoError(t, rc.Err)
	retention := ""
	for _, cfg := range rc.Configs {
		if cfg.Key == "retention.ms" && cfg.Value != nil {
			retention = *cfg.Value
		}
	}
	require.Equal(t, "86400000", retention, "DescribeConfigs returns the topic's own retention.ms")
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	var endSum int64
	ends.Each(func(o kadm.ListedOffset) { endSum += o.Offset })
	require.Equal(t, int64(n), endSum, "ListEndOffsets totals every record")
	adm.Close(context.Background())

	st := f.Stats()
	ws := wl.snapshot()
	t.Logf("stats %+v; requests through the forwarder by key %v, stamped by key %v, stamps %v",
		st, ws.requests, ws.stamped, ws.stamps)
	require.Empty(t, ws.decodeErrs, "every frame decodes")
	require.Positive(t, sum(ws.requests), "the clients' traffic went through the forwarder")
	require.Zero(t, ws.respTokens, "Kafka 4.4 never puts a token in a response header")
	require.Zero(t, st.TokensAdvanced, "no response advanced the store")
	require.Zero(t, st.Misroutes)
	require.Zero(t, st.InconsistentMetadata)
	require.Zero(t, st.Rebootstraps)
	require.Zero(t, st.StoreResets)
	require.Empty(t, ev.list(), "no consistency event at all")
	if !stamped {
		require.True(t, f.Token().IsUnknown(), "a fresh store stays Unknown against Kafka 4.4")
		require.Zero(t, st.RequestsStamped, "nothing to stamp with an Unknown store")
		require.Zero(t, sum(ws.stamped), "no request carried header tag 0")
		return
	}
	require.True(t, f.Token().Equal(handed), "the handed-over token is unchanged: %v", f.Token())
	require.Positive(t, st.RequestsStamped)
	require.Positive(t, sum(ws.stamped))
	require.LessOrEqual(t, uint64(sum(ws.stamped)), st.RequestsStamped, "the forwarder saw no stamp the SDK did not count")
	require.Equal(t, map[stamp]int{{a.ClusterID(), 1_000_000}: sum(ws.stamped)}, ws.stamps,
		"every stamp names A's cluster and the handed-over offset")
	// Stamped requests of every kind this flow uses reached Kafka 4.4 and
	// were served: create, produce, fetch, the group protocol, describe,
	// list offsets.
	for _, key := range []int16{
		19, // CreateTopics
		0,  // Produce
		1,  // Fetch
		11, // JoinGroup
		14, // SyncGroup
		8,  // OffsetCommit
		9,  // OffsetFetch
		3,  // Metadata
		32, // DescribeConfigs
		2,  // ListOffsets
	} {
		require.Positive(t, ws.stamped[key], "a stamped request of key %d went through", key)
	}
}
