package consumer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/internal/link"
)

// authWatch is a link.AuthWatch the test drives: fail makes a failure hold
// and tells the subscribers; subscribed is closed at the first subscription.
type authWatch struct {
	mu         sync.Mutex
	err        error
	fns        []func(error)
	flag       atomic.Bool
	subscribed chan struct{}
}

func (w *authWatch) AuthFailure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *authWatch) OnAuthFailure(fn func(error)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.fns = append(w.fns, fn)
	if len(w.fns) == 1 {
		close(w.subscribed)
	}
	return func() {}
}

func (w *authWatch) Failing() *atomic.Bool { return &w.flag }

func (w *authWatch) fail(err error) {
	w.mu.Lock()
	w.err = err
	fns := w.fns
	w.mu.Unlock()
	w.flag.Store(true)
	for _, fn := range fns {
		fn(err)
	}
}

// TestPollReturnsAuthError: a failure found while a poll waits ends it
// with a *kconsist.AuthError (no topic, the cause unwrapped), and while the
// failure holds every poll returns it at once, Records too. The client has
// nothing to consume, so it never dials.
func TestPollReturnsAuthError(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	w := &authWatch{subscribed: make(chan struct{})}
	c, err := New(link.Seal(link.Consumer{Client: cl, Auth: w}), String(), String())
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close(context.Background())) }()

	cause := errors.New("SASL authentication failed")
	polled := make(chan error, 1)
	go func() {
		_, err := c.Poll(context.Background(), 0)
		polled <- err
	}()
	<-w.subscribed // the poll waits, subscribed to failures
	w.fail(cause)
	err = <-polled
	var aerr *kconsist.AuthError
	require.ErrorAs(t, err, &aerr)
	require.Empty(t, aerr.Topic, "a poll has no topic")
	require.ErrorIs(t, err, cause)

	_, err = c.Poll(context.Background(), 0)
	require.ErrorAs(t, err, &aerr, "at once while the failure holds")
	n := 0
	for r, err := range c.Records(context.Background()) {
		n++
		require.Nil(t, r)
		require.ErrorAs(t, err, &aerr)
	}
	require.Equal(t, 1, n, "the error ends the loop")
}
