package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kconsist/kconsist/consistency"
)

// TestIdleClosedWriteRefused: a connection the broker closed while it was
// idle refuses the next request with nothing written, so that kgo retries
// it at once on a new connection instead of failing it (and backing off)
// after the broker's EOF.
func TestIdleClosedWriteRefused(t *testing.T) {
	ln := loopbackListener(t)
	closeNow, closed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(closed)
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		// Answer two requests (body ignored), then close on request.
		for range 2 {
			req, err := readFrame(s)
			if err != nil {
				return
			}
			corr := int32(binary.BigEndian.Uint32(req[4:8]))
			if _, err := s.Write(respFrame(corr, nil, []byte{0, 0, 0, 0})); err != nil {
				return
			}
		}
		<-closeNow
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dialIdleTest(ctx, t, ln.Addr().String())
	defer c.Close()
	roundTrip := func(corr int32) {
		t.Helper()
		frame := reqFrame(metadataReq(1), corr)
		if n, err := c.Write(frame); err != nil || n != len(frame) {
			t.Fatalf("write %d: %d of %d bytes, %v", corr, n, len(frame), err)
		}
		resp := make([]byte, len(respFrame(corr, nil, []byte{0, 0, 0, 0})))
		if _, err := io.ReadFull(c, resp); err != nil {
			t.Fatalf("read %d: %v", corr, err)
		}
	}
	roundTrip(1)
	roundTrip(2) // idle-checked (see dialIdleTest): the broker is there
	cn := c.(*conn)
	if cn.w.peek == nil {
		t.Fatal("the idle write was not checked")
	}
	// The check runs on requests: it must not allocate.
	if n := testing.AllocsPerRun(100, func() {
		if cn.w.idleClosed(cn.w.lastWrite + 1) {
			t.Fatal("an open connection taken for closed")
		}
	}); n != 0 {
		t.Fatalf("idle check: %v allocations", n)
	}

	close(closeNow)
	<-closed
	// Wait until the kernel has the broker's FIN.
	pk := newPeeker(c.(*conn).Conn)
	for pk.check() != peerGone {
		if ctx.Err() != nil {
			t.Fatal("the broker's close never showed")
		}
		time.Sleep(time.Millisecond)
	}
	frame := reqFrame(metadataReq(1), 3)
	n, err := c.Write(frame)
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("write to a connection the broker closed while idle: %d bytes, %v; want 0 bytes and an io.EOF", n, err)
	}
}

// TestIdleCheckBesideBlockedReader: the idle check of a write never waits
// for a goroutine blocked reading the connection. kgo starts its discard
// reader on an acks=0 produce connection right after the connection's
// setup, before the first produce; a check that took the socket's read
// lock held that first produce until the reader gave up (about 30 s, in a
// CI run that failed TestKfakeNoAckProduceAnswered).
func TestIdleCheckBesideBlockedReader(t *testing.T) {
	ln := loopbackListener(t)
	got := make(chan []byte, 2)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			return
		}
		defer s.Close()
		for {
			req, err := readFrame(s)
			if err != nil {
				return
			}
			got <- req
			if len(got) == 1 { // answer the first request only
				corr := int32(binary.BigEndian.Uint32(req[4:8]))
				if _, err := s.Write(respFrame(corr, nil, []byte{0, 0, 0, 0})); err != nil {
					return
				}
			}
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := dialIdleTest(ctx, t, ln.Addr().String())
	defer c.Close()
	first := reqFrame(metadataReq(1), 1)
	if _, err := c.Write(first); err != nil {
		t.Fatal(err)
	}
	resp := make([]byte, len(respFrame(1, nil, []byte{0, 0, 0, 0})))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatal(err)
	}
	<-got

	// A reader that blocks, as kgo's discard reader does.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		var b [1]byte
		_, _ = c.Read(b[:])
	}()
	// Let it block in the read: the socket has nothing for it.
	time.Sleep(50 * time.Millisecond)

	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write(reqFrame(metadataReq(1), 2))
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("write beside a blocked reader: %v", err)
		}
	case <-time.After(5 * time.Second):
		c.Close()
		t.Fatal("the write waited 5 s for a blocked reader")
	}
	select {
	case <-got:
	case <-ctx.Done():
		t.Fatal("the broker never got the second request")
	}
	c.Close()
	<-readerDone
}

// dialIdleTest dials addr through an interceptor with a memory store that
// idle-checks every write but the first.
func dialIdleTest(ctx context.Context, t *testing.T, addr string) net.Conn {
	t.Helper()
	ic, err := New(Config{Store: consistency.NewMemoryStore(), timing: timing{idleCheckAfter: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := ic.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// loopbackListener listens on a free loopback port until the test ends.
func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}
