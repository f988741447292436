package localcluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds request and response frames; Kafka's default
// socket.request.max.bytes is 100 MiB.
const maxFrame = 100 << 20

// frameChunk is the most readFrame allocates for a frame before its bytes
// arrive; it covers the common frame in one allocation.
const frameChunk = 64 << 10

// pipelineDepth bounds the requests a connection may have in flight through
// the gateway; the client blocks beyond it, as on a busy broker.
const pipelineDepth = 64

var (
	errFrameTooLarge  = errors.New("frame too large")
	errClusterIDCheck = errors.New("request names another cluster")
	errCorrelation    = errors.New("response correlation id does not match the request")
	errIdle           = errors.New("connection idle for longer than the idle timeout")
	// errBehind ends a connection whose request the broker will not wait
	// for and cannot answer INCONSISTENT_METADATA (see BehindAnswer).
	errBehind = errors.New("broker behind the request's consistency token")
)

// gateway listens on its own loopback port in front of one kfake broker.
// Connections are served by the broker the gateway points at when they are
// accepted: its own, or another one after Repoint.
type gateway struct {
	c    *Cluster
	node int32
	ln   net.Listener
	addr string
	host string
	port int32

	route atomic.Pointer[broker]

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func newGateway(c *Cluster, b *broker) (*gateway, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	host, port, err := splitHostPort(ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	g := &gateway{c: c, node: b.node, ln: ln, addr: ln.Addr().String(), host: host, port: port, conns: make(map[*conn]struct{})}
	g.route.Store(b)
	return g, nil
}

func (g *gateway) serve() {
	defer g.wg.Wait()
	for {
		nc, err := g.ln.Accept()
		if err != nil {
			return // closed
		}
		b := g.route.Load()
		b.c.stats.connections.Add(1)
		cn := &conn{
			b:       b,
			client:  nc,
			idle:    g.c.cfg.idleTimeout,
			start:   time.Now(),
			pending: make(chan *exchange, pipelineDepth),
			done:    make(chan struct{}),
		}
		cn.clientR = bufio.NewReaderSize(idleReader{cn}, 32<<10)
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			nc.Close()
			return
		}
		g.conns[cn] = struct{}{}
		g.wg.Add(1)
		g.mu.Unlock()
		go func() {
			defer g.wg.Done()
			cn.run()
			g.mu.Lock()
			delete(g.conns, cn)
			g.mu.Unlock()
		}()
	}
}

func (g *gateway) closeConns() {
	for cn := range g.conns {
		cn.close()
	}
}

func (g *gateway) close() {
	g.mu.Lock()
	g.closed = true
	g.closeConns()
	g.mu.Unlock()
	g.ln.Close()
}

func (g *gateway) repoint(b *broker) {
	g.mu.Lock()
	g.route.Store(b)
	g.closeConns()
	g.mu.Unlock()
}

// conn is one client connection and its upstream connection to kfake.
// readLoop reads requests and forwards them (or answers them itself);
// writeLoop answers in request order, reading kfake's responses as their
// turn comes.
type conn struct {
	b      *broker
	client net.Conn
	up     net.Conn
	// Buffered readers halve the read calls: a frame's size and body
	// usually arrive together.
	clientR *bufio.Reader
	upR     *bufio.Reader
	pending chan *exchange
	done    chan struct{}

	// idle is the idle timeout (connections.max.idle.ms): the connection
	// ends when the client has sent nothing, has nothing in flight and was
	// answered nothing for that long.
	idle     time.Duration
	start    time.Time    // the origin of lastSent, for a monotonic clock
	inflight atomic.Int32 // requests enqueued and not yet answered
	lastSent atomic.Int64 // when the last answer was written, since start

	mu     sync.Mutex // guards up and closed against close from the gateway
	closed bool
}

// exchange is one request in flight through a connection.
type exchange struct {
	key, version int16
	corr         int32
	// flexible is whether the response header is v1, where the token goes.
	// ApiVersions answers with header v0 at every version.
	flexible bool
	raw      bool // forward the response byte for byte
	// isLocal: the gateway answers with the body local and the header
	// token localTok, or, when localTok is -1, the broker's applied offset
	// at the time the answer is written (so a broker's tokens never
	// decrease).
	isLocal  bool
	local    []byte
	localTok int64
	// closeConn: instead of an answer, the connection is closed once the
	// answers before it are written (errBehind).
	closeConn bool
	body      []byte // the request body, after the header
	req       kmsg.Request
	// post rewrites the decoded response and returns the header token, or
	// -1 for the broker's applied offset at the time of answering.
	post    func(kmsg.Response) int64
	release func() // called once, when the exchange is over
}

func (x *exchange) done() {
	if x.release != nil {
		x.release()
		x.release = nil
	}
}

// request decodes the request body once, for handlers that look inside.
func (x *exchange) request() (kmsg.Request, error) {
	if x.req != nil {
		return x.req, nil
	}
	r := kmsg.RequestForKey(x.key)
	if r == nil {
		return nil, fmt.Errorf("unknown api key %d", x.key)
	}
	r.SetVersion(x.version)
	if err := r.ReadFrom(x.body); err != nil {
		return nil, fmt.Errorf("%s v%d request: %w", kmsg.NameForKey(x.key), x.version, err)
	}
	x.req = r
	return r, nil
}

func (cn *conn) close() {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.closed {
		return
	}
	cn.closed = true
	close(cn.done)
	cn.client.Close()
	if cn.up != nil {
		cn.up.Close()
	}
}

func (cn *conn) logger() *slogger { return &slogger{cn} }

func (cn *conn) run() {
	defer cn.close()
	c := cn.b.c
	up, err := c.doors.dial(context.Background(), "tcp", c.kfAddrs[cn.b.node])
	if err != nil {
		c.cfg.logger.Warn("localcluster: cannot reach kfake broker", "node", cn.b.node, "err", err)
		return
	}
	cn.mu.Lock()
	if cn.closed {
		cn.mu.Unlock()
		up.Close()
		return
	}
	cn.up = up
	cn.upR = bufio.NewReaderSize(up, 32<<10)
	cn.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer cn.close()
		if err := cn.writeLoop(); err != nil {
			cn.logger().debug("write loop ended", err)
		}
	}()
	cn.logger().debug("read loop ended", cn.readLoop()) // never ends without an error
	cn.close()
	wg.Wait()
	for {
		select {
		case x := <-cn.pending:
			x.done()
		default:
			return
		}
	}
}

