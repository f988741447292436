package factory

import (
	"context"
	"crypto/tls"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// closedClients counts the franz-go clients that closed.
type closedClients struct{ n atomic.Int32 }

func (c *closedClients) OnClientClosed(*kgo.Client) { c.n.Add(1) }

// TestProducersShareOneClient: typed producers of one factory with the same
// settings share one franz-go client and one producer id, and the records
// of both are delivered; closing one leaves the other working; a producer
// with other settings, or SeparateClient, gets a client of its own; the
// last Close closes the shared client, and the next producer gets a new one.
func TestProducersShareOneClient(t *testing.T) {
	kc := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	var inits atomic.Int32
	kc.ControlKey(int16(kmsg.InitProducerID), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		inits.Add(1)
		return nil, nil, false
	})
	closed := &closedClients{}
	f, err := New(BootstrapServers(kc.ListenAddrs()...), Hooks(RoleProducer, closed))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := testkit.Ctx(t)

	strs, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	objs, err := NewProducer(f, producer.Bytes(), producer.JSON[order]())
	require.NoError(t, err)
	require.True(t, strs.Kgo() == objs.Kgo(), "one franz-go client for both")

	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(2)
		require.NoError(t, strs.ProduceAsync(ctx, producer.Record[string, string]{Topic: "t", Value: "s"}, func(_ producer.Result, err error) {
			defer wg.Done()
			require.NoError(t, err)
		}))
		require.NoError(t, objs.ProduceAsync(ctx, producer.Record[[]byte, order]{Topic: "t", Value: order{ID: i}}, func(_ producer.Result, err error) {
			defer wg.Done()
			require.NoError(t, err)
		}))
	}
	require.NoError(t, strs.Flush(ctx))
	wg.Wait()
	id, _, err := strs.Kgo().ProducerID(ctx)
	require.NoError(t, err)
	require.Equal(t, int32(1), inits.Load(), "one producer id for both")

	// Other settings: a client of its own.
	acks1, err := NewProducer(f, producer.String(), producer.String(), RequiredAcks(LeaderAck))
	require.NoError(t, err)
	defer acks1.Close(ctx)
	require.True(t, strs.Kgo() != acks1.Kgo(), "acks=1 cannot share an acks=all client")
	lingered, err := NewProducer(f, producer.String(), producer.String(), Linger(0))
	require.NoError(t, err)
	defer lingered.Close(ctx)
	require.True(t, strs.Kgo() != lingered.Kgo())
	_, err = lingered.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "l"})
	require.NoError(t, err)
	lid, _, err := lingered.Kgo().ProducerID(ctx)
	require.NoError(t, err)
	require.NotEqual(t, id, lid)
	require.Equal(t, int32(2), inits.Load(), "a producer id of its own")
	sep, err := NewProducer(f, producer.String(), producer.String(), SeparateClient())
	require.NoError(t, err)
	defer sep.Close(ctx)
	require.True(t, strs.Kgo() != sep.Kgo(), "SeparateClient")
	hooked, err := NewProducer(f, producer.String(), producer.String(), Hooks(RoleProducer, &closedClients{}))
	require.NoError(t, err)
	defer hooked.Close(ctx)
	require.True(t, strs.Kgo() != hooked.Kgo(), "hooks of its own")
	_, err = NewProducer(f, producer.String(), producer.String(), RequiredAcks(Acks(5)))
	require.ErrorIs(t, err, ErrConfig, "an invalid option is refused even where a client could be shared")

	// Closing one producer leaves the shared client to the other.
	require.NoError(t, strs.Close(ctx))
	_, err = strs.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "late"})
	require.ErrorIs(t, err, kgo.ErrClientClosed, "a closed producer's records fail")
	res, err := objs.Produce(ctx, producer.Record[[]byte, order]{Topic: "t", Value: order{ID: n}})
	require.NoError(t, err)
	require.Equal(t, "t", res.Topic)
	again, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	require.True(t, objs.Kgo() == again.Kgo(), "a new producer joins the open client")
	againID, _, err := again.Kgo().ProducerID(ctx)
	require.NoError(t, err)
	require.Equal(t, id, againID)
	require.Zero(t, closed.n.Load(), "no producer client closed: the shared one is open")

	require.NoError(t, objs.Close(ctx))
	require.NoError(t, again.Close(ctx))
	require.Equal(t, int32(1), closed.n.Load(), "the last Close closed the shared client")
	fresh, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer fresh.Close(ctx)
	require.True(t, objs.Kgo() != fresh.Kgo(), "a closed shared client is not handed out again")
	_, err = fresh.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "f"})
	require.NoError(t, err)

	// Every record of both typed producers is in the topic.
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	values := map[string]int{}
	for total := 0; total < 2*n+3; {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) {
			total++
			if string(r.Value) == "s" {
				values["strings"]++
			} else if r.Value[0] == '{' {
				values["orders"]++
			}
		})
	}
	require.Equal(t, map[string]int{"strings": n, "orders": n + 1}, values)
}

// TestProducerKeyCoversConfig: every setting a producer's client is built
// from is compared before the client is shared; a new config field must be
// TestProducerKeyDiffers: producers differing in one producer setting get
// different keys, and options that cannot be compared prevent sharing.
func TestProducerKeyDiffers(t *testing.T) {
	f, err := New(BootstrapServers("127.0.0.1:1"), KgoOpts(kgo.ClientID("x")))
	require.NoError(t, err)
	defer f.Close(context.Background())
	key := func(opts ...ProducerOpt) (producerKey, bool) {
		t.Helper()
		cfg, err := f.clientConfig(RoleProducer, asOpts(opts))
		require.NoError(t, err)
		return f.producerKey(cfg)
	}
	base, ok := key()
	require.True(t, ok, "the factory's own KgoOpts do not prevent sharing")
	same, _ := key(RequiredAcks(AllISRAcks))
	require.Equal(t, base, same)
	for name, o := range map[string]ProducerOpt{
		"acks": RequiredAcks(LeaderAck), "linger": Linger(0), "compression": Compression(CodecZstd),
		"idempotence": Idempotence(false), "delivery timeout": DeliveryTimeout(1), "client id": ClientID("other"),
	} {
		k, ok := key(o)
		require.True(t, ok, name)
		require.NotEqual(t, base, k, name)
	}
	for name, o := range map[string]ProducerOpt{
		"KgoOpts": KgoOpts(), "Hooks": Hooks(RoleProducer), "Resolver": Resolver(nil),
		"WithObserver": WithObserver(nil), "HooksPerClient": HooksPerClient(func(ClientInfo) []kgo.Hook { return nil }),
	} {
		_, ok := key(o)
		require.False(t, ok, name)
	}
	// Every concern of the key is compared with ==: a TLS config is the
	// same only if it is the same *tls.Config.
	a, _ := key(TLS(&tls.Config{}))
	b, _ := key(TLS(&tls.Config{}))
	require.True(t, a != b, "two tls.Configs alike are two settings")
}
