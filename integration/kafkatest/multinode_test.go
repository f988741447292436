package kafkatest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// TestThreeNodes runs the realistic shape: three combined nodes, a topic
// with replication factor 3, a node crash (SIGKILL) that the cluster rides
// out, and a restart on the same ports and data after which every replica
// is back in sync.
func TestThreeNodes(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	c := kafkatest.Start(t, kafkatest.Nodes(3))
	t.Logf("3 nodes ready in %v", time.Since(t0).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	m, err := adm.Metadata(ctx)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2, 3}, m.Brokers.NodeIDs())
	require.Equal(t, c.ClusterID(), m.Cluster)

	const topic, partitions = "rf3", 3
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": ptr("2")}, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	kafkatest.RequireISR(ctx, t, adm, topic, []int32{1, 2, 3})

	produced := 0
	produce := func(n int) {
		t.Helper()
		for range n {
			r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "r%d", produced)}
			require.NoError(t, cl.ProduceSync(ctx, r).FirstErr()) // acks=all by default
			produced++
		}
	}
	produce(9)

	// A crash: the controller fences node 2 after broker.session.timeout.ms
	// and takes it out of every ISR; acks=all writes keep working with 2 of 3.
	t0 = time.Now()
	require.NoError(t, c.Kill(2))
	require.False(t, c.Running(2))
	kafkatest.RequireISR(ctx, t, adm, topic, []int32{1, 3})
	t.Logf("node 2 killed, out of every ISR after %v", time.Since(t0).Round(time.Millisecond))
	produce(9)

	t0 = time.Now()
	require.NoError(t, c.Restart(2))
	require.True(t, c.Running(2))
	t.Logf("node 2 restarted and registered in %v", time.Since(t0).Round(time.Millisecond))
	kafkatest.RequireISR(ctx, t, adm, topic, []int32{1, 2, 3})
	t.Logf("node 2 back in every ISR after %v", time.Since(t0).Round(time.Millisecond))
	produce(3)

	n, err := c.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, int64(produced), n)

	logs, err := c.Logs(2)
	require.NoError(t, err)
	require.Equal(t, 2, strings.Count(logs, "==== kafkatest: starting node 2"), "node 2's log spans both of its runs")
}

func ptr[T any](v T) *T { return &v }
