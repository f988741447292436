package factory

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type eventLog struct {
	mu     sync.Mutex
	events []Event
}

func (l *eventLog) OnEvent(ev Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

func (l *eventLog) has(kind EventKind) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range l.events {
		if ev.Kind == kind {
			return true
		}
	}
	return false
}

// pinnedProducerOnA starts cluster-a on port, and a factory pinned to it
// with opts and a producer of it that has delivered one record there; the
// factory and the producer are closed when the test ends.
func pinnedProducerOnA(ctx context.Context, t *testing.T, port int, opts ...Opt) (*producer.Producer[string, string], *kfake.Cluster) {
	t.Helper()
	a := startOnPort(t, "cluster-a", port)
	f, err := New(append([]Opt{BootstrapServers(a.ListenAddrs()[0]), PinCluster("cluster-a")}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	t.Cleanup(func() { p.Close(context.Background()) })
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "a"})
	require.NoError(t, err)
	return p, a
}

// replaceCluster starts cluster A on a port, lets fn use it, then replaces it
// with cluster B on the same port, as when a bootstrap address is moved to
// another cluster.
func startOnPort(t *testing.T, id string, port int) *kfake.Cluster {
	t.Helper()
	return kfakeOn(t, id, "127.0.0.1", port)
}

// TestClusterChangeFollowed replaces the cluster behind the bootstrap
// address. Without a pin the factory follows it as the Java client does: the
// store, which held cluster A's token, is reset; the change is reported; and
// records produced across the change are delivered to cluster B.
func TestClusterChangeFollowed(t *testing.T) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	a := startOnPort(t, "cluster-a", port)
	addr := a.ListenAddrs()[0]

	store := consistency.NewMemoryStore()
	_, err := store.Advance(consistency.MustOf("cluster-a", 5))
	require.NoError(t, err)
	events := &eventLog{}
	f, err := New(WithStore(store), BootstrapServers(addr), RetryBackoff(20*time.Millisecond), WithObserver(events))
	require.NoError(t, err)
	defer f.Close(context.Background())
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "a"})
	require.NoError(t, err)
	testkit.WaitFor(ctx, t, "the cluster id", func() bool { return f.s.Watcher().Cluster() == "cluster-a" })
	c, err := NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"), GroupID("g"), AutoOffsetReset(ResetEarliest))
	require.NoError(t, err)
	defer c.Close(context.Background())
	require.Equal(t, []string{"a"}, pollValues(ctx, t, c, 1))

	a.Close()
	b := startOnPort(t, "cluster-b", port)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: fmt.Sprint("b", i)})
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, int64(5), testkit.EndOffset(ctx, t, b.ListenAddrs()[0], "t"), "every record lands in B once")
	require.ElementsMatch(t, []string{"b0", "b1", "b2", "b3", "b4"}, pollValues(ctx, t, c, 5), "the consumer follows to B")
	require.True(t, store.Load().IsUnknown(), "cluster A's token was dropped: %v", store.Load())
	f.events.Flush() // the observer runs on the event goroutine
	require.True(t, events.has(EventClusterChanged))
	require.True(t, events.has(EventStoreReset))
	require.Equal(t, uint64(1), f.Stats().StoreResets)
}

// TestClusterChangePinned: with PinCluster, a change fails the records in
// flight with an error naming both clusters, at once (franz-go's default
// delivery timeout is unbounded), and no produce request reaches B: the
// only thing B is asked is Metadata, whose cluster id the pin rejects.
func TestClusterChangePinned(t *testing.T) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	p, a := pinnedProducerOnA(ctx, t, port, RetryBackoff(20*time.Millisecond))

	a.Close()
	b := startOnPort(t, "cluster-b", port)
	var produces atomic.Int32
	b.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		produces.Add(1)
		return nil, nil, false
	})
	_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "b"})
	require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)
	require.Zero(t, produces.Load(), "no produce request reached cluster B")
	require.ErrorContains(t, err, `"cluster-a"`)
	require.ErrorContains(t, err, `"cluster-b"`)
	require.Equal(t, int64(0), testkit.EndOffset(ctx, t, b.ListenAddrs()[0], "t"))
}

// pollValues polls c until it has n values.
func pollValues(ctx context.Context, t *testing.T, c *consumer.Consumer[string, string], n int) []string {
	t.Helper()
	var got []string
	for len(got) < n {
		recs, err := c.Poll(ctx, 0)
		require.NoError(t, err)
		for _, r := range recs {
			got = append(got, r.Value)
		}
	}
	return got
}

// TestClusterChangePinnedConsumer: a pinned consumer stops with an error
// naming both clusters once the change is seen.
func TestClusterChangePinnedConsumer(t *testing.T) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	a := startOnPort(t, "cluster-a", port)
	f, err := New(BootstrapServers(a.ListenAddrs()[0]), PinCluster("cluster-a"), RetryBackoff(20*time.Millisecond))
	require.NoError(t, err)
	defer f.Close(context.Background())
	c, err := NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"))
	require.NoError(t, err)
	defer c.Close(context.Background())
	a.Close()
	startOnPort(t, "cluster-b", port)
	f.s.Watcher().Check(false) // what a misroute or a failed record would start
	for {
		_, err := c.Poll(ctx, 0)
		if err != nil {
			require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)
			require.ErrorContains(t, err, `"cluster-b"`)
			return
		}
	}
}
