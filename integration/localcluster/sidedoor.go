package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// The gateways reach their kfake brokers through a side door: each kfake
// broker listens on its TCP port (KfakeAddrs, for anyone who wants kfake
// itself) and also accepts in-memory connections, which the gateway and the
// control client dial. The gateway's extra hop is most of what it costs next
// to kfake direct, and an in-memory hop wakes the goroutine on the other side
// directly instead of through the network poller.

// sideDoors maps kfake TCP addresses to the in-memory doors beside them.
type sideDoors struct {
	dialer net.Dialer
	mu     sync.Mutex
	doors  map[string]*fanIn
	seq    atomic.Uint64
}

func newSideDoors() *sideDoors {
	return &sideDoors{dialer: net.Dialer{Timeout: 5 * time.Second}, doors: map[string]*fanIn{}}
}

// listen is kfake's ListenFn: a TCP listener on address that also accepts
// in-memory connections from dial.
func (s *sideDoors) listen(network, address string) (net.Listener, error) {
	tcp, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	f := newFanIn(tcp)
	s.mu.Lock()
	s.doors[tcp.Addr().String()] = f
	s.mu.Unlock()
	return f, nil
}

// dial connects in memory to the kfake broker at addr, or dials addr itself
// when it has no side door (a kfake made with a ListenFn of the caller's).
func (s *sideDoors) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	f, ok := s.doors[addr]
	s.mu.Unlock()
	if !ok {
		return s.dialer.DialContext(ctx, network, addr)
	}
	id := s.seq.Add(1)
	ours, theirs := memPipe(memAddr(fmt.Sprintf("mem-client-%d", id)), memAddr("mem-"+addr))
	select {
	case f.conns <- theirs:
		return ours, nil
	case <-f.done:
		return nil, fmt.Errorf("dial %s: %w", addr, net.ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fanIn accepts from a listener and from in-memory dials; its address is the
// listener's.
type fanIn struct {
	ln    net.Listener
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

func newFanIn(ln net.Listener) *fanIn {
	f := &fanIn{ln: ln, conns: make(chan net.Conn), done: make(chan struct{})}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			select {
			case f.conns <- c:
			case <-f.done:
				c.Close()
				return
			}
		}
	}()
	return f
}

func (f *fanIn) Accept() (net.Conn, error) {
	select {
	case c := <-f.conns:
		return c, nil
	case <-f.done:
		return nil, net.ErrClosed
	}
}

func (f *fanIn) Close() error {
	var err error
	f.once.Do(func() {
		close(f.done)
		err = f.ln.Close()
		f.wg.Wait()
	})
	return err
}

func (f *fanIn) Addr() net.Addr { return f.ln.Addr() }

// memAddr names one end of an in-memory connection.
type memAddr string

func (memAddr) Network() string  { return "mem" }
func (a memAddr) String() string { return string(a) }

// memPipe returns the two ends of an in-memory, buffered, full-duplex
// connection. Unlike net.Pipe, a Write never waits for the reader: it
// queues a copy for the peer, as a socket with a large buffer would. The
// gateway bounds what can be queued (pipelineDepth requests and their
// responses), so the queues need no limit of their own.
func memPipe(a, b net.Addr) (*memConn, *memConn) {
	ab, ba := newMemBuf(), newMemBuf()
	return newMemConn(ba, ab, a, b), newMemConn(ab, ba, b, a)
}

func newMemConn(in, out *memBuf, local, remote net.Addr) *memConn {
	c := &memConn{in: in, out: out, local: local, remote: remote, closed: make(chan struct{})}
	c.rdl.init()
	c.wdl.init()
	return c
}

// Spare chunks a memBuf keeps for later writes, so that a busy connection
// does not allocate per write while an idle one holds little.
const (
	maxSpares    = 4
	maxSpareSize = 4 << 20
)

// chunk is one write waiting to be read.
type chunk struct {
	b     []byte
	owned bool // handed over by writeOwned: never reused as a spare
}

// memBuf is one direction of a memPipe: a queue of writes. Each write is
// copied once, into a spare chunk when one is big enough, and read from
// there; a chunk is never grown or moved.
type memBuf struct {
	mu     sync.Mutex
	queue  []chunk
	head   int // queue[head:] is unread
	off    int // read offset into queue[head]
	spares [][]byte
	eof    bool          // the writer closed: reads drain, then io.EOF
	broken bool          // the reader closed: writes fail
	ready  chan struct{} // one token when data or eof may be waiting
}

func newMemBuf() *memBuf { return &memBuf{ready: make(chan struct{}, 1)} }

func (m *memBuf) signal() {
	select {
	case m.ready <- struct{}{}:
	default:
	}
}

// spare returns a buffer of length n, from the spares when one fits.
// m.mu is held.
func (m *memBuf) spare(n int) []byte {
	for i, b := range m.spares {
		if cap(b) >= n {
			last := len(m.spares) - 1
			m.spares[i] = m.spares[last]
			m.spares[last] = nil
			m.spares = m.spares[:last]
			return b[:n]
		}
	}
	return make([]byte, n)
}

// read copies queued bytes into p; m.mu is held.
func (m *memBuf) read(p []byte) int {
	n := 0
	for n < len(p) && m.head < len(m.queue) {
		c := &m.queue[m.head]
		k := copy(p[n:], c.b[m.off:])
		n += k
		m.off += k
		if m.off < len(c.b) {
			break
		}
		if !c.owned && cap(c.b) <= maxSpareSize && len(m.spares) < maxSpares {
			m.spares = append(m.spares, c.b[:0])
		}
		*c = chunk{}
		m.head++
		m.off = 0
	}
	if m.head == len(m.queue) {
		m.queue, m.head = m.queue[:0], 0
	}
	return n
}

// memConn is one end of a memPipe; it is a net.Conn with deadlines.
type memConn struct {
	in, out       *memBuf
	local, remote net.Addr
	rdl, wdl      deadline
	closeOnce     sync.Once
	closed        chan struct{}
}

var errBrokenPipe = errors.New("broken pipe: the other end is closed")

func (c *memConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	m := c.in
	for {
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		default:
		}
		m.mu.Lock()
		if m.head < len(m.queue) {
			n := m.read(p)
			more := m.head < len(m.queue) || m.eof
			m.mu.Unlock()
			if more { // pass the token on to another blocked reader
				m.signal()
			}
			return n, nil
		}
		eof := m.eof
		m.mu.Unlock()
		if eof {
			m.signal()
			return 0, io.EOF
		}
		select {
		case <-m.ready:
		case <-c.closed:
			return 0, net.ErrClosed
		case <-c.rdl.expired():
			return 0, os.ErrDeadlineExceeded
		}
	}
}

