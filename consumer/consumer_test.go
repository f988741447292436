package consumer

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// manualWatch reports a cluster change when the test calls change.
type manualWatch struct {
	mu sync.Mutex
	fn func()
}

func (w *manualWatch) OnChange(fn func()) func() {
	w.mu.Lock()
	w.fn = fn
	w.mu.Unlock()
	return func() {}
}

func (w *manualWatch) change() {
	w.mu.Lock()
	fn := w.fn
	w.mu.Unlock()
	fn()
}

// TestPollFollowsClientSwap: when a cluster change replaces the client, a
// Poll in progress goes on with the new client instead of returning
// ErrClientClosed; after Close, Poll reports ErrClientClosed and a change
// makes no client.
func TestPollFollowsClientSwap(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newClient := func() (*kgo.Client, error) { return kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...)) }
	cl, err := newClient()
	require.NoError(t, err)
	w := &manualWatch{}
	made := 0
	c := newConsumer(cl, String(), String(), false).withFollow(follow{Watch: w, NewClient: func() (*kgo.Client, error) {
		made++
		return newClient()
	}})
	require.NoError(t, c.Assign(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))

	polled := make(chan []Record[string, string], 1)
	errs := make(chan error, 1)
	go func() {
		recs, err := c.Poll(ctx, 0)
		errs <- err
		polled <- recs
	}()
	time.Sleep(50 * time.Millisecond) // let Poll block in the old client; the test holds either way
	w.change()
	require.Equal(t, 1, made)
	prod, err := newClient()
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	require.NoError(t, <-errs, "the swap is not a close")
	require.Equal(t, "v", (<-polled)[0].Value, "the new client took over the assignment")

	c.Close()
	_, err = c.Poll(ctx, 0)
	require.ErrorIs(t, err, kgo.ErrClientClosed)
	w.change()
	require.Equal(t, 2, made)
}

// TestCloseWaitsForRetiredClients: a cluster change closes the replaced
// client (or, pinned, the only one) in the background; Close returns only
// once that is done, so no goroutine of the consumer outlives it.
func TestCloseWaitsForRetiredClients(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		t.Run(map[bool]string{false: "follow", true: "pinned"}[pinned], func(t *testing.T) {
			kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
			require.NoError(t, err)
			defer kc.Close()
			closing := make(chan struct{})
			release := make(chan struct{})
			// The first client's Close blocks in its hook until released.
			first, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.WithHooks(blockClose{closing, release}))
			require.NoError(t, err)
			w := &manualWatch{}
			c := newConsumer(first, String(), String(), false).withFollow(follow{
				Watch:   w,
				Pinned:  pinned,
				Changed: func() error { return errors.New("pinned cluster gone") },
				NewClient: func() (*kgo.Client, error) {
					return kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
				},
			})
			w.change()
			<-closing // the retired client is being closed in the background
			closed := make(chan struct{})
			go func() {
				c.Close()
				close(closed)
			}()
			// An observation window, not synchronisation: Close must still
			// be waiting when it ends.
			select {
			case <-closed:
				t.Fatal("Close returned while a retired client was still closing")
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return once the retired client closed")
			}
		})
	}
}

// blockClose signals closing when its client closes, then holds the Close
// call until release is closed. It acts once: the pinned consumer's Close
// closes the same client again.
type blockClose struct{ closing, release chan struct{} }

func (b blockClose) OnClientClosed(*kgo.Client) {
	select {
	case <-b.closing:
		return
	default:
	}
	close(b.closing)
	<-b.release
}
