package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kconsist/kconsist/consistency"
)

// closingListener accepts connections on loopback, reads what the client
// sends first and closes, writing reply before closing. With no reply it
// is a plaintext Kafka listener meeting a ClientHello.
func closingListener(t *testing.T, reply []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Read the whole ClientHello, so that the close is a FIN
			// and not a reset for unread bytes.
			buf := make([]byte, 64<<10)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for n, err := c.Read(buf); n > 0 && err == nil; n, err = c.Read(buf) {
				_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			}
			if reply != nil {
				_, _ = c.Write(reply)
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// TestTLSToPlaintextPort: a peer that closes the connection without a
// byte of TLS fails the dial with ErrNotTLS, not with io.EOF, which kgo
// retries under AlwaysRetryEOF. A peer that spoke before closing keeps
// its io.EOF (a cut connection, retried as before).
func TestTLSToPlaintextPort(t *testing.T) {
	i, err := New(Config{
		Store:       consistency.NewMemoryStore(),
		TLS:         &tls.Config{MinVersion: tls.VersionTLS12},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	dial := func(addr string) error {
		c, err := i.DialContext(context.Background(), "tcp", addr)
		if c != nil {
			c.Close()
		}
		return err
	}

	err = dial(closingListener(t, nil))
	if !errors.Is(err, ErrNotTLS) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("dial to a silent plaintext port: %v; want ErrNotTLS and no io.EOF", err)
	}

	// The first bytes of a TLS record header (handshake, TLS 1.2), then a
	// close: the peer spoke TLS and the connection was cut.
	err = dial(closingListener(t, []byte{0x16, 0x03, 0x03}))
	if errors.Is(err, ErrNotTLS) || !(errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		t.Fatalf("dial to a peer cut mid-handshake: %v; want an EOF, not ErrNotTLS", err)
	}
}
