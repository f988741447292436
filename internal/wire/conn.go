package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// inflight is a request whose response is still to come.
type inflight struct {
	corr         int32
	flexible     bool  // the response header is flexible
	raw          bool  // SaslHandshake v0: raw SASL frames follow its response
	sent         int64 // token the request carried, -1 for none
	key, version int16
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

// maxInflight bounds the requests awaiting answers on one connection (40
// KiB of ring). kgo keeps a handful in flight per connection; only a flood
// of concurrent admin requests to one broker comes near it.
const maxInflight = 1024

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

// conn intercepts one broker connection.
//
// Like a bufio.Reader and a bufio.Writer over one socket, it serves one
// writing and one reading goroutine: Write must not be called concurrently
// with Write, nor Read with Read. A frame protocol cannot interleave
// concurrent writers anyway, and kgo writes each connection's requests from
// one goroutine and reads its responses from another (its connection setup
// runs before either starts). The two sides meet only in the in-flight
// FIFO, which has its own mutex; Close and deadlines go to the socket and
// are safe from anywhere.
type conn struct {
	net.Conn
	i    *Interceptor
	addr string

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

	q     inflights
	debug bool         // the logger wanted debug logs when the connection opened
	wdl   atomic.Int64 // write deadline, unix nanoseconds; 0 for none
	rdl   atomic.Int64 // read deadline, unix nanoseconds; 0 for none
	dead  atomic.Bool  // the connection failed or was closed: no answer will come

	noAck atomic.Uint64 // the last acks=0 produce written (see noack.go)

	lastWrite int64   // unix nanoseconds of the last Write (see idle.go)
	peek      *peeker // made at the first idle check

	// moved, when not nil, is the node this connection was redirected to
	// (see relocate.go): its first request must name it.
	moved          *moved
	movedChecked   bool        // the first request named it
	movedAnnounced atomic.Bool // the Relocator was told

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

	view *brokerView // the Emulator's view of this broker, nil without one
}

func newConn(i *Interceptor, c net.Conn, addr string) *conn {
	cn := &conn{Conn: c, i: i, addr: addr, debug: i.debug()}
	if i.emu != nil {
		cn.view = i.emu.view(addr)
	}
	return cn
}

// Write parses the frames in p, stamps flexible request headers and sends
// the rewritten headers and the untouched bodies: a small stamped frame
// built in one buffer and written with one write, a larger one with one
// writev (see coalesceMax), an unstamped one as it came. Frames may span
// writes and one write may carry several frames.
func (c *conn) Write(p []byte) (int, error) {
	if c.idleClosed(time.Now().UnixNano()) {
		return 0, c.idleClosedError()
	}
	if c.moved != nil && !c.movedChecked {
		if err := c.checkMoved(p); err != nil {
			return 0, err
		}
	}
	// kgo writes each request whole, in one call: such a frame needs no
	// state kept across writes.
	if c.wbody == 0 && !c.winHeader && !c.wraw && len(p) <= coalesceMax {
		if parseRequest(p, &c.wh) == nil && 4+int(c.wh.size) == len(p) {
			if c.wh.key == apiVersionsKey && c.i.reloc.r != nil {
				c.noteAPIVersions(p)
			}
			return c.writeFrame(p)
		}
	}
	total := len(p)
	c.out = c.out[:0]
	for len(p) > 0 {
		if c.wbody > 0 {
			k := min(c.wbody, len(p))
			c.out = append(c.out, p[:k])
			p, c.wbody = p[k:], c.wbody-k
			if c.wbody == 0 && c.wrawNext {
				c.wraw = true
			}
			continue
		}
		if c.wraw {
			c.out = append(c.out, p)
			break
		}
		// A new header reuses wpend and scratch, which earlier entries
		// of out may point into.
		if err := c.flush(); err != nil {
			return 0, err
		}
		if !c.winHeader {
			c.wpend = c.wpend[:0]
		}
		var src []byte
		if !c.winHeader {
			err := parseRequest(p, &c.wh)
			if err == errShort {
				if len(p) > maxHeldHeader {
					return 0, malformed("request header longer than %d bytes", maxHeldHeader)
				}
				c.wpend = append(c.wpend, p...)
				c.winHeader = true
				break
			}
			if err != nil {
				return 0, err
			}
			src, p = p[:c.wh.need], p[c.wh.need:]
		} else {
			old := len(c.wpend)
			take := min(len(p), maxHeldHeader-old)
			c.wpend = append(c.wpend, p[:take]...)
			err := parseRequest(c.wpend, &c.wh)
			if err == errShort {
				if take < len(p) {
					return 0, malformed("request header longer than %d bytes", maxHeldHeader)
				}
				break
			}
			if err != nil {
				return 0, err
			}
			c.winHeader = false
			src, p = c.wpend[:c.wh.need], p[c.wh.need-old:]
		}
		hdr, stamped, err := c.stamp(c.scratch[:0], src)
		if err != nil {
			return 0, err
		}
		if stamped {
			c.scratch = hdr
		} else {
			hdr = src[:c.wh.hdrLen]
		}
		c.out = append(c.out, hdr)
		if c.wh.need > c.wh.hdrLen {
			c.out = append(c.out, src[c.wh.hdrLen:])
		}
		c.wbody = 4 + int(c.wh.size) - c.wh.need
		c.wrawNext = c.wh.key == saslHandshakeKey && c.wh.version == 0
		if c.wbody == 0 && c.wrawNext {
			c.wraw = true
		}
	}
	if err := c.flush(); err != nil {
		return 0, err
	}
	return total, nil
}

// writeFrame sends p, one whole small request frame that c.wh describes:
// stamped, it is built in the one-write buffer (see coalesceMax); else it
// goes out as kgo wrote it.
func (c *conn) writeFrame(p []byte) (int, error) {
	out, stamped, err := c.stamp(c.coal[:0], p)
	if err != nil {
		clear(out) // a stamped header, when the in-flight ring refused it
		return 0, err
	}
	c.wraw = c.wh.key == saslHandshakeKey && c.wh.version == 0
	if stamped {
		out = append(out, p[c.wh.hdrLen:]...)
		c.coal = out
		_, err = c.Conn.Write(out)
		clear(out) // keep no copy of a request (SASL frames carry secrets)
	} else {
		_, err = c.Conn.Write(p)
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// coalesceMax is the largest write that flush copies into one buffer rather
// than hand to writev. On Linux loopback a writev of a stamped header and
// its body cost about 0.35µs more than one write of the same bytes, as
// much as copying a few KiB: small requests, the latency-bound ones, are
// copied; larger requests, produce batches mostly, go out from kgo's
// buffer untouched.
const coalesceMax = 4 << 10

func (c *conn) flush() error {
	if len(c.out) == 0 {
		return nil
	}
	n := 0
	for _, b := range c.out {
		n += len(b)
	}
	var err error
	switch {
	case len(c.out) == 1:
		_, err = c.Conn.Write(c.out[0])
	case n <= coalesceMax:
		c.coal = c.coal[:0]
		for _, b := range c.out {
			c.coal = append(c.coal, b...)
		}
		_, err = c.Conn.Write(c.coal)
		clear(c.coal) // keep no copy of a request (SASL frames carry secrets)
	default:
		c.bufs = c.out
		_, err = c.bufs.WriteTo(c.Conn)
	}
	clear(c.out) // do not keep the caller's buffers alive
	c.out = c.out[:0]
	if !c.winHeader {
		// A header that came in pieces was held with whatever followed
		// it in the same write, body bytes included.
		clear(c.wpend)
		c.wpend = c.wpend[:0]
	}
	return err
}

// stamp notes the parsed request src in the in-flight FIFO when a response
// will follow (an acks=0 produce only in c.noAck, see noack.go). When the request is to carry the store's token, it appends
// the rewritten header to dst and reports true; else the header goes out as
// the caller wrote it.
func (c *conn) stamp(dst, src []byte) ([]byte, bool, error) {
	h := &c.wh
	stamped := false
	sent := int64(-1)
	cur := c.i.store.Load()
	if c.view != nil {
		waited, err := c.i.emu.beforeWrite(c.view, h.key, cur, nanosTime(c.wdl.Load()), c.stopWaiting)
		if err != nil {
			return dst, false, err
		}
		if waited {
			cur = c.i.store.Load() // it may have moved, or healed, meanwhile
		}
	}
	if h.flexible {
		switch {
		case !cur.IsUnknown():
			if int64(h.size)+1024 > math.MaxInt32 {
				return dst, false, malformed("request frame of %d bytes is too large to stamp", h.size)
			}
			if cur != c.fieldFor { // encoded once per token, not per request
				c.field = appendStateField(c.field[:0], cur.ClusterID(), cur.Offset())
				c.fieldFor = cur
			}
			sent = cur.Offset()
			dst = appendStamped(dst, src, h, c.field)
			stamped = true
			c.i.stamped.Add(1)
			if c.debug {
				c.i.log(kgo.LogLevelDebug, "stamped consistency token", "addr", c.addr, "key", h.key, "version", h.version, "token", cur.String())
			}
		case h.tag0End > 0: // kept as the caller wrote it
			if s, err := ParseState(tagData(src[h.fieldsAt:h.tag0End])); err == nil {
				sent = s.Token
			}
		}
	}
	if h.expectsAnswer {
		err := c.q.push(inflight{
			corr:     h.corr,
			flexible: responseFlexible(h.key, h.version),
			raw:      h.key == saslHandshakeKey && h.version == 0,
			sent:     sent,
			key:      h.key,
			version:  h.version,
		}, c.stopWaiting)
		if err != nil {
			return dst, false, err
		}
	} else {
		c.noteNoAck(h)
		c.announceMove() // no answer will come to wait for
	}
	return dst, stamped, nil
}

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

// Read hands kgo the response stream unchanged. Bytes are read straight into
// p and scanned there; only a header split across reads is copied, and only
// a frame that may carry INCONSISTENT_METADATA is held back whole.
func (c *conn) Read(p []byte) (int, error) {
	for {
		if len(c.release) > 0 {
			n := copy(p, c.release)
			c.release = c.release[n:]
			return n, nil
		}
		if c.rerr != nil {
			return 0, c.rerr
		}
		if len(p) == 0 {
			return 0, nil
		}
		// Bytes already read come before the error that ended them: a
		// socket may return the last bytes and io.EOF together (tls.Conn
		// does when close_notify follows a record).
		if c.holding {
			if err := c.fillHold(); err != nil {
				c.fail(err)
			}
			continue
		}
		var n, d int
		var err error
		if c.stashAt >= len(c.stash) && c.pendErr != nil {
			err := c.pendErr
			c.pendErr = nil
			return 0, err
		}
		if c.stashAt < len(c.stash) {
			n = copy(p, c.stash[c.stashAt:])
			d, err = c.scan(p[:n])
			c.stashAt += d
			if c.stashAt == len(c.stash) {
				c.stash, c.stashAt = c.stash[:0], 0
			}
		} else {
			var rerr error
			n, rerr = c.Conn.Read(p)
			if n == 0 {
				if rerr != nil {
					if !c.dead.Load() && peerEnded(rerr) {
						c.peerClosed()
						c.i.noteClose(c.addr)
					}
					c.dead.Store(true)
				}
				return 0, rerr
			}
			c.pendErr = rerr
			d, err = c.scan(p[:n])
			if d < n && err == nil {
				c.stash = append(c.stash[:0], p[d:n]...)
				c.stashAt = 0
			}
		}
		if err != nil {
			c.fail(err)
		}
		if d > 0 {
			return d, nil
		}
	}
}

// scan runs the response parser over b, bytes about to be handed to kgo. It
// returns how many may be handed over now: all of them, or fewer when a
// frame must be held back or the stream is bad from that frame on.
func (c *conn) scan(b []byte) (int, error) {
	pos := 0
	for pos < len(b) {
		if c.rraw {
			return len(b), nil
		}
		if c.rbody > 0 {
			k := min(c.rbody, len(b)-pos)
			pos += k
			c.rbody -= k
			continue
		}
		hdr := b[pos:]
		old := len(c.hb)
		if old > 0 {
			take := min(len(b)-pos, maxHeldHeader-old)
			c.hb = append(c.hb, b[pos:pos+take]...)
			hdr = c.hb
		}
		if err := parseResponseStart(hdr, &c.rh); err != nil {
			if err != errShort {
				return pos, err
			}
			if old == 0 {
				c.hb = append(c.hb, hdr...)
			}
			return len(b), nil
		}
		if !c.haveCur { // take the request answered now, keep it while the header lasts
			head, ok := c.q.peek()
			switch {
			case ok && head.corr == c.rh.corr:
				c.q.pop()
				c.cur = head
			case c.noAckAnswer(c.rh.corr, &c.cur):
				// An acks=0 produce answered anyway; the head still waits.
			case ok:
				return pos, malformed("response correlation id %d, expected %d", c.rh.corr, head.corr)
			default:
				return pos, malformed("response with correlation id %d answers no request in flight", c.rh.corr)
			}
			c.haveCur = true
		}
		req := &c.cur // stays put until the next frame's header
		if err := parseResponse(hdr, req.flexible, &c.rh); err != nil {
			if err != errShort {
				return pos, err
			}
			if len(c.hb) >= maxHeldHeader {
				return pos, malformed("response header longer than %d bytes", maxHeldHeader)
			}
			if old == 0 {
				c.hb = append(c.hb, hdr...)
			}
			return len(b), nil
		}
		c.haveCur = false
		c.i.read.Add(1)
		frameStart := pos
		pos += c.rh.hdrLen - old
		c.rbody = 4 + int(c.rh.size) - c.rh.hdrLen
		err := c.observe(req, &c.rh)
		c.hb = c.hb[:0] // after observe: the header state may alias hb
		if err != nil {
			return frameStart, err
		}
		if c.moved != nil && !isSetupKey(req.key) {
			c.announceMove()
		}
		if req.raw {
			c.rraw = true
		}
		if c.shouldHold(req, &c.rh) {
			c.holding, c.holdFor, c.holdAt = true, *req, c.rh.state.Token
			c.holdTok = c.rh.hasState && len(c.rh.state.ClusterID) > 0
			c.hold = c.hold[:0]
			return pos, nil
		}
		if c.view != nil {
			c.i.emu.afterRead(c.view, &answer{key: req.key, version: req.version, flexible: req.flexible,
				token: c.rh.hasState && len(c.rh.state.ClusterID) > 0})
		}
	}
	return pos, nil
}

// observe applies a response header's consistency state: a misroute check,
// then an advance of the store. Steady state it neither allocates nor
// writes: Context values are only built when the store moves.
func (c *conn) observe(req *inflight, h *respHeader) error {
	if !h.hasState || len(h.state.ClusterID) == 0 {
		return nil
	}
	got := h.state.ClusterID
	cur := c.i.store.Load()
	want := cur.ClusterID()
	pinned := ""
	if c.i.expected != nil {
		if pinned = c.i.expected(); pinned != "" {
			want = pinned
		}
	}
	if want != "" && string(got) != want {
		if pinned != "" || c.i.adopt == nil || !c.i.adopt(c.addr, string(got)) {
			return c.misroute(want, string(got))
		}
		// Only a store still on the old cluster is reset, atomically: a
		// check and a separate reset could wipe a newer token another
		// connection stored for the new cluster meanwhile.
		consistency.ResetCluster(c.i.store, want)
		c.i.log(kgo.LogLevelWarn, "bootstrap server answers for another cluster; consistency store reset", "addr", c.addr, "from_cluster", want, "to_cluster", string(got))
		cur = consistency.Unknown()
	}
	token := h.state.Token
	if token < 0 || (!cur.IsUnknown() && token <= cur.Offset()) {
		return nil
	}
	next, err := consistency.Of(string(got), token)
	if err != nil {
		return malformed("response consistency state: %v", err)
	}
	now, err := c.i.store.Advance(next)
	if err != nil { // the store adopted another cluster meanwhile
		return c.misroute(now.ClusterID(), string(got))
	}
	if now != cur {
		c.i.advanced.Add(1)
		if c.i.observer != nil {
			c.i.observer.OnTokenAdvanced(cur, now)
		}
		if c.debug {
			c.i.log(kgo.LogLevelDebug, "advanced consistency token", "addr", c.addr, "key", req.key, "from", cur.String(), "to", now.String())
		}
	}
	return nil
}

func (c *conn) misroute(want, got string) error {
	c.i.misroutes.Add(1)
	c.i.log(kgo.LogLevelWarn, "response names another cluster; closing the connection", "addr", c.addr, "expected_cluster", want, "got_cluster", got)
	if c.i.observer != nil {
		c.i.observer.OnMisroute(c.addr, want, got)
	}
	return &MisrouteError{Addr: c.addr, Expected: want, Got: got}
}

// shouldHold reports whether the frame whose header was just parsed may
// carry INCONSISTENT_METADATA: a KIP-1243 broker only answers it when it is
// behind the token the request carried, which its header then shows.
//
// ApiVersions answers, one per connection, are always held: see
// rewriteAPIVersionsError.
func (c *conn) shouldHold(req *inflight, h *respHeader) bool {
	if req.key == apiVersionsKey {
		return c.rbody >= 2 && c.rbody <= maxHeldFrame
	}
	if c.view != nil && c.rbody > 0 && c.rbody <= maxHeldFrame && c.i.emu.holds(c.view, req.key, h.hasState) {
		return true
	}
	if req.key == metadataKey && c.pinned() != "" {
		return c.rbody > 0 && c.rbody <= maxHeldFrame
	}
	return req.sent >= 0 && h.hasState && h.state.Token >= 0 && h.state.Token < req.sent &&
		c.rbody > 0 && c.rbody <= maxHeldFrame && kmsg.ResponseForKey(req.key) != nil
}

// fillHold reads the rest of the held frame and decides its fate.
func (c *conn) fillHold() error {
	if cap(c.hold) < c.rbody {
		c.hold = make([]byte, 0, c.rbody)
	}
	for len(c.hold) < c.rbody {
		if c.stashAt < len(c.stash) {
			k := min(c.rbody-len(c.hold), len(c.stash)-c.stashAt)
			c.hold = append(c.hold, c.stash[c.stashAt:c.stashAt+k]...)
			c.stashAt += k
			if c.stashAt == len(c.stash) {
				c.stash, c.stashAt = c.stash[:0], 0
			}
			continue
		}
		if c.pendErr != nil {
			return c.pendErr
		}
		n, err := c.Conn.Read(c.hold[len(c.hold):c.rbody])
		c.hold = c.hold[:len(c.hold)+n]
		if err != nil {
			if len(c.hold) < c.rbody {
				return err
			}
			c.pendErr = err // after the frame
		}
	}
	c.holding, c.rbody = false, 0
	body, err := c.inspect(c.holdFor, c.holdAt, c.hold)
	if err != nil {
		return err
	}
	c.release = body
	return nil
}

// pinned returns the cluster the interceptor is pinned to, or "".
func (c *conn) pinned() string {
	if c.i.expected == nil {
		return ""
	}
	return c.i.expected()
}

// peerEnded reports whether err says the broker ended the connection, as
// opposed to a local close or a deadline.
func peerEnded(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// peerClosed tells a RejectObserver that the connection ended under a
// request that carried a token. A KIP-1243 broker closes the connection,
// without an answer, of a request naming another cluster than its own: when
// that happens on a bootstrap server, the cluster behind it may have
// changed.
func (c *conn) peerClosed() {
	ro, ok := c.i.observer.(RejectObserver)
	if !ok || c.rerr != nil {
		return
	}
	stamped := false
	c.q.each(func(e inflight) bool {
		stamped = e.sent >= 0
		return !stamped
	})
	if c.haveCur && c.cur.sent >= 0 {
		stamped = true
	}
	if stamped {
		ro.OnStampRejected(c.addr)
	}
}

func (c *conn) fail(err error) {
	if c.rerr == nil {
		c.rerr = err
		c.dead.Store(true)
		c.Conn.Close()
	}
}

// stopWaiting ends a writer's wait for room in the in-flight ring when the
// connection died or its write deadline (kgo's write timeout, a canceled
// request context) passed, as a blocked socket write would end.
func (c *conn) stopWaiting() error {
	if c.dead.Load() {
		return net.ErrClosed
	}
	if dl := c.wdl.Load(); dl != 0 && time.Now().UnixNano() >= dl {
		return os.ErrDeadlineExceeded
	}
	return nil
}

// SetWriteDeadline sets the socket's write deadline and remembers it for a
// wait in the in-flight ring.
func (c *conn) SetWriteDeadline(t time.Time) error {
	c.wdl.Store(deadlineNanos(t))
	return c.Conn.SetWriteDeadline(t)
}

// SetReadDeadline sets the socket's read deadline and remembers it: the
// Emulator holds no answer past it.
func (c *conn) SetReadDeadline(t time.Time) error {
	c.rdl.Store(deadlineNanos(t))
	return c.Conn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines; see SetWriteDeadline.
func (c *conn) SetDeadline(t time.Time) error {
	c.wdl.Store(deadlineNanos(t))
	c.rdl.Store(deadlineNanos(t))
	return c.Conn.SetDeadline(t)
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
func (c *conn) Close() error {
	c.dead.Store(true)
	c.announceMove() // a redirected connection closed before any answer
	return c.Conn.Close()
}
