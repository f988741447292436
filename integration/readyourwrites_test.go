package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

const lag = 500 * time.Millisecond

func newCluster(t *testing.T, opts ...localcluster.Opt) *localcluster.Cluster {
	t.Helper()
	// Writes answered at commit, while every broker still lags (the
	// stale reads these tests are about); fidelity_test.go runs the
	// default, answers after the answering broker applied the write.
	c, err := localcluster.New(append([]localcluster.Opt{localcluster.Brokers(3), localcluster.Lag(lag),
		localcluster.WriteAnswers(localcluster.WritesAtCommit)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// staleEvents collects the events that show a broker was behind.
type staleEvents struct {
	mu           sync.Mutex
	inconsistent int
	advanced     int
}

func (s *staleEvents) OnEvent(ev factory.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.Kind {
	case factory.EventInconsistentMetadata:
		s.inconsistent++
	case factory.EventTokenAdvanced:
		s.advanced++
	}
}

// TestFactoryReadsItsWrites runs create → produce → consume, create →
// describe / list offsets, and delete → list through one factory on a
// cluster whose brokers apply metadata 500ms late. Every read reflects the
// write on the first try: no UNKNOWN_TOPIC_OR_PARTITION, no missing topic.
func TestFactoryReadsItsWrites(t *testing.T) {
	for _, mode := range []string{"wait", "error"} {
		t.Run(mode, func(t *testing.T) {
			lc := newCluster(t, localcluster.ErrorMode(mode == "error"))
			ctx := testkit.CtxFor(t, 60*time.Second)
			events := &staleEvents{}
			f, err := factory.New(factory.BootstrapServers(lc.Addrs()...), factory.WithObserver(events),
				factory.AutoOffsetReset(factory.ResetEarliest))
			require.NoError(t, err)
			adm, err := f.Admin()
			require.NoError(t, err)
			defer adm.Close(context.Background())

			// create → produce → consume
			created, err := adm.CreateTopic(ctx, 3, 1, nil, "orders")
			require.NoError(t, err)
			require.NoError(t, created.Err)
			tok := f.Token()
			require.False(t, tok.IsUnknown(), "the create's commit offset is in the store")
			require.Equal(t, lc.ClusterID(), tok.ClusterID())

			p, err := factory.NewProducer(f, producer.String(), producer.String())
			require.NoError(t, err)
			defer p.Close(context.Background())
			const n = 30
			for i := range n {
				_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "orders", Key: fmt.Sprint(i), Value: "v"})
				require.NoError(t, err, "record %d", i)
			}
			c, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics("orders"), factory.GroupID("ryw"))
			require.NoError(t, err)
			defer c.Close(context.Background())
			got := map[string]bool{}
			for len(got) < n {
				recs, err := c.Poll(ctx, 0)
				require.NoError(t, err)
				for _, r := range recs {
					require.False(t, got[r.Key], "duplicate %s", r.Key)
					got[r.Key] = true
				}
			}

			// create → describe and list offsets, read from any broker
			_, err = adm.CreateTopic(ctx, 2, 1, nil, "invoices")
			require.NoError(t, err)
			for range 3 { // three reads, likely three brokers
				topics, err := adm.ListTopics(ctx, "invoices")
				require.NoError(t, err)
				require.True(t, topics.Has("invoices"), "describe sees the new topic")
				require.NoError(t, topics["invoices"].Err)
				require.Len(t, topics["invoices"].Partitions, 2)
				ends, err := adm.ListEndOffsets(ctx, "invoices")
				require.NoError(t, err)
				require.NoError(t, ends.Error(), "list offsets knows the new topic")
			}

			// delete → list
			del, err := adm.DeleteTopic(ctx, "invoices")
			require.NoError(t, err)
			require.NoError(t, del.Err)
			for range 3 {
				topics, err := adm.ListTopics(ctx)
				require.NoError(t, err)
				require.False(t, topics.Has("invoices"), "a deleted topic is gone at once")
			}
			require.True(t, f.Token().Offset() > tok.Offset(), "the token moved with each write")
			if mode == "error" {
				// The observer runs on the factory's event goroutine.
				testkit.WaitFor(ctx, t, "error mode answered INCONSISTENT_METADATA and the clients retried", func() bool {
					events.mu.Lock()
					defer events.mu.Unlock()
					return events.inconsistent > 0
				})
			}
		})
	}
}

// TestPlainClientsReadStale runs the same flows with plain kgo/kadm on the
// same kind of cluster and shows the stale reads the factory removes.
func TestPlainClientsReadStale(t *testing.T) {
	lc := newCluster(t)
	ctx := testkit.CtxFor(t, 30*time.Second)
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	_, err = adm.CreateTopic(ctx, 3, 1, nil, "orders")
	require.NoError(t, err)
	topics, err := adm.ListTopics(ctx, "orders")
	require.NoError(t, err)
	stale := !topics.Has("orders") || errors.Is(topics["orders"].Err, kerr.UnknownTopicOrPartition)
	ends, err := adm.ListEndOffsets(ctx, "orders")
	stale = stale || err != nil || ends.Error() != nil
	require.True(t, stale, "right after the create, a lagging broker does not know the topic")

	// After the lag every broker knows it: the anomaly is staleness, not loss.
	require.Eventually(t, func() bool {
		topics, err := adm.ListTopics(ctx, "orders")
		return err == nil && topics.Has("orders") && topics["orders"].Err == nil
	}, 10*time.Second, 50*time.Millisecond)

	_, err = adm.DeleteTopic(ctx, "orders")
	require.NoError(t, err)
	topics, err = adm.ListTopics(ctx)
	require.NoError(t, err)
	require.True(t, topics.Has("orders"), "right after the delete, a lagging broker still lists the topic")
}

// TestProduceStaleForeverIsTyped pauses every broker's metadata apply in
// error mode: every produce is answered INCONSISTENT_METADATA, and once the
// delivery budget is spent the record fails with an error that names the
// cause.
func TestProduceStaleForeverIsTyped(t *testing.T) {
	lc := newCluster(t, localcluster.ErrorMode(true), localcluster.Lag(0))
	ctx := testkit.CtxFor(t, 30*time.Second)
	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...),
		factory.KgoOpts(kgo.RecordDeliveryTimeout(1500*time.Millisecond)))
	require.NoError(t, err)
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	for node := range int32(3) {
		require.NoError(t, lc.PauseApply(node))
		defer lc.ResumeApply(node)
	}
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "frozen")
	require.NoError(t, err)
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "frozen", Value: "v"})
	require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
	require.NotZero(t, f.Stats().InconsistentMetadata)
}
