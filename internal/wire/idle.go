package wire

import (
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// defaultIdleCheckAfter is how long a connection must have gone without a
// write before Write looks whether the broker closed it meanwhile
// (timing.idleCheckAfter). A connection written to more often than that
// would have shown a close on the read of its last answer; checking only
// idle ones keeps the check (one non-blocking syscall) off busy
// connections.
const defaultIdleCheckAfter = time.Millisecond

// idleClosed reports whether Write should refuse to write: the connection
// has been idle, nothing awaits an answer, and the broker closed it (or
// reset it) since. kgo does not read an idle connection, so without this it
// learns of the close only after writing the next request into it, and
// then fails that request (a produce backs off before its retry). Refused
// with nothing written, the request is retried at once on a new connection:
// kgo does that for any write that wrote 0 bytes, since no broker saw it.
//
// Only a connection no goroutine reads is checked: one that awaits an
// answer, or an acks=0 connection with kgo's discard reader, finds a close
// by its own read. kgo starts that reader before the connection's first
// acks=0 produce, which this check cannot tell; the peek therefore never
// waits for a reader (see peeker.check).
func (w *requestWriter) idleClosed(now int64) bool {
	last := w.lastWrite
	w.lastWrite = now
	if last == 0 || now-last < int64(w.i.timing.idleCheckAfter) || w.q.len() != 0 || w.noAck.Load() != 0 || w.wraw ||
		w.wbody != 0 || w.winHeader {
		return false
	}
	if w.dead.Load() {
		return true
	}
	if w.peek == nil {
		w.peek = newPeeker(w.Conn)
	}
	switch w.peek.check() {
	case peerGone:
		if w.debug {
			w.i.log(kgo.LogLevelDebug, "the broker closed the idle connection; refusing the write so that it is retried on a new connection", "addr", w.addr)
		}
		w.dead.Store(true)
		w.i.noteClose(w.addr)
		return true
	default:
		return false
	}
}

// idleClosedError is Write's error for a connection found closed by the
// broker while idle. It matches io.EOF, as the read kgo would otherwise
// have failed with, so kgo treats it as a retryable connection failure.
func (w *requestWriter) idleClosedError() error {
	return fmt.Errorf("wire: %s closed the idle connection before the request was written: %w", w.addr, io.EOF)
}

// peer states of peerState.
const (
	peerUnknown = iota // open, unreadable, or not a socket we can ask
	peerGone           // the peer closed or reset the connection
)

// socketOf returns the socket under c, looking through TLS.
func socketOf(c net.Conn) net.Conn {
	for {
		nc, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return c
		}
		c = nc.NetConn()
	}
}
