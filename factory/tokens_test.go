package factory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// TestWithTokenStartsWatcher: the first client made through WithToken,
// before the factory made any of its own, starts the factory's cluster
// watcher; without it a cluster change was learnt silently (no event, no
// follow, no pin refusal).
func TestWithTokenStartsWatcher(t *testing.T) {
	kc := newKfake(t, kfake.ClusterID("scoped-cluster"))
	f, err := New(BootstrapServers(kc.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := testkit.Ctx(t)
	scoped, err := f.WithToken(ctx, consistency.Unknown())
	require.NoError(t, err)
	cl, err := scoped.KgoClient()
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.Ping(ctx))
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for f.s.Watcher().Cluster() != "scoped-cluster" {
		select {
		case <-ctx.Done():
			t.Fatalf("the watcher never learnt the cluster: %q", f.s.Watcher().Cluster())
		case <-tick.C:
		}
	}
}

// TestWithTokenClientsFollowClusterChange: clients made only through
// WithToken see a cluster change as the factory's own would: it is
// reported, and the producer follows to the new cluster.
func TestWithTokenClientsFollowClusterChange(t *testing.T) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	a := startOnPort(t, "cluster-a", port)
	events := &eventLog{}
	f, err := New(BootstrapServers(a.ListenAddrs()[0]), RetryBackoff(20*time.Millisecond), WithObserver(events))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	scoped, err := f.WithToken(ctx, consistency.Unknown())
	require.NoError(t, err)
	p, err := NewProducer(scoped, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "a"})
	require.NoError(t, err)
	testkit.WaitFor(ctx, t, "the cluster id", func() bool { return f.s.Watcher().Cluster() == "cluster-a" })

	a.Close()
	b := startOnPort(t, "cluster-b", port)
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "b"})
	require.NoError(t, err)
	require.Equal(t, int64(1), testkit.EndOffset(ctx, t, b.ListenAddrs()[0], "t"))
	testkit.WaitFor(ctx, t, "EventClusterChanged", func() bool { return events.has(EventClusterChanged) })
}
