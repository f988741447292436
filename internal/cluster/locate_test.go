package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestSeedLocate: the seed's Metadata answer says where a node of its own
// cluster is; a node it does not list, another cluster's node and a seed
// that does not answer are errors, each saying which.
func TestSeedLocate(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.ClusterID("locate-a"))
	require.NoError(t, err)
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	locate := func(seed string) Locate {
		return SeedLocate(func() (*kgo.Client, error) { return kgo.NewClient(kgo.SeedBrokers(seed)) })
	}
	at := locate(kc.ListenAddrs()[0])

	for node, want := range kc.ListenAddrs() {
		got, err := at(ctx, "locate-a", int32(node))
		require.NoError(t, err)
		require.Equal(t, want, got, "broker %d", node)
	}
	_, err = at(ctx, "locate-a", 7)
	require.ErrorIs(t, err, ErrNotListed)
	require.ErrorContains(t, err, "broker 7")
	_, err = at(ctx, "locate-b", 0)
	require.ErrorIs(t, err, ErrOtherCluster)
	require.ErrorContains(t, err, `"locate-a"`)

	// A seed that refuses connections fails at once, well within ctx.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	start := time.Now()
	_, err = locate(dead)(ctx, "locate-a", 0)
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)

	// A seed that never answers is given up when ctx ends.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	start = time.Now()
	_, err = locate(silent.Addr().String())(short, "locate-a", 0)
	require.Error(t, err)
	require.Less(t, time.Since(start), 5*time.Second)
}
