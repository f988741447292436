package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPausesFollowClientSwap: topics and partitions paused on the client a
// cluster change replaces are paused on the one that takes over.
func TestPausesFollowClientSwap(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t", "u"))
	require.NoError(t, err)
	defer kc.Close()
	newClient := func() (*kgo.Client, error) { return kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...)) }
	cl, err := newClient()
	require.NoError(t, err)
	w := &manualWatch{next: newClient}
	c := follows(t, cl, false, w)
	defer func() { require.NoError(t, c.Close(context.Background())) }()
	require.Equal(t, []string{"u"}, c.PauseFetchTopics("u"))
	c.PauseFetchPartitions(map[string][]int32{"t": {1}})
	wantPartitions := c.PauseFetchPartitions(nil) // franz-go lists "u" too

	w.change()
	require.NotSame(t, cl, c.Kgo())
	require.Equal(t, []string{"u"}, c.Kgo().PauseFetchTopics(), "paused on the new client")
	require.Equal(t, wantPartitions, c.Kgo().PauseFetchPartitions(nil))
	c.ResumeFetchTopics("u")
	require.Empty(t, c.PauseFetchTopics())
	require.Equal(t, map[string][]int32{"t": {1}}, c.PauseFetchPartitions(nil))
}

// TestRetireAllowsRebalance: a BlockRebalanceOnPoll group client that a
// cluster change retires after a poll returned records closes, and so
// does the consumer: the user allows rebalances on the client it polls
// now, never on the retired one.
func TestRetireAllowsRebalance(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newClient := func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.BlockRebalanceOnPoll())
	}
	cl, err := newClient()
	require.NoError(t, err)
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	w := &manualWatch{next: newClient}
	c := follows(t, cl, true, w)
	recs, err := c.Poll(ctx, 0)
	require.NoError(t, err)
	require.Len(t, recs, 1) // and no AllowRebalance on cl

	w.change()
	closed := make(chan error, 1)
	go func() { closed <- c.Close(ctx) }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the retired client waits for AllowRebalance")
	}
}
