package session

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/rebootstrap"
)

// TestConsumerFollower: the link.Follower a consumer gets builds its client
// again from the same description after a change; pinned, it builds none
// and names the pinned cluster; after Close it fails with ErrClosed.
func TestConsumerFollower(t *testing.T) {
	s := newSession(t, Config{})
	l, err := s.Consumer(build())
	require.NoError(t, err)
	defer l.Client.Close()
	require.NotNil(t, l.Follow)
	next, err := l.Follow.Follow()
	require.NoError(t, err)
	require.NotSame(t, l.Client, next)
	require.Equal(t, l.Client.OptValue("SeedBrokers"), next.OptValue("SeedBrokers"), "built from the same description")
	next.Close()

	b := build()
	b.Pin = "pinned-cluster"
	pinned, err := s.Consumer(b)
	require.NoError(t, err)
	defer pinned.Client.Close()
	next, err = pinned.Follow.Follow()
	require.Nil(t, next)
	var cc *rebootstrap.ClusterChangedError
	require.ErrorAs(t, err, &cc)
	require.Equal(t, "pinned-cluster", cc.From)

	s.Close()
	next, err = l.Follow.Follow()
	require.Nil(t, next)
	require.ErrorIs(t, err, errClosed)
}
