package producer

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/bridge"
)

// TestSharedViews: producers of other types attached to one shared client use one
// client; Close of one fails its later records with ErrClientClosed (on the
// producer's goroutine, not the caller's) and leaves the client open for the
// other; the last Close closes the client, calls Released once, and Attach
// refuses the client from then on. It goes through bridge, as the factory
// does.
func TestSharedViews(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	var released atomic.Int32
	s := bridge.NewProducerClient(cl, follow{Released: func() { released.Add(1) }})
	strs, ok := attachVia(s, String(), String())
	require.True(t, ok)
	raw, ok := attachVia(s, Bytes(), Bytes())
	require.True(t, ok)
	require.True(t, strs.Kgo() == raw.Kgo())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err = strs.Produce(ctx, Record[string, string]{Topic: "t", Value: "a"})
	require.NoError(t, err)
	require.NoError(t, strs.Close(ctx))
	require.NoError(t, strs.Close(ctx), "a second Close is harmless")
	require.Zero(t, released.Load(), "another producer uses the client")

	done := make(chan error, 1)
	require.NoError(t, strs.ProduceAsync(ctx, Record[string, string]{Topic: "t", Value: "late"}, func(_ Result, err error) { done <- err }))
	require.ErrorIs(t, <-done, kgo.ErrClientClosed)
	results, err := strs.ProduceSync(ctx, Record[string, string]{Topic: "t", Value: "late"})
	require.NoError(t, err)
	require.ErrorIs(t, results.FirstErr(), kgo.ErrClientClosed)

	res, err := raw.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: []byte("b")})
	require.NoError(t, err, "the other producer keeps the client")
	require.Equal(t, int64(1), res.Offset)

	require.NoError(t, raw.Close(ctx))
	require.Equal(t, int32(1), released.Load())
	refused, ok := attachVia(s, String(), String())
	require.False(t, ok, "the last Close closed the client")
	require.Nil(t, refused.e, "a refused Attach leaves its producer alone")
	_, err = raw.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: []byte("c")})
	require.ErrorIs(t, err, kgo.ErrClientClosed)
	require.Equal(t, int32(1), released.Load(), "Released is called once")
}

// attachVia attaches a producer to s as the factory does.
func attachVia[K, V any](s bridge.ProducerClient, keys Serializer[K], values Serializer[V]) (*Producer[K, V], bool) {
	p := new(Producer[K, V])
	return p, s.Attach(p, keys, values)
}
