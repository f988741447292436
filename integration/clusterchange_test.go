package integration

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

type kinds struct {
	mu     sync.Mutex
	seen   map[factory.EventKind]int
	firsts map[factory.EventKind]factory.Event
}

func (k *kinds) OnEvent(ev factory.Event) {
	k.mu.Lock()
	if k.seen == nil {
		k.seen, k.firsts = map[factory.EventKind]int{}, map[factory.EventKind]factory.Event{}
	}
	if k.seen[ev.Kind] == 0 {
		k.firsts[ev.Kind] = ev
	}
	k.seen[ev.Kind]++
	k.mu.Unlock()
}

// first returns the first event of kind seen (zero for none).
func (k *kinds) first(kind factory.EventKind) factory.Event {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.firsts[kind]
}

func (k *kinds) count(kind factory.EventKind) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen[kind]
}

// TestKIP1243ClusterChangeFollowed moves the bootstrap address from local
// cluster A to local cluster B (both KIP-1243) and stops A. The factory,
// unpinned, follows its bootstrap server: the store drops A's token and
// adopts B's, and the record produced across the change lands in B.
func TestKIP1243ClusterChangeFollowed(t *testing.T) {
	ctx := testkit.CtxFor(t, 60*time.Second)
	a, err := localcluster.New(localcluster.Brokers(1), localcluster.ClusterID("cluster-a"), localcluster.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer a.Close()
	b, err := localcluster.New(localcluster.Brokers(1), localcluster.ClusterID("cluster-b"), localcluster.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer b.Close()
	fw, err := kafkatest.NewForwarder(a.Addrs()[0])
	require.NoError(t, err)
	defer fw.Close()

	events := &kinds{}
	f, err := factory.New(factory.BootstrapServers(fw.Addr()), factory.WithObserver(events),
		factory.RetryBackoff(20*time.Millisecond))
	require.NoError(t, err)
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "to-a"})
	require.NoError(t, err)
	require.Equal(t, "cluster-a", f.Token().ClusterID())

	fw.SetTarget(b.Addrs()[0])
	a.Close()
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "to-b"})
	require.NoError(t, err)
	require.Equal(t, "cluster-b", f.Token().ClusterID(), "the store follows the bootstrap server to B")
	// Events reach the observer on the factory's event goroutine: wait
	// for it (bounded by ctx), as the factory stays in use below.
	testkit.WaitFor(ctx, t, "EventClusterChanged", func() bool { return events.count(factory.EventClusterChanged) > 0 })

	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "t")
	require.NoError(t, err)
	o, _ := ends.Lookup("t", 0)
	require.Equal(t, int64(1), o.Offset, "exactly the record sent after the change is in B")
}
