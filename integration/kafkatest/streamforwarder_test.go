package kafkatest_test

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
)

// TestStreamForwarderTLS: a stream forwarder carries a TLS session (a
// frame forwarder drops it: a ClientHello reads as an impossible frame
// size) and counts every connection made to it, forwarded or not.
func TestStreamForwarderTLS(t *testing.T) {
	cert, pool := testkit.SelfSigned(t, "kafkatest.invalid")
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { // echo
				defer c.Close()
				buf := make([]byte, 64)
				n, err := c.Read(buf)
				if err == nil {
					_, _ = c.Write(buf[:n])
				}
			}()
		}
	}()
	cfg := &tls.Config{RootCAs: pool, ServerName: "kafkatest.invalid", MinVersion: tls.VersionTLS12}
	echo := func(addr string) error {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		got := make([]byte, 4)
		if _, err := c.Read(got); err != nil {
			return err
		}
		require.Equal(t, "ping", string(got))
		return nil
	}

	stream, err := kafkatest.NewStreamForwarder(ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { stream.Close() })
	require.NoError(t, echo(stream.Addr()))
	require.NoError(t, echo(stream.Addr()))
	require.EqualValues(t, 2, stream.Accepted())

	frames, err := kafkatest.NewForwarder(ln.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { frames.Close() })
	require.Error(t, echo(frames.Addr()), "a frame forwarder cannot carry TLS")

	stream.SetTarget("") // refuses, but still counts
	require.Error(t, echo(stream.Addr()))
	require.EqualValues(t, 3, stream.Accepted())
}
