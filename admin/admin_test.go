package admin_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/internal/link"
)

// zeroFirst returns the zero value of fn's first parameter without naming
// its type: how code outside this module could still reach admin.New with
// a link.Admin it cannot write.
func zeroFirst[L, R any](fn func(L) (R, error)) L {
	var l L
	return l
}

// TestNewNeedsTheFactory: admin.New given the zero link.Admin (all a
// caller outside this module can get) returns an error and no client,
// rather than a client that panics on first use.
func TestNewNeedsTheFactory(t *testing.T) {
	c, err := admin.New(zeroFirst(admin.New))
	require.ErrorContains(t, err, "factory.Factory.Admin")
	require.Nil(t, c)
}

// TestCloseOnce: the client is closed once, however many Close calls:
// one made while the first is closing waits for that closing, and both
// return nil; requests after it fail. The client never dials, so the test
// runs in a synctest bubble: synctest.Wait returns once the second Close
// can go no further by itself.
func TestCloseOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closing, release := make(chan struct{}), make(chan struct{})
		cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"), kgo.WithHooks(holdClose{closing, release}))
		require.NoError(t, err)
		c, err := admin.New(link.Seal(link.Admin{Client: cl}))
		require.NoError(t, err)
		first, second := make(chan error, 1), make(chan error, 1)
		go func() { first <- c.Close(context.Background()) }()
		<-closing
		go func() { second <- c.Close(context.Background()) }()
		synctest.Wait()
		select {
		case <-second:
			t.Fatal("a second Close returned while the first was closing")
		default:
		}
		close(release)
		require.NoError(t, <-first)
		require.NoError(t, <-second)
		_, err = c.ListTopics(context.Background())
		require.ErrorIs(t, err, kgo.ErrClientClosed)
	})
}

// holdClose signals closing when its client closes, then holds the close
// until release is closed. It acts once.
type holdClose struct{ closing, release chan struct{} }

func (h holdClose) OnClientClosed(*kgo.Client) {
	select {
	case <-h.closing:
		return
	default:
	}
	close(h.closing)
	<-h.release
}
