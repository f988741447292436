package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/kconsist/kconsist/consistency"
)

// inflight is a request whose response is still to come.
type inflight struct {
	corr         int32
	flexible     bool  // the response header is flexible
	raw          bool  // SaslHandshake v0: raw SASL frames follow its response
	watched      bool  // its answer is watched for a hold (see held.go)
	sent         int64 // token the request carried, -1 for none
	key, version int16
	size         int32 // the request frame's size, as written by the caller
}

// inflights is the per-connection FIFO of requests awaiting responses. kgo
// reads responses in request order, so only the head can be answered next.
//
// It is a single-producer, single-consumer ring: the writing goroutine
// pushes, the reading goroutine peeks and pops, and neither takes a lock.
// When maxInflight requests await answers the writer waits for the reader,
// as TCP would make it wait anyway; a failed connection ends the wait.
type inflights struct {
	buf  [maxInflight]inflight
	head atomic.Uint64 // next to pop; written by the reader only
	tail atomic.Uint64 // next to push; written by the writer only
}

// maxInflight bounds the requests awaiting answers on one connection (3
// KiB of ring, a connection's largest piece of the interceptor's memory:
// a client of many brokers has many connections). kgo keeps a handful in
// flight per connection (one or five produce requests, one fetch); only a
// flood of concurrent requests to one broker fills it, and the writer then
// waits for answers, as a full socket buffer would make it: a broker
// handles one request of a connection at a time, so 128 already keep its
// queue from ever running dry.
const maxInflight = 128

// push appends e, waiting while the ring is full; stop ends the wait with
// its error (the connection died, the write deadline passed).
func (q *inflights) push(e inflight, stop func() error) error {
	t := q.tail.Load()
	for t-q.head.Load() == maxInflight {
		if err := stop(); err != nil {
			return err
		}
		time.Sleep(50 * time.Microsecond)
	}
	q.buf[t%maxInflight] = e
	q.tail.Store(t + 1)
	return nil
}

func (q *inflights) peek() (inflight, bool) {
	h := q.head.Load()
	if h == q.tail.Load() {
		return inflight{}, false
	}
	return q.buf[h%maxInflight], true
}

func (q *inflights) pop() { q.head.Add(1) }

func (q *inflights) len() int { return int(q.tail.Load() - q.head.Load()) }

// each calls fn for the requests in flight, oldest first; reader only.
func (q *inflights) each(fn func(inflight) bool) {
	for h, t := q.head.Load(), q.tail.Load(); h < t; h++ {
		if !fn(q.buf[h%maxInflight]) {
			return
		}
	}
}

// maxHeldFrame bounds a response held back for INCONSISTENT_METADATA
// inspection; larger frames (only fetches come close) pass uninspected.
const maxHeldFrame = 64 << 20

// maxKeptHold is the largest buffer of a held frame a connection keeps for
// the next one; a larger one is dropped once kgo has read it.
const maxKeptHold = 64 << 10

// conn intercepts one broker connection. It is two halves over one link:
//
//   - the requestWriter, owned by the goroutine that calls Write (kgo
//     writes each connection's requests from one goroutine), parses and
//     stamps requests and pushes what answers to expect;
//   - the responseReader, owned by the goroutine that calls Read (kgo reads
//     each connection's responses from another), parses response headers,
//     advances the store and holds the frames it must inspect;
//   - the link, which both see: what was fixed at the dial, the in-flight
//     FIFO, and a few atomics. Nothing else is shared.
//
// Like a bufio.Reader and a bufio.Writer over one socket, Write must not be
// called concurrently with Write, nor Read with Read (a frame protocol
// cannot interleave concurrent writers anyway; kgo's connection setup runs
// before either goroutine starts). Close and the deadlines are safe from
// anywhere.
type conn struct {
	link
	w requestWriter
	r responseReader
}

// link is what both halves of a conn share. The fields above q are set at
// the dial and only read afterwards; q follows the one rule of inflights
// (the writer pushes, the reader peeks and pops); the rest are atomics.
type link struct {
	net.Conn
	i     *Interceptor
	addr  string
	debug bool // the logger wanted debug logs when the connection opened
	// view is the Emulator's view of this broker, nil without one: the
	// address's at the dial, the node's once kgo's ApiVersions v5 named
	// it (see Emulator.bind).
	view atomic.Pointer[brokerView]
	// moved, when not nil, is the node this connection was redirected to
	// (see relocate.go): its first request must name it.
	moved *moved

	q inflights // requests awaiting answers, oldest first

	wdl            atomic.Int64  // write deadline, unix nanoseconds; 0 for none
	rdl            atomic.Int64  // read deadline, unix nanoseconds; 0 for none
	dead           atomic.Bool   // the connection failed or was closed: no answer will come
	noAck          atomic.Uint64 // the last acks=0 produce written (see noack.go)
	movedAnnounced atomic.Bool   // the Relocator was told (see relocate.go)
	movedOK        atomic.Bool   // the broker answered the ApiVersions v5 naming the node without error (see relocate.go)
	held           heldWatch     // requests held for a token (see held.go)
	writes         writeNotes    // metadata writes awaiting answers (see shown.go)
}