// readFrame reads one size-prefixed frame, size included. The buffer grows
// as bytes arrive, never past twice what arrived: a size prefix alone must
// cost nothing, or a few connections announcing maxFrame would take
// gigabytes.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > maxFrame {
		return nil, fmt.Errorf("%w: %d bytes", errFrameTooLarge, n)
	}
	total := 4 + int(n)
	frame := make([]byte, 4, min(total, frameChunk))
	copy(frame, size[:])
	for len(frame) < total {
		if len(frame) == cap(frame) {
			frame = slices.Grow(frame, min(len(frame), total-len(frame)))
		}
		// Grow may round the capacity up past the frame's end.
		k, err := r.Read(frame[len(frame):min(cap(frame), total)])
		frame = frame[:len(frame)+k]
		if err != nil && len(frame) < total {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return frame, nil
}

// idleReader is the client side of a connection for its bufio.Reader. A
// Read that gets nothing for the idle timeout ends the connection, unless
// a request is in flight (a held or long-polling request is no idleness) or
// an answer went out within the timeout.
type idleReader struct{ cn *conn }

func (r idleReader) Read(p []byte) (int, error) {
	cn := r.cn
	deadline := time.Now().Add(cn.idle)
	for {
		if err := cn.client.SetReadDeadline(deadline); err != nil {
			return 0, err
		}
		n, err := cn.client.Read(p)
		if n > 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		now := time.Now()
		if cn.inflight.Load() > 0 {
			deadline = now.Add(cn.idle)
			continue
		}
		if last := cn.start.Add(time.Duration(cn.lastSent.Load())); now.Sub(last) < cn.idle {
			deadline = last.Add(cn.idle)
			continue
		}
		return 0, fmt.Errorf("%w (%v)", errIdle, cn.idle)
	}
}

func (cn *conn) readLoop() error {
	for {
		frame, err := readFrame(cn.clientR)
		if err != nil {
			return err
		}
		if err := cn.handle(frame); err != nil {
			if errors.Is(err, errBehind) {
				// The write loop closes the connection after the
				// answers to the requests before this one.
				select {
				case <-cn.done:
				case <-cn.b.c.done:
				}
			}
			return err
		}
	}
}

// handle applies the rules of this package to one request frame: the
// cluster id check, the token wait (or INCONSISTENT_METADATA), then the
// API's own handler, if it has one.
func (cn *conn) handle(frame []byte) error {
	b := cn.b
	c := b.c
	h, err := parseRequestHeader(frame)
	if err != nil {
		c.stats.malformed.Add(1)
		c.cfg.logger.Warn("localcluster: closing connection: malformed request", "node", b.node, "remote", cn.client.RemoteAddr().String(), "err", err)
		return err
	}
	c.stats.requests.Add(1)
	x := &exchange{key: h.key, version: h.version, corr: h.corr, flexible: h.flexible && h.key != apiVersionsKey, body: frame[h.bodyOff:]}

	// ApiVersions: kfake answers the KIP-1242 check of its body, and the
	// answer gets the broker's features (api_versions.go). Tag 0 of its
	// header (v3+) is judged as on any request (see apiVersionsState).
	if h.key == apiVersionsKey {
		if h.hasState && c.readsTokens() {
			if answered, err := cn.apiVersionsState(x, &h); err != nil || answered {
				return err
			}
		}
		x.raw = true
		return cn.forward(x, frame)
	}
	if !c.serves(h.key, h.version) {
		return cn.answerUnsupported(x)
	}
	if h.hasState && c.readsTokens() {
		if h.state.ClusterID != nil && string(h.state.ClusterID) != c.cfg.clusterID {
			c.stats.mismatches.Add(1)
			c.cfg.logger.Warn("localcluster: closing connection: request header names another cluster",
				"node", b.node, "remote", cn.client.RemoteAddr().String(), "request", kmsg.NameForKey(h.key),
				"header_cluster_id", string(h.state.ClusterID), "cluster_id", c.cfg.clusterID)
			return fmt.Errorf("%w: %q", errClusterIDCheck, h.state.ClusterID)
		}
		if applied := b.appliedOffset(); h.state.Token > applied {
			answered, err := cn.awaitToken(x, h.state.Token, applied)
			if err != nil || answered {
				return err
			}
		}
	}
	if fn := handlers[h.key]; fn != nil {
		fwd, err := fn(cn, x, frame)
		if err != nil {
			x.done()
			c.stats.malformed.Add(1)
			c.cfg.logger.Warn("localcluster: closing connection", "node", b.node, "request", kmsg.NameForKey(h.key), "err", err)
			return err
		}
		if x.isLocal {
			return cn.enqueue(x)
		}
		if fwd == nil { // nothing to answer (acks=0 produce answered locally)
			x.done()
			return nil
		}
		return cn.forward(x, fwd)
	}
	return cn.forward(x, frame)
}

// apiVersionsState applies tag 0 of an ApiVersions v3+ header: KIP-1243
// adds it to RequestHeader v2+ and exempts no API, and the answer carries
// the finalized features and their epoch, which come from the metadata
// log. A ClusterId naming another cluster is answered REBOOTSTRAP_REQUIRED,
// the error KIP-1242 gives for the same check of ApiVersions' own
// ClusterId ("the request fails and the error code REBOOTSTRAP_REQUIRED is
// returned"); a token ahead of the broker is held and then answered
// INCONSISTENT_METADATA, as any request (awaitToken). The answer's header
// is v0: it reports through its ErrorCode only. It reports answered when
// the request was answered here.
func (cn *conn) apiVersionsState(x *exchange, h *requestHeader) (answered bool, err error) {
	b := cn.b
	c := b.c
	if h.state.ClusterID != nil && string(h.state.ClusterID) != c.cfg.clusterID {
		c.stats.mismatches.Add(1)
		c.stats.rebootstrap.Add(1)
		c.cfg.logger.Info("localcluster: answered REBOOTSTRAP_REQUIRED: the ApiVersions header names another cluster",
			"node", b.node, "remote", cn.client.RemoteAddr().String(), "header_cluster_id", string(h.state.ClusterID), "cluster_id", c.cfg.clusterID)
		resp, ok := cn.errorAnswer(x, kerr.RebootstrapRequired.Code)
		if !ok {
			return true, fmt.Errorf("%w: %q", errClusterIDCheck, h.state.ClusterID)
		}
		cn.answerLocal(x, resp, -1)
		return true, cn.enqueue(x)
	}
	if applied := b.appliedOffset(); h.state.Token > applied {
		return cn.awaitToken(x, h.state.Token, applied)
	}
	return false, nil
}

// awaitToken holds a request whose token is above the broker's applied
// offset (judged), for at most holdBound, unless in ErrorMode. It reports
// answered when the broker did not catch up: the request is then neither
// executed nor served from older metadata, but answered
// INCONSISTENT_METADATA, or its connection closed (errBehind) where the
// answer has no place for the error, no answer is sent (acks=0), or the
// cluster closes instead (BehindClose). KIP-1243: "If the server is behind
// the client it may wait up to the request timeout for its own cluster
// metadata to be as update as the client's or it may return an
// INCONSISTENT_METADATA error."
func (cn *conn) awaitToken(x *exchange, token, judged int64) (answered bool, err error) {
	b := cn.b
	c := b.c
	if !c.cfg.errorMode {
		c.stats.waits.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), cn.holdBound(x))
		ok := b.waitApplied(ctx, token, cn.done)
		cancel()
		if ok {
			return false, nil
		}
		select {
		case <-cn.done:
			return false, net.ErrClosed
		case <-c.done:
			return false, ErrClosed
		default:
		}
		if judged = b.appliedOffset(); judged >= token {
			return false, nil // caught up as the wait ran out
		}
	}
	resp, canAnswer := cn.inconsistentAnswer(x)
	if !canAnswer || c.cfg.behind == BehindClose {
		c.stats.behindClosed.Add(1)
		c.cfg.logger.Info("localcluster: closing connection: broker behind the request's token and not answering INCONSISTENT_METADATA",
			"node", b.node, "request", kmsg.NameForKey(x.key), "token", token, "applied", judged, "has_error_field", canAnswer)
		x.closeConn = true
		if err := cn.enqueue(x); err != nil {
			return true, err
		}
		return true, fmt.Errorf("%w: %s token %d, applied %d", errBehind, kmsg.NameForKey(x.key), token, judged)
	}
	c.stats.inconsistent.Add(1)
	tok := int64(-1) // TokenApplied: when written
	switch c.cfg.inconsistentTok {
	case TokenJudged:
		tok = judged
	case TokenFetched:
		tok = c.log.end()
	}
	cn.answerLocal(x, resp, tok)
	return true, cn.enqueue(x)
}

