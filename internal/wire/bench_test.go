package wire

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"

	"github.com/kconsist/kconsist/consistency"
)

// loopConn discards writes and answers each request frame with resp, as a
// broker answering every request with the same frame would.
type loopConn struct {
	memConn
	resp    []byte
	written int // bytes of the current request frame still to come
	owed    int // responses to serve
	at      int // offset in the response being served
}

func (l *loopConn) Write(p []byte) (int, error) {
	for rest := p; len(rest) > 0; {
		if l.written == 0 { // a frame starts; its size field comes whole here
			l.written = 4 + int(binary.BigEndian.Uint32(rest))
		}
		k := min(l.written, len(rest))
		l.written -= k
		rest = rest[k:]
		if l.written == 0 {
			l.owed++
		}
	}
	return len(p), nil
}

func (l *loopConn) Read(p []byte) (int, error) {
	if l.owed == 0 {
		return 0, io.ErrNoProgress
	}
	n := copy(p, l.resp[l.at:])
	l.at += n
	if l.at == len(l.resp) {
		l.at, l.owed = 0, l.owed-1
	}
	return n, nil
}

// roundTrip writes req and reads one response as kgo does: a 4-byte size
// through a bufio.Reader, then the body with io.ReadFull.
type roundTrip struct {
	c    net.Conn
	br   *bufio.Reader
	req  []byte
	size [4]byte
	body []byte
}

func newRoundTrip(c net.Conn, req []byte, respLen int) *roundTrip {
	return &roundTrip{c: c, br: bufio.NewReaderSize(c, 4096), req: req, body: make([]byte, respLen)}
}

func (r *roundTrip) do() error {
	if _, err := r.c.Write(r.req); err != nil {
		return err
	}
	if _, err := io.ReadFull(r.br, r.size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(r.size[:])
	_, err := io.ReadFull(r.br, r.body[:n])
	return err
}

// pairSetup returns a round trip of a Metadata v12 request and a flexible
// response carrying the store's own token (the steady state: nothing to
// advance), intercepted or not.
func pairSetup(tb testing.TB, intercept bool, bodyLen int) *roundTrip {
	store := consistency.NewMemoryStore()
	if _, err := store.Advance(consistency.MustOf("MkU3OEn5P2nNzKailTG_TQ", 1000)); err != nil {
		tb.Fatal(err)
	}
	req := reqFrame(metadataReq(12), 1)
	resp := respFrame(1, stateTags("MkU3OEn5P2nNzKailTG_TQ", 1000), make([]byte, bodyLen))
	lc := &loopConn{resp: resp}
	var c net.Conn = lc
	if intercept {
		i, err := New(Config{Store: store})
		if err != nil {
			tb.Fatal(err)
		}
		c = i.Wrap(lc, "127.0.0.1:9092")
	}
	return newRoundTrip(c, req, len(resp))
}

func TestSteadyStateZeroAllocs(t *testing.T) {
	for _, bodyLen := range []int{16, 100_000} {
		rt := pairSetup(t, true, bodyLen)
		for k := 0; k < 3; k++ { // warm the buffers
			if err := rt.do(); err != nil {
				t.Fatal(err)
			}
		}
		if n := testing.AllocsPerRun(200, func() {
			if err := rt.do(); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Fatalf("body %d: %v allocs per request/response pair, want 0", bodyLen, n)
		}
	}
}

func BenchmarkPair(b *testing.B) {
	for _, bc := range []struct {
		name      string
		intercept bool
		bodyLen   int
	}{
		{"passthrough/small", false, 64},
		{"intercepted/small", true, 64},
		{"passthrough/64KiB", false, 64 << 10},
		{"intercepted/64KiB", true, 64 << 10},
	} {
		b.Run(bc.name, func(b *testing.B) {
			rt := pairSetup(b, bc.intercept, bc.bodyLen)
			b.ReportAllocs()
			for b.Loop() {
				if err := rt.do(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