// requestWriter is the writing half of a conn; see conn.
type requestWriter struct {
	*link

	wh        reqHeader
	wpend     []byte // header bytes held while a header spans writes
	winHeader bool   // wpend holds an incomplete header
	wbody     int    // body bytes of the current frame still to pass
	wrawNext  bool   // raw SASL follows the current frame
	wraw      bool   // raw SASL frames: pass everything through
	scratch   []byte // rewritten header
	field     []byte // tag 0 field encoding fieldFor
	fieldFor  consistency.Token
	out       [][]byte
	bufs      net.Buffers
	coal      []byte // a small write, copied together (see coalesceMax)
	frame     []byte // the whole frame of the request being stamped, when one write carried it

	lastWrite int64   // unix nanoseconds of the last Write (see idle.go)
	peek      *peeker // made at the first idle check
}

// responseReader is the reading half of a conn; see conn.
type responseReader struct {
	*link

	rh      respHeader
	cur     inflight // the request the frame being parsed answers
	haveCur bool
	hb      []byte // header bytes held while a header spans reads
	rbody   int    // body bytes of the current frame still to come
	rraw    bool   // raw SASL frames: stop parsing
	rerr    error  // sticky: the connection failed
	pendErr error  // an error of the underlying conn, returned once after its bytes
	stash   []byte // bytes read but not scanned yet
	stashAt int
	release []byte // scanned bytes to hand out before anything else
	holding bool
	hold    []byte // body of the frame under inspection
	holdFor inflight
	holdAt  int64 // token in the held frame's header
	holdTok bool  // the held frame's header carried a token
	// holdScan: the frame is held only to look for INCONSISTENT_METADATA
	// (see mayBeInconsistent); without the code's bytes it goes on as is.
	holdScan bool
	// lastAt is the token the last response header on this connection
	// carried, 0 before any (a KIP-1243 broker's applied offset): a
	// broker that closes the connection under a request carrying a token
	// beyond it is taken to be behind (see closedBehind).
	lastAt int64
	sawAt  bool
}

func newConn(i *Interceptor, c net.Conn, addr string, mv *moved) *conn {
	cn := &conn{link: link{Conn: c, i: i, addr: addr, debug: i.debug(), moved: mv}}
	if i.emu != nil {
		cn.view.Store(i.emu.view(addr))
	}
	cn.w.link, cn.r.link = &cn.link, &cn.link
	return cn
}

// Write parses the frames in p, stamps flexible request headers and sends
// them; see requestWriter.write. A write the broker's close or reset
// refused (EPIPE, ECONNRESET) is noted as the reader notes a close: kgo
// dials again at once for a write that failed, often before the reader
// has seen the close, and that dial must follow a node that moved (see
// relocate.go) as one after the reader's would.
func (c *conn) Write(p []byte) (int, error) {
	n, err := c.w.write(p)
	if err != nil && !c.dead.Load() && writeRefused(err) {
		c.i.noteClose(c.addr)
	}
	return n, err
}

// writeRefused reports whether err, from a socket write, says the peer
// closed or reset the connection.
func writeRefused(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// Read hands kgo the response stream; see responseReader.read.
func (c *conn) Read(p []byte) (int, error) { return c.r.read(p) }

// coalesceMax is the largest write that flush copies into one buffer rather
// than hand to writev. On Linux loopback a writev of a stamped header and
// its body cost about 0.35µs more than one write of the same bytes, as
// much as copying a few KiB: small requests, the latency-bound ones, are
// copied; larger requests, produce batches mostly, go out from kgo's
// buffer untouched.
const coalesceMax = 4 << 10

// tagData returns the data of the single tagged field f (tag, size, data).
func tagData(f []byte) []byte {
	_, w := binary.Uvarint(f)
	if w <= 0 {
		return nil
	}
	_, w2 := binary.Uvarint(f[w:])
	if w2 <= 0 {
		return nil
	}
	return f[w+w2:]
}

// peerEnded reports whether err says the broker ended the connection, as
// opposed to a local close or a deadline.
func peerEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// stopWaiting ends a writer's wait for room in the in-flight ring when the
// connection died or its write deadline (kgo's write timeout, a canceled
// request context) passed, as a blocked socket write would end.
func (l *link) stopWaiting() error {
	if l.dead.Load() {
		return net.ErrClosed
	}
	if dl := l.wdl.Load(); dl != 0 && time.Now().UnixNano() >= dl {
		return os.ErrDeadlineExceeded
	}
	return nil
}

// SetWriteDeadline sets the socket's write deadline and remembers it for a
// wait in the in-flight ring.
func (l *link) SetWriteDeadline(t time.Time) error {
	l.wdl.Store(deadlineNanos(t))
	return l.Conn.SetWriteDeadline(t)
}

// SetReadDeadline sets the socket's read deadline and remembers it: the
// Emulator holds no answer past it.
func (l *link) SetReadDeadline(t time.Time) error {
	l.rdl.Store(deadlineNanos(t))
	return l.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines; see SetWriteDeadline.
func (l *link) SetDeadline(t time.Time) error {
	l.wdl.Store(deadlineNanos(t))
	l.rdl.Store(deadlineNanos(t))
	return l.Conn.SetDeadline(t)
}

func nanosTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func deadlineNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Close closes the socket; a writer waiting for room in the in-flight ring
// gives up.
func (l *link) Close() error {
	l.dead.Store(true)
	l.announceMove() // a redirected connection closed before any answer
	return l.Conn.Close()
}
