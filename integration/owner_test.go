package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// TestStoreSharedAcrossClustersIsOneError: one Store given to two
// factories of two clusters (a misconfiguration) gets one clear error,
// EventStoreConflict, instead of being healed back and forth: the store
// changes cluster at most once (the second factory's first answer takes a
// token it never stored for a foreign one), and the first factory's
// requests then fail with consistency.ErrClusterMismatch.
func TestStoreSharedAcrossClustersIsOneError(t *testing.T) {
	a, err := localcluster.New(localcluster.Brokers(1), localcluster.Native(true), localcluster.SeedTopics(1, "t"))
	require.NoError(t, err)
	t.Cleanup(a.Close)
	b, err := localcluster.New(localcluster.Brokers(1), localcluster.Native(true), localcluster.SeedTopics(1, "t"))
	require.NoError(t, err)
	t.Cleanup(b.Close)
	ctx := testkit.CtxFor(t, 60*time.Second)

	store := consistency.NewMemoryStore()
	evA, evB := &kinds{}, &kinds{}
	fa, err := factory.New(factory.WithStore(store), factory.BootstrapServers(a.Addrs()...), factory.WithObserver(evA))
	require.NoError(t, err)
	defer fa.Close(context.Background())
	pa, err := factory.NewProducer(fa, producer.String(), producer.String())
	require.NoError(t, err)
	_, err = pa.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "a0"})
	require.NoError(t, err)
	require.Equal(t, a.ClusterID(), store.Load().ClusterID())

	fb, err := factory.New(factory.WithStore(store), factory.BootstrapServers(b.Addrs()...), factory.WithObserver(evB))
	require.NoError(t, err)
	defer fb.Close(context.Background())
	pb, err := factory.NewProducer(fb, producer.String(), producer.String())
	require.NoError(t, err)

	// Both keep producing for a while; count how often the store's
	// cluster changes.
	var switches int
	last := store.Load().ClusterID()
	var aErr error
	for i := range 30 {
		pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, errB := pb.Produce(pctx, producer.Record[string, string]{Topic: "t", Value: "b"})
		_, errA := pa.Produce(pctx, producer.Record[string, string]{Topic: "t", Value: "a"})
		cancel()
		if errA != nil {
			aErr = errA
		}
		_ = errB
		if c := store.Load().ClusterID(); c != last {
			switches++
			last = c
		}
		if i > 5 && evA.count(factory.EventStoreConflict) > 0 && aErr != nil {
			break
		}
	}
	// a's records can never be written: its Close gives up at its context.
	closeCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = pa.Close(closeCtx)
	_ = pb.Close(closeCtx)
	require.NoError(t, fa.Close(ctx)) // delivers the events queued
	require.NoError(t, fb.Close(ctx))
	require.LessOrEqual(t, switches, 1, "the store is not healed back and forth")
	require.Equal(t, b.ClusterID(), store.Load().ClusterID())
	require.Equal(t, 1, evA.count(factory.EventStoreConflict), "one clear error")
	require.Zero(t, evA.count(factory.EventTokenHealed))
	require.LessOrEqual(t, evB.count(factory.EventTokenHealed), 1)
	require.Error(t, aErr, "the first factory's requests fail")
	require.True(t, errors.Is(aErr, consistency.ErrClusterMismatch) || errors.Is(aErr, context.DeadlineExceeded), "err = %v", aErr)
}

// TestWaitAppliedRefusesStoreOfAnotherCluster: WaitApplied with no token
// waits for the factory's own, and refuses it, as CheckToken would, when
// it names another cluster than the bootstrap servers'.
func TestWaitAppliedRefusesStoreOfAnotherCluster(t *testing.T) {
	for _, native := range []bool{true, false} {
		c, err := localcluster.New(localcluster.Brokers(3), localcluster.Native(native))
		require.NoError(t, err)
		t.Cleanup(c.Close)
		ctx := testkit.CtxFor(t, 20*time.Second)
		store := consistency.NewMemoryStore()
		// Offset 0: every broker of this cluster is past it, so a wait
		// that compared offsets only would return nil.
		_, err = store.Advance(consistency.MustOf("another-cluster", 0))
		require.NoError(t, err)
		f, err := factory.New(factory.WithStore(store), factory.BootstrapServers(c.Addrs()...))
		require.NoError(t, err)
		err = f.WaitApplied(ctx, consistency.Unknown())
		var te *factory.TokenError
		require.ErrorAs(t, err, &te, "native=%v", native)
		require.ErrorIs(t, err, consistency.ErrClusterMismatch)
		require.Equal(t, c.ClusterID(), te.Cluster)
		require.NoError(t, f.Close(ctx))
	}
}

// blockingObserver blocks in OnEvent until released.
type blockingObserver struct {
	release chan struct{}
	once    sync.Once
	entered chan struct{}
}

func (o *blockingObserver) OnEvent(factory.Event) {
	o.once.Do(func() { close(o.entered) })
	<-o.release
}

// TestSlowObserverBlocksNoClient: an observer stuck in OnEvent holds up
// no client: writes, reads and the store go on; its events arrive once it
// returns, and Close delivers them.
func TestSlowObserverBlocksNoClient(t *testing.T) {
	c, err := localcluster.New(localcluster.Brokers(3), localcluster.Native(true))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := testkit.CtxFor(t, 30*time.Second)
	obs := &blockingObserver{release: make(chan struct{}), entered: make(chan struct{})}
	f, err := factory.New(factory.BootstrapServers(c.Addrs()...), factory.WithObserver(obs))
	require.NoError(t, err)
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	for i := range 5 {
		created, err := adm.CreateTopic(ctx, 1, 1, nil, "slow-"+string(rune('a'+i)))
		require.NoError(t, err)
		require.NoError(t, created.Err)
		_, err = p.Produce(ctx, producer.Record[string, string]{Topic: created.Topic, Value: "v"})
		require.NoError(t, err)
	}
	select {
	case <-obs.entered:
	case <-ctx.Done():
		t.Fatal("no event reached the observer")
	}
	tok := f.Token()
	require.False(t, tok.IsUnknown())
	close(obs.release)
	require.NoError(t, f.Close(ctx))
}