func (c *memConn) Write(p []byte) (int, error) { return c.write(p, false) }

// writeOwned queues b itself instead of a copy: the caller gives b up and
// must not modify it again (reading it stays safe: the peer only reads).
func (c *memConn) writeOwned(b []byte) (int, error) { return c.write(b, true) }

func (c *memConn) write(p []byte, owned bool) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	case <-c.wdl.expired():
		return 0, os.ErrDeadlineExceeded
	default:
	}
	if len(p) == 0 {
		return 0, nil
	}
	m := c.out
	m.mu.Lock()
	if m.broken {
		m.mu.Unlock()
		return 0, errBrokenPipe
	}
	b := p
	if !owned {
		b = m.spare(len(p))
		copy(b, p)
	}
	m.queue = append(m.queue, chunk{b: b, owned: owned})
	m.mu.Unlock()
	m.signal()
	return len(p), nil
}

func (c *memConn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		close(c.closed)
		c.out.mu.Lock()
		c.out.eof = true
		c.out.mu.Unlock()
		c.out.signal()
		c.in.mu.Lock()
		c.in.broken = true
		c.in.queue, c.in.head, c.in.off, c.in.spares = nil, 0, 0, nil
		c.in.mu.Unlock()
		c.rdl.set(time.Time{})
		c.wdl.set(time.Time{})
	})
	if !first {
		return net.ErrClosed
	}
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return c.local }
func (c *memConn) RemoteAddr() net.Addr { return c.remote }

func (c *memConn) SetDeadline(t time.Time) error {
	c.rdl.set(t)
	c.wdl.set(t)
	return nil
}
func (c *memConn) SetReadDeadline(t time.Time) error  { c.rdl.set(t); return nil }
func (c *memConn) SetWriteDeadline(t time.Time) error { c.wdl.set(t); return nil }

// deadline is a settable point in time whose expiry closes a channel.
type deadline struct {
	mu    sync.Mutex
	timer *time.Timer
	gen   uint64        // bumped by every set, so a stale timer does nothing
	ch    chan struct{} // closed while the deadline has passed
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	select {
	case <-d.ch: // passed: a new deadline starts open
		d.ch = make(chan struct{})
	default:
	}
	if t.IsZero() {
		return
	}
	wait := time.Until(t)
	if wait <= 0 {
		close(d.ch)
		return
	}
	gen := d.gen
	d.timer = time.AfterFunc(wait, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.gen == gen {
			close(d.ch)
		}
	})
}

func (d *deadline) expired() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}