// holdBound is how long the broker holds x for a token or for its own
// apply of a write: WaitMax, or the request's own timeout when it has one
// and it is shorter (Produce, CreateTopics, DeleteTopics... TimeoutMillis).
func (cn *conn) holdBound(x *exchange) time.Duration {
	bound := cn.b.c.cfg.waitMax
	r, err := x.request()
	if err != nil {
		return bound
	}
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return bound
	}
	f := v.Elem().FieldByName("TimeoutMillis")
	if !f.IsValid() || f.Kind() != reflect.Int32 || f.Int() <= 0 {
		return bound
	}
	return min(bound, time.Duration(f.Int())*time.Millisecond)
}

func (cn *conn) enqueue(x *exchange) error {
	cn.inflight.Add(1)
	select {
	case cn.pending <- x:
		return nil
	case <-cn.done:
		cn.inflight.Add(-1)
		x.done()
		return net.ErrClosed
	}
}

func (cn *conn) forward(x *exchange, frame []byte) error {
	if err := cn.enqueue(x); err != nil {
		return err
	}
	return cn.send(frame)
}

// send writes a request frame to kfake. Through the in-memory side door the
// frame is handed over without a copy: the gateway reads but never writes a
// frame again once it is read (handlers that change a request build a new
// one).
func (cn *conn) send(frame []byte) error {
	var err error
	if mc, ok := cn.up.(*memConn); ok {
		_, err = mc.writeOwned(frame)
	} else {
		_, err = cn.up.Write(frame)
	}
	return err
}

