package producer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/internal/link"
)

// TestSharedViews: producers of other types made with one link.Share use
// one client; Close of one fails its later records with ErrClientClosed
// (on the producer's goroutine, not the caller's) and leaves the client
// open for the other; the last Close closes the client, and the share
// hands the next producer a new one. It goes through New, as the factory
// does.
func TestSharedViews(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	var made atomic.Int32
	l := link.Producer{Share: new(link.Share), Clients: countedClients(seeds, &made)}
	strs, err := New(link.Seal(l), String(), String())
	require.NoError(t, err)
	raw, err := New(link.Seal(l), Bytes(), Bytes())
	require.NoError(t, err)
	require.True(t, strs.Kgo() == raw.Kgo())
	require.Equal(t, int32(1), made.Load(), "one client for both")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	_, err = strs.Produce(ctx, Record[string, string]{Topic: "t", Value: "a"})
	require.NoError(t, err)
	require.NoError(t, strs.Close(ctx))
	require.NoError(t, strs.Close(ctx), "a second Close is harmless")

	done := make(chan error, 1)
	require.NoError(t, strs.ProduceAsync(ctx, Record[string, string]{Topic: "t", Value: "late"}, func(_ Result, err error) { done <- err }))
	require.ErrorIs(t, <-done, kgo.ErrClientClosed)
	results, err := strs.ProduceSync(ctx, Record[string, string]{Topic: "t", Value: "late"})
	require.NoError(t, err)
	require.ErrorIs(t, results.FirstErr(), kgo.ErrClientClosed)

	res, err := raw.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: []byte("b")})
	require.NoError(t, err, "the other producer keeps the client")
	require.Equal(t, int64(1), res.Offset)

	first := raw.Kgo()
	require.NoError(t, raw.Close(ctx))
	_, err = raw.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: []byte("c")})
	require.ErrorIs(t, err, kgo.ErrClientClosed)

	again, err := New(link.Seal(l), String(), String())
	require.NoError(t, err)
	require.Equal(t, int32(2), made.Load(), "the last Close closed the client: the share makes a new one")
	require.NotSame(t, first, again.Kgo())
	_, err = again.Produce(ctx, Record[string, string]{Topic: "t", Value: "d"})
	require.NoError(t, err)
	require.NoError(t, again.Close(ctx))
}

// TestFlushWaitsOnlyForOwnRecords: two producers share one client; a
// broker holds the Produce requests of one's topic. Flush and Close of
// the other return once its own records are done, while the first one's
// record is still held; the first one's Flush returns once its broker
// answers.
func TestFlushWaitsOnlyForOwnRecords(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "held", "free"))
	require.NoError(t, err)
	defer kc.Close()
	// Each topic's one partition on a broker of its own: a held Produce
	// request holds no record of the other topic.
	require.NoError(t, kc.MoveTopicPartition("held", 0, 0))
	require.NoError(t, kc.MoveTopicPartition("free", 0, 1))
	heldNode := kc.LeaderFor("held", 0)
	release, held := make(chan struct{}), make(chan struct{})
	var holdOnce sync.Once
	kc.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		if kc.CurrentNode() == heldNode {
			holdOnce.Do(func() { close(held) })
			kc.SleepControl(func() { <-release })
		}
		return nil, nil, false // answered as usual, once let go
	})

	seeds := kc.ListenAddrs()
	l := link.Producer{Share: new(link.Share), Clients: clientsFunc(func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(seeds...))
	})}
	heldP, err := New(link.Seal(l), String(), String())
	require.NoError(t, err)
	defer heldP.Close(context.Background())
	freeP, err := New(link.Seal(l), String(), String())
	require.NoError(t, err)
	require.Same(t, heldP.Kgo(), freeP.Kgo(), "one shared client")
	defer func() { // before heldP's Close, should the test fail early
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	// A deadline only for a failure to show as an error, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	heldDone := make(chan error, 1)
	require.NoError(t, heldP.ProduceAsync(ctx, Record[string, string]{Topic: "held", Value: "h"}, func(_ Result, err error) { heldDone <- err }))
	select {
	case <-held: // the broker holds it now: a Flush of the whole client would wait
	case <-ctx.Done():
		t.Fatal("the held record never reached its broker")
	}
	var freeDone atomic.Int32
	for range 5 {
		require.NoError(t, freeP.ProduceAsync(ctx, Record[string, string]{Topic: "free", Value: "f"}, func(_ Result, err error) {
			if err == nil {
				freeDone.Add(1)
			}
		}))
	}
	require.NoError(t, freeP.Flush(ctx), "Flush waits for this producer's records only")
	require.Equal(t, int32(5), freeDone.Load(), "every callback ran before Flush returned")
	require.NoError(t, freeP.Close(ctx), "Close of a producer others use waits for its own records only")
	select {
	case err := <-heldDone:
		t.Fatalf("the held record completed before its broker was let go: %v", err)
	default:
	}

	close(release)
	require.NoError(t, heldP.Flush(ctx))
	select {
	case err := <-heldDone:
		require.NoError(t, err)
	default:
		t.Fatal("Flush returned before the held record's callback ran")
	}
	_, err = heldP.Produce(ctx, Record[string, string]{Topic: "free", Value: "after"})
	require.NoError(t, err, "the client stays open for the producer left")
}

// TestFlushWaitsForOwnVerdict: a producer's record that failed and waits for
// the cluster verdict keeps that producer's Flush waiting (its context ends
// it), not the Flush of another producer on the same client; once the
// verdict comes, the record's callback runs before Flush returns. The
// record fails in the client before any dial (larger than the client may
// buffer), so the test runs in a synctest bubble: the waiting Flush ends
// exactly at its context's deadline, and nothing else ends it.
func TestFlushWaitsForOwnVerdict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &slowWatch{release: make(chan struct{})}
		l := link.Producer{Share: new(link.Share), Watch: w, Clients: clientsFunc(func() (*kgo.Client, error) {
			return kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.MaxBufferedBytes(1000)) // never dialled
		})}
		failing, err := New(link.Seal(l), Bytes(), Bytes())
		require.NoError(t, err)
		defer failing.Close(context.Background())
		other, err := New(link.Seal(l), Bytes(), Bytes())
		require.NoError(t, err)
		defer other.Close(context.Background())
		var released sync.Once
		release := func() { released.Do(func() { close(w.release) }) }
		defer release() // before the Closes, should the test fail early

		var calls atomic.Int32
		var got error
		require.NoError(t, failing.ProduceAsync(context.Background(), Record[[]byte, []byte]{Topic: "t", Value: make([]byte, 2000)},
			func(_ Result, err error) { got = err; calls.Add(1) }))

		require.NoError(t, other.Flush(context.Background()), "nothing of its own to wait for")
		const wait = 200 * time.Millisecond
		short, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		start := time.Now()
		require.ErrorIs(t, failing.Flush(short), context.DeadlineExceeded, "its record waits for the verdict")
		require.Equal(t, wait, time.Since(start), "only the context ended Flush")
		require.Zero(t, calls.Load())

		release() // the verdict: no change
		require.NoError(t, failing.Flush(context.Background()))
		require.Equal(t, int32(1), calls.Load(), "the callback ran before Flush returned")
		require.Error(t, got)
	})
}
