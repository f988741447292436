package wire

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
)

// golden reads testdata/golden.txt into name → bytes.
func golden(t testing.TB) map[string][]byte {
	t.Helper()
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, hx, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("golden line %q has no bytes", line)
		}
		b, err := hex.DecodeString(strings.Join(strings.Fields(hx), ""))
		if err != nil {
			t.Fatalf("golden %s: %v", name, err)
		}
		out[name] = b
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// memConn is an in-memory net.Conn: writes are recorded, reads come from in,
// at most chunk bytes at a time when chunk > 0.
type memConn struct {
	mu      sync.Mutex
	written bytes.Buffer
	writes  int
	in      []byte
	chunk   int
	closed  bool
	eofWith bool // return io.EOF with the last bytes, as tls.Conn may
}

func (m *memConn) Read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, net.ErrClosed
	}
	if len(m.in) == 0 {
		return 0, io.EOF
	}
	if m.chunk > 0 && len(p) > m.chunk {
		p = p[:m.chunk]
	}
	n := copy(p, m.in)
	m.in = m.in[n:]
	if m.eofWith && len(m.in) == 0 {
		return n, io.EOF
	}
	return n, nil
}

func (m *memConn) Write(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, net.ErrClosed
	}
	m.writes++
	return m.written.Write(p)
}

func (m *memConn) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return nil
}

func (m *memConn) isClosed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.closed
}

func (*memConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (*memConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (*memConn) SetDeadline(time.Time) error      { return nil }
func (*memConn) SetReadDeadline(time.Time) error  { return nil }
func (*memConn) SetWriteDeadline(time.Time) error { return nil }

// recorder is an Observer that remembers what it was told.
type recorder struct {
	mu           sync.Mutex
	advanced     [][2]consistency.Token
	inconsistent []int16
	misroutes    [][2]string
}

func (r *recorder) OnTokenAdvanced(from, to consistency.Token) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.advanced = append(r.advanced, [2]consistency.Token{from, to})
}

func (r *recorder) OnInconsistentMetadata(_ string, key int16, _, _ int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.inconsistent = append(r.inconsistent, key)
}

func (r *recorder) OnMisroute(_ string, want, got string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.misroutes = append(r.misroutes, [2]string{want, got})
}

func (r *recorder) counts() (advanced, inconsistent, misroutes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.advanced), len(r.inconsistent), len(r.misroutes)
}

// newTestConn wraps a memConn with an interceptor over store.
func newTestConn(t testing.TB, store consistency.Store, mod func(*Config)) (*conn, *memConn, *Interceptor) {
	t.Helper()
	cfg := Config{Store: store}
	if mod != nil {
		mod(&cfg)
	}
	i, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := &memConn{}
	return i.Wrap(m, "127.0.0.1:9092").(*conn), m, i
}

func knownStore(t testing.TB, cluster string, offset int64) *consistency.MemoryStore {
	t.Helper()
	s := consistency.NewMemoryStore()
	if _, err := s.Advance(consistency.MustOf(cluster, offset)); err != nil {
		t.Fatal(err)
	}
	return s
}

// reqFrame formats req at its version with correlation id corr, as kgo does.
func reqFrame(req kmsg.Request, corr int32) []byte {
	return (&kmsg.RequestFormatter{}).AppendRequest(nil, req, corr)
}

func metadataReq(version int16) kmsg.Request {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = version
	return r
}

func produceReq(version, acks int16, txnID *string) kmsg.Request {
	r := kmsg.NewPtrProduceRequest()
	r.Version = version
	r.Acks = acks
	r.TransactionID = txnID
	r.TimeoutMillis = 1000
	return r
}

// respFrame builds a response frame: size, corr, the tag section when tags
// is not nil (a flexible header), then body.
func respFrame(corr int32, tags []byte, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = append(b, tags...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// stateTags is a tag section holding only tag 0 = {cluster, token}.
func stateTags(cluster string, token int64) []byte {
	st := AppendState(nil, cluster, token)
	b := []byte{1, 0}
	b = binary.AppendUvarint(b, uint64(len(st)))
	return append(b, st...)
}

// readAll reads everything c gives until an error.
func readAll(c net.Conn, bufSize int) ([]byte, error) {
	var out []byte
	buf := make([]byte, bufSize)
	for {
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, err
		}
	}
}

// heals is an owner of a store that records the heals it reports.
type heals struct {
	mu   sync.Mutex
	list [][2]consistency.Token
}

// healLog returns an owner of store whose heals h records.
func healLog(store consistency.Store) (*tokens.Owner, *heals) {
	h := &heals{}
	return tokens.New(store, func(c tokens.Change) {
		if c.Kind == tokens.Healed {
			h.mu.Lock()
			h.list = append(h.list, [2]consistency.Token{c.From, c.To})
			h.mu.Unlock()
		}
	}), h
}

func (h *heals) get() [][2]consistency.Token {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][2]consistency.Token(nil), h.list...)
}
