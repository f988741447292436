package localcluster

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSideDoors: kfake answers on its TCP address and on its unix side door,
// the gateway uses the side door, and Close removes the sockets.
func TestSideDoors(t *testing.T) {
	c, err := New(Brokers(2))
	require.NoError(t, err)
	dir := c.doors.dir
	for _, addr := range c.KfakeAddrs() {
		conn, err := c.doors.dial(context.Background(), "tcp", addr)
		require.NoError(t, err)
		require.Equal(t, "unix", conn.RemoteAddr().Network(), "the side door is a unix socket")
		conn.Close()
		tcp, err := (&c.doors.dialer).DialContext(context.Background(), "tcp", addr)
		require.NoError(t, err, "kfake still listens on TCP")
		tcp.Close()
	}
	c.Close()
	_, err = os.Stat(dir)
	require.True(t, os.IsNotExist(err), "sockets removed: %v", err)
}
