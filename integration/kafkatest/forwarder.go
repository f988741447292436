package kafkatest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxFrame bounds a Kafka frame the forwarder will buffer. Brokers default to
// 100 MiB requests; anything larger is not Kafka traffic of a test.
const maxFrame = 256 << 20

// Frame is one Kafka protocol frame that went through a Forwarder.
type Frame struct {
	Conn    uint64 // forwarder connection number, from 1
	Target  string // where this connection forwards to
	Request bool   // client to broker; false for broker to client
	// Key and Version of the request, also on its response (matched by
	// correlation id). -1 when a response matches no request seen.
	Key, Version  int16
	CorrelationID int32
	// ClientID is the client.id of a request ("" if none or a response),
	// which tells apart clients sharing the forwarder.
	ClientID string
	// Body is the frame without its 4-byte size: for a request it starts
	// with the request header, for a response with the correlation id.
	// The observer owns it.
	Body []byte
}

// Forwarder is a loopback TCP forwarder whose target can be switched while it
// runs. Advertise its address for a broker (AdvertisedAddr) and switch it to
// another cluster: clients that learnt the address from Metadata then reach a
// broker that is not the one they think, which is the misrouted connection of
// KIP-1242. Switching closes every open connection, as a changed IP address
// would. It forwards whole Kafka frames and can show each one to an observer.
type Forwarder struct {
	ln net.Listener

	mu      sync.Mutex
	target  string
	gen     uint64 // bumped by SetTarget
	observe func(Frame)
	conns   map[uint64]*fwdConn
	nextID  uint64
	closed  bool
	wg      sync.WaitGroup
	dialErr error
	// stream: copy bytes, not frames (NewStreamForwarder).
	stream   bool
	accepted atomic.Uint64
}

type fwdConn struct {
	client, server net.Conn
	mu             sync.Mutex
	pending        map[int32][2]int16 // correlation id -> key, version
}

// NewForwarder listens on 127.0.0.1 on a free port and forwards each
// accepted connection to target ("host:port"). An empty target refuses
// connections (they are closed at once) until SetTarget.
func NewForwarder(target string) (*Forwarder, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("kafkatest: forwarder listen: %w", err)
	}
	f := &Forwarder{ln: ln, target: target, conns: make(map[uint64]*fwdConn)}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// NewStreamForwarder is NewForwarder for traffic that is not Kafka frames
// in the clear, such as a TLS listener's: it copies bytes as they come and
// shows nothing to an observer. Accepted then still counts the
// connections clients made.
func NewStreamForwarder(target string) (*Forwarder, error) {
	f, err := NewForwarder(target)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.stream = true
	f.mu.Unlock()
	return f, nil
}

// Addr returns the address clients connect to.
func (f *Forwarder) Addr() string { return f.ln.Addr().String() }

// Target returns where new connections go.
func (f *Forwarder) Target() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.target
}

// SetTarget sends new connections to target and closes every open one, so
// clients must reconnect and reach the new target.
func (f *Forwarder) SetTarget(target string) {
	f.mu.Lock()
	f.target = target
	f.gen++
	conns := f.conns
	f.conns = make(map[uint64]*fwdConn)
	f.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Observe calls fn with every frame forwarded from now on, from the
// goroutine forwarding it: fn must be quick and safe for concurrent use.
// nil stops observing.
func (f *Forwarder) Observe(fn func(Frame)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observe = fn
}

// Accepted returns how many connections clients have made to the
// forwarder so far, including those it could not forward.
func (f *Forwarder) Accepted() uint64 { return f.accepted.Load() }

// Conns returns how many connections are open.
func (f *Forwarder) Conns() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// LastDialError returns the error of the last failed connection to a target,
// or nil.
func (f *Forwarder) LastDialError() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.dialErr
}

// Close stops listening, closes every connection and waits for the
// forwarding goroutines to end.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	err := f.ln.Close()
	for _, c := range conns {
		c.close()
	}
	f.wg.Wait()
	return err
}

func (f *Forwarder) accept() {
	defer f.wg.Done()
	for {
		client, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		f.accepted.Add(1)
		f.wg.Add(1)
		go f.serve(client)
	}
}

func (f *Forwarder) serve(client net.Conn) {
	defer f.wg.Done()
	f.mu.Lock()
	target, gen, stream := f.target, f.gen, f.stream
	f.mu.Unlock()
	if target == "" {
		client.Close()
		return
	}
	server, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		f.mu.Lock()
		f.dialErr = fmt.Errorf("dial %s: %w", target, err)
		f.mu.Unlock()
		client.Close()
		return
	}
	c := &fwdConn{client: client, server: server, pending: make(map[int32][2]int16)}
	f.mu.Lock()
	// A switch while dialing must not leave this connection on the old
	// target.
	if f.closed || f.gen != gen {
		f.mu.Unlock()
		c.close()
		return
	}
	f.nextID++
	id := f.nextID
	f.conns[id] = c
	f.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	pipe := f.pipe
	if stream {
		pipe = f.copy
	}
	go func() { defer wg.Done(); pipe(c, id, target, true) }()
	go func() { defer wg.Done(); pipe(c, id, target, false) }()
	wg.Wait()
	f.mu.Lock()
	if f.conns[id] == c {
		delete(f.conns, id)
	}
	f.mu.Unlock()
}

