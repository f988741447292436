package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/kconsist/kconsist/consistency"
)

// silentListener accepts connections on loopback and never writes to them,
// like a peer that takes the TCP connection but never answers the TLS
// ClientHello.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 16)
	go func() {
		defer close(conns)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestDialTimeoutCoversTLSHandshake: a peer that accepts TCP and never
// answers the handshake must not hold the dial past DialTimeout; kgo
// passes a custom dialer a context without a deadline.
func TestDialTimeoutCoversTLSHandshake(t *testing.T) {
	addr := silentListener(t)
	i, err := New(Config{
		Store:       consistency.NewMemoryStore(),
		TLS:         &tls.Config{MinVersion: tls.VersionTLS12},
		DialTimeout: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	errc := make(chan error, 1)
	go func() {
		c, err := i.DialContext(context.Background(), "tcp", addr)
		if c != nil {
			c.Close()
		}
		errc <- err
	}()
	select {
	case err := <-errc:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("dial error %v, want a deadline exceeded", err)
		}
		if took := time.Since(start); took < 150*time.Millisecond {
			t.Fatalf("dial ended after %v, before the 200ms timeout", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("dial still pending after 5s with a 200ms DialTimeout")
	}
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
