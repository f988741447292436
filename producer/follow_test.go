package producer

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// changeWatch is a cluster watch whose changes the test makes: change
// counts one more generation and calls the OnChange callbacks, as the
// watcher does after a check found another cluster. It counts the checks
// and settles asked of it.
type changeWatch struct {
	gen             atomic.Uint64
	checks, settles atomic.Int32
	mu              sync.Mutex
	subs            []func()
}

func (w *changeWatch) Generation() uint64 { return w.gen.Load() }
func (w *changeWatch) Settle(context.Context) uint64 {
	w.settles.Add(1)
	return w.gen.Load()
}
func (w *changeWatch) Check(bool) { w.checks.Add(1) }
func (w *changeWatch) OnChange(fn func()) (cancel func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs = append(w.subs, fn)
	return func() {}
}

func (w *changeWatch) change() {
	w.gen.Add(1)
	w.mu.Lock()
	subs := append([]func(){}, w.subs...)
	w.mu.Unlock()
	for _, fn := range subs {
		fn()
	}
}

// TestChangeReplacesClientAtOnce: an unpinned producer makes a client for
// the new cluster when the change is seen, before any record failed on
// the old one (issue 38: it waited for the old client's rebootstrap, which
// the interceptor paces after the refusal, and for a record to fail). The
// records the old client held come to the new one, each without a cluster
// check of its own (one probe per record held the last one back by ~3 ms
// a record).
func TestChangeReplacesClientAtOnce(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	// The first client's broker never answers: its records stay buffered
	// until the client is closed.
	old, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	w := &changeWatch{}
	var made atomic.Int32
	p := newProducer(old, Bytes(), Bytes()).withFollow(link.Producer{Watch: w, Clients: countedClients(seeds, &made)})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = p.Close(ctx)
	}()

	const n = 5
	errs := make(chan error, n)
	for range n {
		require.NoError(t, p.ProduceAsync(context.Background(), Record[[]byte, []byte]{Topic: "t", Value: []byte("x")},
			func(_ Result, err error) { errs <- err }))
	}
	require.Zero(t, made.Load())
	w.change()
	require.Equal(t, int32(1), made.Load(), "a client for the new cluster, made when the change is seen")
	require.NotSame(t, old, p.e.client())
	deadline := time.After(10 * time.Second)
	for range n {
		select {
		case err := <-errs:
			require.NoError(t, err, "a record the old client held is delivered by the new one")
		case <-deadline:
			t.Fatal("a record of the old client was not delivered")
		}
	}
	require.Equal(t, int32(1), made.Load(), "one new client for one change")
	require.Zero(t, w.settles.Load(), "records of a replaced client wait for no check")
	require.Zero(t, w.checks.Load())
}

// TestChangeLeavesTransactionalClient: a transactional producer's client
// is not replaced when the change is seen (its transaction is on the old
// cluster; its records fail with the change when they fail).
func TestChangeLeavesTransactionalClient(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID("tx"))
	require.NoError(t, err)
	w := &changeWatch{}
	var made atomic.Int32
	p := newProducer(cl, Bytes(), Bytes()).withFollow(link.Producer{Watch: w, Clients: countedClients(seeds, &made)})
	defer p.Close(context.Background())
	w.change()
	require.Zero(t, made.Load())
	require.Same(t, cl, p.e.client())
}
