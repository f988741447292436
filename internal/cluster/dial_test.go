package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDialerResolvesEveryDial checks that host names are looked up on every
// dial (never cached), IPs are dialed as they are, and every address of an
// answer is tried.
func TestDialerResolvesEveryDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var lookups atomic.Int32
	resolve := func(_ context.Context, host string) ([]string, error) {
		lookups.Add(1)
		switch host {
		case "good.test":
			return []string{"127.0.0.1"}, nil
		case "second.test": // the first address refuses, the second works
			return []string{"127.0.0.2", "127.0.0.1"}, nil
		case "empty.test":
			return nil, nil
		}
		return nil, errors.New("no such host")
	}
	var dialed []string
	var mu sync.Mutex
	base := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		if addr == net.JoinHostPort("127.0.0.2", port) {
			return nil, errors.New("refused")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	dial := Dialer(resolve, base)
	ctx := context.Background()
	for range 2 {
		c, err := dial(ctx, "tcp", net.JoinHostPort("good.test", port))
		require.NoError(t, err)
		c.Close()
	}
	require.Equal(t, int32(2), lookups.Load(), "resolved on every dial")
	c, err := dial(ctx, "tcp", net.JoinHostPort("second.test", port))
	require.NoError(t, err)
	c.Close()
	c, err = dial(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	c.Close()
	require.Equal(t, int32(3), lookups.Load(), "an IP is not resolved")
	_, err = dial(ctx, "tcp", net.JoinHostPort("missing.test", port))
	require.ErrorContains(t, err, "resolve missing.test")
	_, err = dial(ctx, "tcp", net.JoinHostPort("empty.test", port))
	require.ErrorContains(t, err, "no addresses")
	_, err = dial(ctx, "tcp", "no-port")
	require.Error(t, err)
	mu.Lock()
	require.Contains(t, dialed, net.JoinHostPort("127.0.0.2", port))
	mu.Unlock()
}
