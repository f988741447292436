package consumer

import (
	"context"
	"errors"
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
	"github.com/kconsist/kconsist/internal/testkit"
)

// manualWatch reports a cluster change when the test calls change, and
// answers Follow with next (a link.Follower, as the session's).
type manualWatch struct {
	mu   sync.Mutex
	fn   func()
	next func() (*kgo.Client, error)
}

func (w *manualWatch) Follow() (*kgo.Client, error) { return w.next() }

// follows makes a consumer of cl, as factory.NewConsumer does, that hears
// of cluster changes from w.
func follows(t *testing.T, cl *kgo.Client, group bool, w *manualWatch) *Consumer[string, string] {
	t.Helper()
	c, err := New(link.Seal(link.Consumer{Client: cl, Group: group, Follow: w}), String(), String())
	require.NoError(t, err)
	return c
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

// pollStarts is a kgo hook that counts the polls a client started.
type pollStarts struct{ n atomic.Int32 }

func (p *pollStarts) OnPollStart(context.Context) { p.n.Add(1) }

// TestPollFollowsClientSwap: when a cluster change replaces the client, a
// Poll in progress goes on with the new client instead of returning
// ErrClientClosed; after Close, Poll reports ErrClientClosed and a change
// makes no client (not even one closed at once).
func TestPollFollowsClientSwap(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	newClient := func(opts ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kc.ListenAddrs()...)}, opts...)...)
	}
	started := &pollStarts{}
	cl, err := newClient(kgo.WithHooks(started)) // the old client
	require.NoError(t, err)
	made := 0
	w := &manualWatch{next: func() (*kgo.Client, error) {
		made++
		return newClient()
	}}
	c := follows(t, cl, false, w)
	require.NoError(t, c.Assign(map[string]map[int32]kgo.Offset{"t": {0: kgo.NewOffset().AtStart()}}))

	polled := make(chan []Record[string, string], 1)
	errs := make(chan error, 1)
	go func() {
		recs, err := c.Poll(ctx, 0)
		errs <- err
		polled <- recs
	}()
	// The change comes once Poll is in the old client's PollRecords.
	testkit.WaitFor(ctx, t, "Poll to start in the old client", func() bool { return started.n.Load() > 0 })
	w.change()
	require.Equal(t, 1, made)
	prod, err := newClient()
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	require.NoError(t, <-errs, "the swap is not a close")
	require.Equal(t, "v", (<-polled)[0].Value, "the new client took over the assignment")

	require.NoError(t, c.Close(ctx))
	_, err = c.Poll(ctx, 0)
	require.ErrorIs(t, err, kgo.ErrClientClosed)
	w.change()
	require.Equal(t, 1, made, "after Close, a change makes no client")
}

// TestCloseWaitsForRetiredClients: a cluster change closes the replaced
// client (or, pinned, the only one) in the background; Close returns only
// once that is done, so no goroutine of the consumer outlives it. The
// clients never dial (no topic, no group), so the test runs in a synctest
// bubble: synctest.Wait returns once Close can go no further by itself.
func TestCloseWaitsForRetiredClients(t *testing.T) {
	for _, pinned := range []bool{false, true} {
		t.Run(map[bool]string{false: "follow", true: "pinned"}[pinned], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				newClient := func(opts ...kgo.Opt) (*kgo.Client, error) {
					return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, opts...)...)
				}
				closing, release := make(chan struct{}), make(chan struct{})
				// The first client's Close blocks in its hook until released.
				first, err := newClient(kgo.WithHooks(blockClose{closing, release}))
				require.NoError(t, err)
				w := &manualWatch{next: func() (*kgo.Client, error) {
					if pinned {
						return nil, errors.New("pinned cluster gone")
					}
					return newClient()
				}}
				c := follows(t, first, false, w)
				w.change()
				<-closing // the retired client is being closed in the background
				closed := make(chan error, 1)
				go func() { closed <- c.Close(context.Background()) }()
				synctest.Wait()
				select {
				case <-closed:
					t.Fatal("Close returned while a retired client was still closing")
				default:
				}
				close(release)
				require.NoError(t, <-closed)
			})
		})
	}
}

// blockClose signals closing when its client closes, then holds the Close
// call until release is closed. It acts once.
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

// TestCloseBoundedByContext: Close of a group consumer whose LeaveGroup
// request gets no answer returns the context's error once the context
// ends, rather than when franz-go gives the request up; a Close after it
// waits for the rest of the closing.
func TestCloseBoundedByContext(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("v")}).FirstErr())
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.ConsumerGroup("g"), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	c, err := New(link.Seal(link.Consumer{Client: cl, Group: true}), String(), String())
	require.NoError(t, err)
	recs, err := c.Poll(ctx, 0)
	require.NoError(t, err)
	require.Len(t, recs, 1) // a member of the group now

	leaving := make(chan struct{})
	kc.ControlKey(kmsg.LeaveGroup.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		close(leaving)
		return nil, nil, true // no answer, ever
	})
	closeCtx, stop := context.WithCancel(ctx)
	go func() {
		<-leaving
		stop()
	}()
	err = c.Close(closeCtx)
	require.ErrorIs(t, err, context.Canceled)
	require.NotErrorIs(t, ctx.Err(), context.DeadlineExceeded, "Close waited for the test's own deadline")
	// The abandoned leave ends the closing at once: a second Close waits
	// for it, so no goroutine outlives the test (TestMain checks), and
	// reports the leave that did not finish.
	require.ErrorIs(t, c.Close(ctx), context.Canceled)
	_, err = c.Poll(ctx, 0)
	require.ErrorIs(t, err, kgo.ErrClientClosed)
}