// answerLocal makes resp the answer to x, with token in its header, or,
// when token is -1, the broker's applied offset at the time the answer is
// written.
func (cn *conn) answerLocal(x *exchange, resp kmsg.Response, token int64) {
	x.isLocal, x.local, x.localTok = true, resp.AppendTo(nil), token
}

func (cn *conn) writeLoop() error {
	for {
		var x *exchange
		select {
		case x = <-cn.pending:
		case <-cn.done:
			return nil
		}
		frame, err := cn.respond(x)
		x.done()
		if err != nil {
			return err
		}
		_, err = cn.client.Write(frame)
		// Stored before the count drops, so an idle check that sees no
		// request in flight sees this answer's time.
		cn.lastSent.Store(int64(time.Since(cn.start)))
		cn.inflight.Add(-1)
		if err != nil {
			return err
		}
	}
}

// respond returns the frame that answers x: the gateway's own, or kfake's
// with the token in its header and the body rewritten by the API's rule.
func (cn *conn) respond(x *exchange) ([]byte, error) {
	if x.closeConn {
		return nil, errBehind
	}
	if x.isLocal {
		token := x.localTok
		if token < 0 {
			token = cn.b.appliedOffset()
		}
		return cn.appendResponse(nil, x, nil, token, x.local), nil
	}
	frame, err := readFrame(cn.upR)
	if err != nil {
		return nil, err
	}
	if x.raw {
		// A KIP-1242 rejection: the client named another cluster or node.
		if len(frame) >= 10 && int16(binary.BigEndian.Uint16(frame[8:])) == kerr.RebootstrapRequired.Code {
			cn.b.c.stats.rebootstrap.Add(1)
			cn.b.c.cfg.logger.Info("localcluster: answered REBOOTSTRAP_REQUIRED: the client's ApiVersions named another cluster or node (KIP-1242)",
				"node", cn.b.node, "cluster_id", cn.b.c.cfg.clusterID, "remote", cn.client.RemoteAddr().String())
		}
		return cn.rewriteAPIVersions(x, frame), nil
	}
	h, err := parseResponseHeader(frame, x.flexible)
	if err != nil {
		return nil, err
	}
	if h.corr != x.corr {
		return nil, fmt.Errorf("%w: %d, want %d", errCorrelation, h.corr, x.corr)
	}
	body := frame[h.bodyOff:]
	token := int64(-1)
	if x.post != nil {
		resp := kmsg.ResponseForKey(x.key)
		resp.SetVersion(x.version)
		if err := resp.ReadFrom(body); err != nil {
			return nil, fmt.Errorf("%s v%d response: %w", kmsg.NameForKey(x.key), x.version, err)
		}
		token = x.post(resp)
		body = resp.AppendTo(make([]byte, 0, len(body)))
	}
	if !x.flexible && x.post == nil {
		return frame, nil
	}
	if token < 0 {
		token = cn.b.appliedOffset()
	}
	return cn.appendResponse(make([]byte, 0, len(body)+64), x, h.tags, token, body), nil
}

// slogger logs connection events at debug level with the connection's
// identity; most end because a client went away, which is not news.
type slogger struct{ cn *conn }

func (l *slogger) debug(msg string, err error) {
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		return
	}
	l.cn.b.c.cfg.logger.Debug("localcluster: "+msg, "node", l.cn.b.node, "remote", l.cn.client.RemoteAddr().String(), "err", err)
}
