package session

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// countingMaker makes clients that dial nothing (no request is sent) and
// counts how many it made and how many of them were closed.
type countingMaker struct {
	made, closed atomic.Int32
}

func (m *countingMaker) make() (*kgo.Client, error) {
	m.made.Add(1)
	return kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.WithHooks(closeHook(func() { m.closed.Add(1) })))
}

func TestSharedClientLifecycle(t *testing.T) {
	var m countingMaker
	var c sharedClient

	a, relA, err := c.acquire(m.make)
	require.NoError(t, err)
	b, relB, err := c.acquire(m.make)
	require.NoError(t, err)
	require.Same(t, a, b, "two users share one client")
	require.EqualValues(t, 1, m.made.Load())

	relA()
	relA() // a second release of the same acquire counts once
	relB()
	require.Zero(t, m.closed.Load(), "released, not renewed: kept for the next user")

	// Renewed while held: closed only once its last user released it,
	// and the next user gets a new one.
	_, relC, err := c.acquire(m.make)
	require.NoError(t, err)
	c.renew()
	require.Zero(t, m.closed.Load(), "closed under its user")
	d, relD, err := c.acquire(m.make)
	require.NoError(t, err)
	require.NotSame(t, a, d)
	require.EqualValues(t, 2, m.made.Load())
	relC()
	require.EqualValues(t, 1, m.closed.Load(), "the renewed client, once released")

	// Renewed while unused: closed at once.
	relD()
	c.renew()
	require.EqualValues(t, 2, m.closed.Load())

	// Close closes the current client even while used, once, and
	// refuses new users.
	_, relE, err := c.acquire(m.make)
	require.NoError(t, err)
	c.close()
	require.EqualValues(t, 3, m.closed.Load())
	relE()
	c.close()
	require.EqualValues(t, 3, m.closed.Load(), "closed once")
	_, _, err = c.acquire(m.make)
	require.ErrorIs(t, err, errSharedClosed)
	require.EqualValues(t, 3, m.made.Load())
}
