package factory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/cluster"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

func newKfake(t *testing.T, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(3)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

type order struct {
	ID    int    `json:"id"`
	Title string `json:"title"`
}

// TestFactoryFlowKfake runs admin → producer → group consumer through one
// factory against kfake, which implements no KIP-1243: stamping must be
// harmless and the store stays Unknown.
func TestFactoryFlowKfake(t *testing.T) {
	kc := newKfake(t)
	ctx := testkit.Ctx(t)
	f, err := New(BootstrapServers(kc.ListenAddrs()...), AutoOffsetReset(ResetEarliest))
	require.NoError(t, err)
	defer f.Close(context.Background())

	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	_, err = adm.CreateTopic(ctx, 3, 1, nil, "orders")
	require.NoError(t, err)

	p, err := NewProducer(f, producer.String(), producer.JSON[order]())
	require.NoError(t, err)
	defer p.Close(ctx)
	const n = 100
	for i := range n {
		_, err := p.Produce(ctx, producer.Record[string, order]{
			Topic: "orders", Key: fmt.Sprint(i), Value: order{i, "book"},
			Headers: []producer.Header{{Key: "h", Value: []byte("v")}},
		})
		require.NoError(t, err)
	}

	c, err := NewConsumer(f, consumer.String(), consumer.JSON[order](), ConsumeTopics("orders"), GroupID("g1"))
	require.NoError(t, err)
	defer c.Close(context.Background())
	seen := map[int]bool{}
	for len(seen) < n {
		recs, err := c.Poll(ctx, 0)
		require.NoError(t, err)
		for _, r := range recs {
			require.Equal(t, fmt.Sprint(r.Value.ID), r.Key)
			require.Equal(t, []consumer.Header{{Key: "h", Value: []byte("v")}}, r.Headers)
			require.False(t, seen[r.Value.ID], "duplicate %d", r.Value.ID)
			seen[r.Value.ID] = true
		}
	}
	require.NoError(t, c.Commit(ctx))
	require.True(t, f.Token().IsUnknown(), "kfake sends no token")
	require.Zero(t, f.Stats().RequestsStamped, "nothing to stamp while Unknown")
	require.NotZero(t, f.Stats().ResponsesRead)
}

func TestSerializationErrorSendsNothing(t *testing.T) {
	kc := newKfake(t, kfake.SeedTopics(1, "t"))
	ctx := testkit.Ctx(t)
	var produced int
	var mu sync.Mutex
	kc.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		mu.Lock()
		produced++
		mu.Unlock()
		return nil, nil, false
	})
	f, err := New(BootstrapServers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer f.Close(context.Background())
	bad := producer.SerializerFunc[int](func(string, int) ([]byte, error) { return nil, errors.New("odd") })
	p, err := NewProducer(f, producer.String(), bad)
	require.NoError(t, err)
	defer p.Close(ctx)
	_, err = p.Produce(ctx, producer.Record[string, int]{Topic: "t", Value: 1})
	require.ErrorIs(t, err, producer.ErrSerialize)
	require.ErrorContains(t, err, "odd")
	err = p.ProduceAsync(ctx, producer.Record[string, int]{Topic: "t", Value: 1}, func(producer.Result, error) {
		t.Error("callback must not run for a record that failed to serialize")
	})
	require.ErrorIs(t, err, producer.ErrSerialize)
	require.NoError(t, p.Flush(ctx))
	mu.Lock()
	require.Zero(t, produced)
	mu.Unlock()
}

func TestDeserializeErrorNamesRecord(t *testing.T) {
	kc := newKfake(t, kfake.SeedTopics(1, "t"))
	ctx := testkit.Ctx(t)
	f, err := New(BootstrapServers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer f.Close(context.Background())
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(ctx)
	for _, v := range []string{`{"id":1}`, `not json`, `{"id":3}`} {
		_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: v})
		require.NoError(t, err)
	}
	c, err := NewConsumer(f, consumer.String(), consumer.JSON[order]())
	require.NoError(t, err)
	defer c.Close(context.Background())
	require.NoError(t, c.Assign(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))
	var good []int
	var derr *consumer.DeserializeError
	for len(good) < 2 || derr == nil {
		recs, err := c.Poll(ctx, 0)
		for _, r := range recs {
			good = append(good, r.Value.ID)
		}
		if err != nil {
			require.ErrorAs(t, err, &derr)
			require.ErrorIs(t, err, consumer.ErrDeserialize)
		}
		require.NoError(t, ctx.Err())
	}
	require.Equal(t, []int{1, 3}, good)
	require.Equal(t, "t", derr.Topic)
	require.Equal(t, int32(0), derr.Partition)
	require.Equal(t, int64(1), derr.Offset)
	require.Equal(t, "value", derr.Field)
	require.Contains(t, derr.Error(), "t[0]@1")
}

