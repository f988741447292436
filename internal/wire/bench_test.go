package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

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

// BenchmarkPairTCP is BenchmarkPair over loopback TCP, against a goroutine
// that answers every request frame at once, the way kgo drives a
// connection: one goroutine writes each request, another reads its answer,
// and the two hand over through channels. Unlike BenchmarkPair, caches are
// not all hot: the interceptor's state moves between the writing and the
// reading goroutine, as in a client.
func BenchmarkPairTCP(b *testing.B) {
	produce := produceReq(9, -1, nil).(*kmsg.ProduceRequest)
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "bench"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 1100) // one 1 KiB record and its batch header
	pt.Partitions = append(pt.Partitions, pp)
	produce.Topics = append(produce.Topics, pt)
	for _, bc := range []struct {
		name      string
		intercept bool
		req       []byte
	}{
		{"passthrough/metadata", false, reqFrame(metadataReq(12), 1)},
		{"intercepted/metadata", true, reqFrame(metadataReq(12), 1)},
		{"passthrough/produce1KiB", false, reqFrame(produce, 1)},
		{"intercepted/produce1KiB", true, reqFrame(produce, 1)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			client, stop := loopbackBroker(b, respFrame(1, stateTags("MkU3OEn5P2nNzKailTG_TQ", 1000), make([]byte, 64)))
			defer stop()
			var c net.Conn = client
			if bc.intercept {
				i, err := New(Config{Store: knownStore(b, "MkU3OEn5P2nNzKailTG_TQ", 1000)})
				if err != nil {
					b.Fatal(err)
				}
				c = i.Wrap(client, client.RemoteAddr().String())
			}
			rt := newRoundTrip(c, bc.req, 4096)
			toReader, fromReader := make(chan struct{}), make(chan error)
			go func() {
				for range toReader {
					if _, err := io.ReadFull(rt.br, rt.size[:]); err != nil {
						fromReader <- err
						continue
					}
					_, err := io.ReadFull(rt.br, rt.body[:binary.BigEndian.Uint32(rt.size[:])])
					fromReader <- err
				}
			}()
			defer close(toReader)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(bc.req); err != nil {
					b.Fatal(err)
				}
				toReader <- struct{}{}
				if err := <-fromReader; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loopbackBroker listens on 127.0.0.1, answers each request frame on the one
// connection it accepts with resp, and returns the client end.
func loopbackBroker(tb testing.TB, resp []byte) (net.Conn, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc, err := ln.Accept()
		if err != nil {
			return
		}
		defer sc.Close()
		br := bufio.NewReaderSize(sc, 64<<10)
		var size [4]byte
		for {
			if _, err := io.ReadFull(br, size[:]); err != nil {
				return
			}
			if _, err := br.Discard(int(binary.BigEndian.Uint32(size[:]))); err != nil {
				return
			}
			if _, err := sc.Write(resp); err != nil {
				return
			}
		}
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		tb.Fatal(err)
	}
	return client, func() {
		client.Close()
		ln.Close()
		<-done
	}
}

// BenchmarkInconsistentCheck is the work shouldHold adds to an answer whose
// header token does not say the broker was behind (the steady state): a
// size check and, when the body could be an INCONSISTENT_METADATA answer
// and is all in view, a scan of it for the code's two bytes. 64 bytes is
// BenchmarkPair's small body; 1024 is about the largest body scanned for a
// small Metadata request (its answer's bound is 8 × the request + 1 KiB);
// the 64 KiB body is over the bound, so only compared.
func BenchmarkInconsistentCheck(b *testing.B) {
	req := inflight{sent: 1000, key: metadataKey, version: 12, size: int32(len(reqFrame(metadataReq(12), 1)) - 4)}
	for _, n := range []int{64, 1024, 64 << 10} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c, _, _ := newTestConn(b, knownStore(b, "abc", 1000), nil)
			body := make([]byte, n)
			c.r.rbody = n
			var held bool
			for b.Loop() {
				held = c.r.mayBeInconsistent(&req, body) || held
			}
			if held {
				b.Fatal("a clean body would be held")
			}
		})
	}
}
