package wire

import (
	"errors"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/kconsist/kconsist/consistency"
)

// TestInflightsRing: FIFO order across wrap-around, a full ring makes the
// writer wait for the reader, and a dead connection ends the wait.
func TestInflightsRing(t *testing.T) {
	var q inflights
	alive := func() error { return nil }
	for round := range 3 { // wraps the ring
		for k := range maxInflight {
			if err := q.push(inflight{corr: int32(round*1000 + k)}, alive); err != nil {
				t.Fatal(err)
			}
		}
		if q.len() != maxInflight {
			t.Fatalf("len = %d", q.len())
		}
		for k := range maxInflight {
			e, ok := q.peek()
			if !ok || e.corr != int32(round*1000+k) {
				t.Fatalf("round %d: got %v %v, want corr %d", round, e, ok, round*1000+k)
			}
			q.pop()
		}
		if _, ok := q.peek(); ok {
			t.Fatal("ring not empty")
		}
	}

	synctest.Test(t, func(t *testing.T) {
		var q inflights
		for k := range maxInflight {
			_ = q.push(inflight{corr: int32(k)}, alive)
		}
		done := make(chan error, 1)
		go func() { done <- q.push(inflight{corr: 999}, alive) }()
		synctest.Wait() // the writer waits for room
		select {
		case <-done:
			t.Fatal("push into a full ring did not wait")
		default:
		}
		q.pop() // the reader makes room
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		var dead atomic.Bool
		stop := func() error {
			if dead.Load() {
				return net.ErrClosed
			}
			return nil
		}
		go func() { done <- q.push(inflight{}, stop) }()
		synctest.Wait()
		dead.Store(true)
		if err := <-done; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("push on a dead connection: %v", err)
		}
	})
}

// TestWriteFullRingHonoursDeadline: with the ring full, a Write waits for
// room like a blocked socket write, and ends at its write deadline.
func TestWriteFullRingHonoursDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _, _ := newTestConn(t, consistency.NewMemoryStore(), nil)
		frame := reqFrame(metadataReq(12), 1)
		for range maxInflight {
			if _, err := c.Write(frame); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err := c.Write(frame)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("write into a full ring: %v", err)
		}
		if waited := time.Since(start); waited != 20*time.Millisecond {
			t.Fatalf("waited %v, want the 20ms to the deadline", waited)
		}
	})
}

// TestConnMemory: what the interceptor keeps per connection stays small
// beside franz-go's own, for a client holds a connection or more per
// broker. The in-flight ring was 1,024 entries (26 KiB a connection).
func TestConnMemory(t *testing.T) {
	if n := unsafe.Sizeof(conn{}); n > 8<<10 {
		t.Fatalf("a conn is %d bytes, want at most 8 KiB", n)
	}
}