// apiVersionsSeen records the ClusterId/NodeId of every ApiVersions request
// kfake receives.
type apiVersionsSeen struct {
	mu     sync.Mutex
	maxVer int16
	named  int // requests naming a cluster
}

func watchAPIVersions(kc *kfake.Cluster) *apiVersionsSeen {
	s := &apiVersionsSeen{}
	kc.ControlKey(18, func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		r := req.(*kmsg.ApiVersionsRequest)
		s.mu.Lock()
		s.maxVer = max(s.maxVer, r.Version)
		if r.ClusterID != nil {
			s.named++
		}
		s.mu.Unlock()
		return nil, nil, false
	})
	return s
}

// TestClusterCheckSettings inspects ApiVersions on the broker side: with the
// check on, connections to discovered brokers name the cluster (v5); with
// metadata.cluster.check.enable=false or metadata.recovery.strategy=none
// none do.
func TestClusterCheckSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []Opt
		named bool
	}{
		{"default", nil, true},
		{"check off", []Opt{ClusterCheck(false)}, false},
		{"strategy none", []Opt{RecoveryStrategy(rebootstrap.None)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kc := newKfake(t, kfake.SeedTopics(3, "t"))
			seen := watchAPIVersions(kc)
			ctx := testkit.Ctx(t)
			f, err := New(append([]Opt{BootstrapServers(kc.ListenAddrs()[0])}, tc.opts...)...)
			require.NoError(t, err)
			defer f.Close(context.Background())
			p, err := NewProducer(f, producer.String(), producer.String())
			require.NoError(t, err)
			defer p.Close(ctx)
			// Produce to every partition so every broker is dialed.
			for i := range 30 {
				_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Key: fmt.Sprint(i), Value: "v"})
				require.NoError(t, err)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			if tc.named {
				require.Equal(t, int16(5), seen.maxVer)
				require.NotZero(t, seen.named, "discovered brokers are asked to check the cluster")
			} else {
				require.LessOrEqual(t, seen.maxVer, int16(4))
				require.Zero(t, seen.named)
			}
		})
	}
}

func TestObserverAndLoggerGetEvents(t *testing.T) {
	var got []EventKind
	var mu sync.Mutex
	f, err := New(BootstrapServers("127.0.0.1:1"), WithObserver(ObserverFunc(func(ev Event) {
		mu.Lock()
		got = append(got, ev.Kind)
		mu.Unlock()
	})))
	require.NoError(t, err)
	defer f.Close(context.Background())
	// The store's owner and the watcher report through one stream, in
	// the order things happened.
	_, err = f.s.Tokens().Answered("x", consistency.MustOf("a", 3), nil)
	require.NoError(t, err)
	f.s.Tokens().Moved("", "a", "b", true)
	f.s.Watcher().OnEvent(cluster.Event{Rebootstrapped: true, From: "a", To: "b", Changed: true, StoreReset: true})
	f.events.Flush()
	mu.Lock()
	require.Equal(t, []EventKind{EventTokenAdvanced, EventClusterChanged, EventStoreReset, EventRebootstrap}, got)
	mu.Unlock()
	require.Equal(t, uint64(1), f.Stats().StoreResets)
	require.Equal(t, "store-reset", EventStoreReset.String())
}

func TestNewNilStore(t *testing.T) {
	f, err := New(BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	require.NotNil(t, f.Store())
	s := consistency.NewMemoryStore()
	f, err = New(WithStore(s), BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	require.Same(t, s, f.Store())
	_, err = NewProducer[string, string](f, nil, producer.String())
	require.ErrorIs(t, err, ErrConfig)
	require.True(t, strings.Contains(err.Error(), "serializer"))
}

// TestRetriesEarlyEOF: every client the factory makes retries a connection
// closed before its first answer (see config.validate); franz-go's default
// fails buffered records on it, which the kill -9 test on Kafka 4.4
// (integration/realkafka TestFaults) caught when a cut landed during
// ApiVersions.
func TestRetriesEarlyEOF(t *testing.T) {
	kc := newKfake(t)
	f, err := New(WithStore(consistency.NewMemoryStore()), BootstrapServers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer f.Close(context.Background())
	cl, err := f.KgoClient()
	require.NoError(t, err)
	defer cl.Close()
	require.Equal(t, true, cl.OptValue(kgo.AlwaysRetryEOF))
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	require.Equal(t, true, adm.Kgo().OptValue(kgo.AlwaysRetryEOF))
}
