package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kconsist/kconsist/consistency"
)

// TestDialTimeoutCoversTLSHandshake: a peer that accepts TCP and never
// answers the handshake must not hold the dial past DialTimeout; kgo
// passes a custom dialer a context without a deadline. The peer is the
// silent end of a net.Pipe, in a synctest bubble: the dial ends exactly at
// the timeout.
func TestDialTimeoutCoversTLSHandshake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		drained := make(chan struct{})
		i, err := New(Config{
			Store:       consistency.NewMemoryStore(),
			TLS:         &tls.Config{MinVersion: tls.VersionTLS12},
			DialTimeout: 200 * time.Millisecond,
			Dial: func(context.Context, string, string) (net.Conn, error) {
				client, peer := net.Pipe()
				go func() { // reads the ClientHello, answers nothing
					defer close(drained)
					_, _ = io.Copy(io.Discard, peer)
					peer.Close()
				}()
				return client, nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		c, err := i.DialContext(context.Background(), "tcp", "127.0.0.1:9093")
		if c != nil {
			c.Close()
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial error %v, want a deadline exceeded", err)
		}
		if took := time.Since(start); took != 200*time.Millisecond {
			t.Fatalf("dial ended after %v, want the 200ms timeout", took)
		}
		<-drained // the failed dial closed its end
	})
}

// TestDialTimeoutDefault: without Config.DialTimeout the bound is kgo's 10s.
func TestDialTimeoutDefault(t *testing.T) {
	i, err := New(Config{Store: consistency.NewMemoryStore()})
	if err != nil {
		t.Fatal(err)
	}
	if i.timeout != DefaultDialTimeout || DefaultDialTimeout != 10*time.Second {
		t.Fatalf("default dial timeout %v, want 10s", i.timeout)
	}
}
