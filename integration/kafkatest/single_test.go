package kafkatest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// TestSingleNode proves the basics against one combined node: storage
// formatted with our cluster id, a topic, records in and out, and the
// KIP-1242 ApiVersions version that the rest of the suite relies on.
func TestSingleNode(t *testing.T) {
	t.Parallel()
	id := kafkatest.NewClusterID()
	c := kafkatest.Start(t, kafkatest.ClusterID(id))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	t.Run("ClusterID", func(t *testing.T) {
		require.Equal(t, id, c.ClusterID())
		require.ErrorContains(t, c.Kill(7), "no node 7", "an unknown node is an error naming it")
		m, err := adm.Metadata(ctx)
		require.NoError(t, err)
		require.Equal(t, id, m.Cluster, "broker reports the id storage was formatted with")
		require.Equal(t, []int32{1}, m.Brokers.NodeIDs())
	})

	t.Run("ApiVersionsKIP1242", func(t *testing.T) {
		vs, err := adm.ApiVersions(ctx)
		require.NoError(t, err)
		require.Len(t, vs, 1)
		for _, v := range vs {
			require.NoError(t, v.Err)
			max, ok := v.KeyMaxVersion(18)
			require.True(t, ok, "ApiVersions lists key 18")
			require.GreaterOrEqual(t, max, int16(5), "ApiVersions v5 carries ClusterId/NodeId (KIP-1242)")
		}
	})

	t.Run("ProduceConsume", func(t *testing.T) {
		const topic, n = "single-produce-consume", 10
		resp, err := adm.CreateTopic(ctx, 2, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, resp.Err)

		for i := range n {
			r := &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i % 3)), Value: []byte(fmt.Sprintf("v%d", i))}
			require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
		}

		cons, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...),
			kgo.ConsumeTopics(topic), kgo.ConsumerGroup("single-group"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cons.Close()
		seen := map[string]bool{}
		for len(seen) < n {
			fs := cons.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "consumed %d of %d records", len(seen), n)
			fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		for i := range n {
			require.True(t, seen[fmt.Sprintf("v%d", i)], "record v%d consumed", i)
		}
		require.NoError(t, cons.CommitUncommittedOffsets(ctx), "group commit works (offsets topic)")

		count, err := c.CountRecords(ctx, topic)
		require.NoError(t, err)
		require.Equal(t, int64(n), count)
		missing, err := c.CountRecords(ctx, "no-such-topic")
		require.NoError(t, err)
		require.Zero(t, missing)
	})

	// Last, as it takes the node away: a graceful stop, then a restart on the
	// same data directory keeps the records.
	t.Run("StopRestart", func(t *testing.T) {
		const topic = "single-produce-consume"
		t0 := time.Now()
		require.NoError(t, c.Stop(1))
		t.Logf("stopped in %v", time.Since(t0).Round(time.Millisecond))
		require.False(t, c.Running(1))
		logs, err := c.Logs(1)
		require.NoError(t, err)
		require.Contains(t, logs, "Transition from STARTED to SHUTTING_DOWN", "SIGTERM ran Kafka's shutdown")
		require.NoError(t, c.Stop(1), "stopping a stopped node is a no-op")

		t0 = time.Now()
		require.NoError(t, c.Restart(1))
		require.True(t, c.Running(1))
		t.Logf("restarted in %v", time.Since(t0).Round(time.Millisecond))
		count, err := c.CountRecords(ctx, topic)
		require.NoError(t, err)
		require.Equal(t, int64(10), count, "records survive the restart")
	})
}