// pipe copies frames one way until either side fails, then closes both, so
// a half-dead pair never lingers.
func (f *Forwarder) pipe(c *fwdConn, id uint64, target string, request bool) {
	defer c.close()
	src, dst := c.server, c.client
	if request {
		src, dst = c.client, c.server
	}
	var size [4]byte
	for {
		if _, err := io.ReadFull(src, size[:]); err != nil {
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 0 || n > maxFrame {
			return // not Kafka: drop the connection rather than guess
		}
		frame := make([]byte, 4+int(n))
		copy(frame, size[:])
		if _, err := io.ReadFull(src, frame[4:]); err != nil {
			return
		}
		// Correlation ids are tracked even unobserved, so an observer
		// set mid-connection still learns what each response answers.
		fr, ok := c.frame(frame[4:], request)
		f.mu.Lock()
		obs := f.observe
		f.mu.Unlock()
		if ok && obs != nil {
			fr.Conn, fr.Target = id, target
			obs(fr)
		}
		if _, err := dst.Write(frame); err != nil {
			return
		}
	}
}

// copy copies bytes one way until either side fails, then closes both.
func (f *Forwarder) copy(c *fwdConn, _ uint64, _ string, request bool) {
	defer c.close()
	src, dst := c.server, c.client
	if request {
		src, dst = c.client, c.server
	}
	_, _ = io.Copy(dst, src) // either side's end is the connection's end
}

// frame decodes the header fields every request (key, version, correlation
// id) and response (correlation id) start with.
func (c *fwdConn) frame(body []byte, request bool) (Frame, bool) {
	fr := Frame{Request: request, Key: -1, Version: -1, Body: body}
	if request {
		if len(body) < 8 {
			return fr, false
		}
		fr.Key = int16(binary.BigEndian.Uint16(body[0:]))
		fr.Version = int16(binary.BigEndian.Uint16(body[2:]))
		fr.CorrelationID = int32(binary.BigEndian.Uint32(body[4:]))
		if len(body) >= 10 {
			if n := int(int16(binary.BigEndian.Uint16(body[8:]))); n > 0 && len(body) >= 10+n {
				fr.ClientID = string(body[10 : 10+n])
			}
		}
		c.mu.Lock()
		c.pending[fr.CorrelationID] = [2]int16{fr.Key, fr.Version}
		c.mu.Unlock()
		return fr, true
	}
	if len(body) < 4 {
		return fr, false
	}
	fr.CorrelationID = int32(binary.BigEndian.Uint32(body[0:]))
	c.mu.Lock()
	if kv, ok := c.pending[fr.CorrelationID]; ok {
		fr.Key, fr.Version = kv[0], kv[1]
		delete(c.pending, fr.CorrelationID)
	}
	c.mu.Unlock()
	return fr, true
}

func (c *fwdConn) close() {
	c.client.Close()
	c.server.Close()
}

// ErrNotApiVersions is returned by the ApiVersions decoders for any other
// frame.
var ErrNotApiVersions = errors.New("kafkatest: not an ApiVersions frame")

// ApiVersionsRequest decodes an ApiVersions request frame, e.g. to see the
// ClusterId and NodeId a client sends (KIP-1242, version 5).
func (fr Frame) ApiVersionsRequest() (*kmsg.ApiVersionsRequest, error) {
	if !fr.Request || fr.Key != 18 {
		return nil, ErrNotApiVersions
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = fr.Version
	// Header: key, version, correlation id, nullable client id, and tags
	// when the request is flexible.
	b := kbin.Reader{Src: fr.Body}
	b.Int16()
	b.Int16()
	b.Int32()
	b.NullableString()
	if req.IsFlexible() {
		kmsg.SkipTags(&b)
	}
	if err := b.Complete(); err != nil {
		return nil, fmt.Errorf("kafkatest: ApiVersions v%d request header: %w", fr.Version, err)
	}
	if err := req.ReadFrom(b.Src); err != nil {
		return nil, fmt.Errorf("kafkatest: ApiVersions v%d request: %w", fr.Version, err)
	}
	return req, nil
}

// ApiVersionsResponse decodes an ApiVersions response frame. Its header is
// always version 0 (only the correlation id), whatever the request version.
// A broker that rejects the request version answers in version 0; ErrorCode
// is right either way.
func (fr Frame) ApiVersionsResponse() (*kmsg.ApiVersionsResponse, error) {
	if fr.Request || fr.Key != 18 || len(fr.Body) < 4 {
		return nil, ErrNotApiVersions
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = fr.Version
	if err := resp.ReadFrom(fr.Body[4:]); err != nil {
		resp = kmsg.NewPtrApiVersionsResponse() // version 0 fallback
		if err0 := resp.ReadFrom(fr.Body[4:]); err0 != nil {
			return nil, fmt.Errorf("kafkatest: ApiVersions v%d response: %w", fr.Version, err)
		}
	}
	return resp, nil
}
