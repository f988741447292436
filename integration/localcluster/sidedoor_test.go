package localcluster

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/net/nettest"
)

// TestSideDoors: kfake answers on its TCP address and through its in-memory
// side door, and the gateway uses the side door.
func TestSideDoors(t *testing.T) {
	c, err := New(Brokers(2))
	require.NoError(t, err)
	defer c.Close()
	for _, addr := range c.KfakeAddrs() {
		conn, err := c.doors.dial(context.Background(), "tcp", addr)
		require.NoError(t, err)
		require.Equal(t, "mem", conn.RemoteAddr().Network(), "the side door is in memory")
		conn.Close()
	}
	// kfake still serves TCP: a plain client straight to kfake.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.KfakeAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.Ping(ctx))
}

// TestSideDoorClosed: dialing a closed cluster's side door fails at once.
func TestSideDoorClosed(t *testing.T) {
	c, err := New(Brokers(1))
	require.NoError(t, err)
	addr := c.KfakeAddrs()[0]
	c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = c.doors.dial(ctx, "tcp", addr)
	require.ErrorIs(t, err, net.ErrClosed)
}

// TestMemConn runs the x/net conformance suite for net.Conn on the
// in-memory pipe: reads and writes of every size, deadlines, concurrent
// close, and what each end sees when the other closes.
func TestMemConn(t *testing.T) {
	nettest.TestConn(t, func() (c1, c2 net.Conn, stop func(), err error) {
		a, b := memPipe(memAddr("a"), memAddr("b"))
		return a, b, func() { a.Close(); b.Close() }, nil
	})
}

// TestMemConnBuffered: a write never waits for the reader, the reader sees
// what was written before the writer closed, then io.EOF; writes to a
// closed reader fail.
func TestMemConnBuffered(t *testing.T) {
	a, b := memPipe(memAddr("a"), memAddr("b"))
	for range 100 {
		n, err := a.Write([]byte("0123456789"))
		require.NoError(t, err)
		require.Equal(t, 10, n)
	}
	require.NoError(t, a.Close())
	got, err := io.ReadAll(b)
	require.NoError(t, err)
	require.Len(t, got, 1000)

	_, err = b.Write([]byte("x"))
	require.ErrorIs(t, err, errBrokenPipe)
	require.NoError(t, b.Close())
	_, err = b.Read(make([]byte, 1))
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, b.Close(), net.ErrClosed)
}

// TestMemConnDeadline: a read deadline in the past fails reads at once, a
// later one fails a blocked read when it passes, and clearing it lets a
// read wait again.
func TestMemConnDeadline(t *testing.T) {
	a, b := memPipe(memAddr("a"), memAddr("b"))
	defer a.Close()
	defer b.Close()
	require.NoError(t, b.SetReadDeadline(time.Now().Add(-time.Second)))
	_, err := b.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout())

	// start before the deadline is set: a loaded machine may pause the
	// test between the two (13.7 ms of a 20 ms deadline seemed left).
	start := time.Now()
	require.NoError(t, b.SetReadDeadline(start.Add(20*time.Millisecond)))
	_, err = b.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "the read ended before its deadline")

	require.NoError(t, b.SetReadDeadline(time.Time{}))
	go func() {
		time.Sleep(10 * time.Millisecond)
		a.Write([]byte("y"))
	}()
	buf := make([]byte, 1)
	n, err := b.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "y", string(buf[:n]))
}

// TestMemConnConcurrentReaders: the wake-up token is passed on, so a second
// blocked reader gets the bytes one write queued for both, and every
// blocked reader sees io.EOF when the peer closes.
func TestMemConnConcurrentReaders(t *testing.T) {
	readers := func(c net.Conn, n int) chan error {
		out := make(chan error, n)
		for range n {
			go func() {
				_, err := c.Read(make([]byte, 1))
				out <- err
			}()
		}
		time.Sleep(50 * time.Millisecond) // let them block
		return out
	}
	wait := func(t *testing.T, got chan error, want error) {
		for i := range cap(got) {
			select {
			case err := <-got:
				require.Equal(t, want, err)
			case <-time.After(5 * time.Second):
				t.Fatalf("reader %d still blocked", i)
			}
		}
	}

	a, b := memPipe(memAddr("a"), memAddr("b"))
	defer b.Close()
	got := readers(b, 2)
	_, err := a.Write([]byte("xy"))
	require.NoError(t, err)
	wait(t, got, nil)

	got = readers(b, 2)
	require.NoError(t, a.Close())
	wait(t, got, io.EOF)
}
