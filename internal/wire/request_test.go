package wire

import (
	"bytes"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

func TestGoldenState(t *testing.T) {
	g := golden(t)
	for _, tc := range []struct {
		name    string
		cluster string
		token   int64
	}{
		{"state.abc.42", "abc", 42},
		{"state.null.-1", "", -1},
		{"state.uuid.1000", "MkU3OEn5P2nNzKailTG_TQ", 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := g[tc.name]
			if tc.cluster != "" { // AppendState never writes the null cluster id
				if got := AppendState(nil, tc.cluster, tc.token); !bytes.Equal(got, want) {
					t.Fatalf("AppendState = %x, want %x", got, want)
				}
				if n := StateLen(tc.cluster); n != len(want) {
					t.Fatalf("StateLen = %d, want %d", n, len(want))
				}
			}
			s, err := ParseState(want)
			if err != nil {
				t.Fatal(err)
			}
			if string(s.ClusterID) != tc.cluster || s.Token != tc.token || (tc.cluster == "") != (s.ClusterID == nil) {
				t.Fatalf("ParseState = %q@%d", s.ClusterID, s.Token)
			}
		})
	}
}

func TestGoldenRequests(t *testing.T) {
	g := golden(t)
	for _, tc := range []struct{ in, known, unknown string }{
		{"req.plain", "req.plain.stamped", "req.plain"},
		{"req.tags", "req.tags.stamped", "req.tags"},
		{"req.tag0", "req.tag0.stamped", "req.tag0"}, // Unknown store keeps the caller's tag 0
		{"req.v8", "req.v8", "req.v8"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			for _, store := range []struct {
				name  string
				store consistency.Store
				want  string
			}{
				{"known", knownStore(t, "abc", 42), tc.known},
				{"unknown", consistency.NewMemoryStore(), tc.unknown},
			} {
				c, m, _ := newTestConn(t, store.store, nil)
				in := g[tc.in]
				if n, err := c.Write(in); err != nil || n != len(in) {
					t.Fatalf("%s: Write = %d, %v", store.name, n, err)
				}
				if got := m.written.Bytes(); !bytes.Equal(got, g[store.want]) {
					t.Fatalf("%s: wrote %x\nwant  %x", store.name, got, g[store.want])
				}
			}
		})
	}
}

func TestFlexibleTable(t *testing.T) {
	for _, tc := range []struct {
		key, version int16
		req, resp    bool
	}{
		{0, 8, false, false},  // Produce v8
		{0, 9, true, true},    // Produce v9
		{3, 8, false, false},  // Metadata v8
		{3, 9, true, true},    // Metadata v9
		{18, 2, false, false}, // ApiVersions v2
		{18, 3, true, false},  // ApiVersions v3: flexible request, v0 response header
		{7, 0, false, false},  // ControlledShutdown v0
		{-1, 0, false, false}, // unknown keys pass through
		{30000, 5, false, false},
	} {
		if got := requestFlexible(tc.key, tc.version); got != tc.req {
			t.Errorf("requestFlexible(%d, %d) = %v", tc.key, tc.version, got)
		}
		if got := responseFlexible(tc.key, tc.version); got != tc.resp {
			t.Errorf("responseFlexible(%d, %d) = %v", tc.key, tc.version, got)
		}
	}
}

// checkStamped decodes frames written by the interceptor and checks each
// against the original: same header fields and body, tag 0 = want.
func checkStamped(t *testing.T, written []byte, originals [][]byte, cluster string, token int64) {
	t.Helper()
	for k, orig := range originals {
		var h reqHeader
		if err := parseRequest(written, &h); err != nil {
			t.Fatalf("frame %d: %v", k, err)
		}
		frame := written[:4+h.size]
		written = written[4+h.size:]
		var oh reqHeader
		if err := parseRequest(orig, &oh); err != nil {
			t.Fatal(err)
		}
		if h.key != oh.key || h.version != oh.version || h.corr != oh.corr {
			t.Fatalf("frame %d: header changed", k)
		}
		if !bytes.Equal(frame[h.hdrLen:], orig[oh.hdrLen:]) {
			t.Fatalf("frame %d: body changed", k)
		}
		if !h.flexible {
			if !bytes.Equal(frame, orig) {
				t.Fatalf("frame %d: non-flexible frame changed", k)
			}
			continue
		}
		if h.tag0End == 0 {
			t.Fatalf("frame %d: no tag 0", k)
		}
		s, err := ParseState(tagData(frame[h.fieldsAt:h.tag0End]))
		if err != nil || string(s.ClusterID) != cluster || s.Token != token {
			t.Fatalf("frame %d: tag 0 = %q@%d, %v", k, s.ClusterID, s.Token, err)
		}
	}
	if len(written) != 0 {
		t.Fatalf("%d trailing bytes", len(written))
	}
}

func testFrames() [][]byte {
	txn := "txn-1"
	return [][]byte{
		reqFrame(metadataReq(12), 1),
		reqFrame(metadataReq(8), 2),
		reqFrame(produceReq(9, 0, nil), 3),   // acks=0: no response
		reqFrame(produceReq(9, -1, &txn), 4), // flexible, compact txn id
		reqFrame(produceReq(3, 1, &txn), 5),  // int16 txn id
		reqFrame(produceReq(7, 0, nil), 6),   // acks=0, not flexible
		reqFrame(apiVersionsReq(4), 7),
		// Larger than coalesceMax: these leave through writev.
		reqFrame(bigProduceReq(9), 8),
		reqFrame(bigProduceReq(7), 9),
	}
}

// bigProduceReq is an acks=all produce request carrying 20 KB of
// (unparsed) record bytes.
func bigProduceReq(version int16) kmsg.Request {
	r := produceReq(version, -1, nil)
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = bytes.Repeat([]byte("0123456789"), 2000)
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "t"
	t.Partitions = append(t.Partitions, p)
	r.(*kmsg.ProduceRequest).Topics = append(r.(*kmsg.ProduceRequest).Topics, t)
	return r
}

func TestWriteSplitAndConcatenated(t *testing.T) {
	frames := testFrames()
	var all []byte
	for _, f := range frames {
		all = append(all, f...)
	}
	for _, tc := range []struct {
		name   string
		chunks func() [][]byte
	}{
		{"frame per write", func() [][]byte { return frames }},
		{"all in one write", func() [][]byte { return [][]byte{all} }},
		{"byte by byte", func() [][]byte {
			var out [][]byte
			for k := range all {
				out = append(out, all[k:k+1])
			}
			return out
		}},
		{"odd chunks", func() [][]byte {
			var out [][]byte
			for rest, n := all, 1; len(rest) > 0; n = n%13 + 3 {
				k := min(n, len(rest))
				out = append(out, rest[:k])
				rest = rest[k:]
			}
			return out
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m, i := newTestConn(t, knownStore(t, "cluster-a", 77), nil)
			for _, chunk := range tc.chunks() {
				if n, err := c.Write(chunk); err != nil || n != len(chunk) {
					t.Fatalf("Write = %d, %v, want %d", n, err, len(chunk))
				}
			}
			checkStamped(t, m.written.Bytes(), frames, "cluster-a", 77)
			// produce v9 acks=0 and produce v7 acks=0 expect nothing.
			var corrs []int32
			for e, ok := c.q.peek(); ok; e, ok = c.q.peek() {
				corrs = append(corrs, e.corr)
				c.q.pop()
			}
			if want := []int32{1, 2, 4, 5, 7, 8, 9}; !equalInt32(corrs, want) {
				t.Fatalf("in flight %v, want %v", corrs, want)
			}
			if got := i.Stats().RequestsStamped; got != 5 { // v12 metadata, three v9 produces, ApiVersions v4
				t.Fatalf("RequestsStamped = %d, want 5", got)
			}
		})
	}
}

func apiVersionsReq(version int16) kmsg.Request {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = version
	return r
}

func equalInt32(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func TestWriteUnknownStoreSendsNoTag(t *testing.T) {
	frames := testFrames()
	c, m, i := newTestConn(t, consistency.NewMemoryStore(), nil)
	var all []byte
	for _, f := range frames {
		all = append(all, f...)
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(m.written.Bytes(), all) {
		t.Fatal("an Unknown store changed request bytes")
	}
	if i.Stats().RequestsStamped != 0 {
		t.Fatal("counted stamps while Unknown")
	}
}

func TestWriteMalformed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"negative size", []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}},
		{"size below header", []byte{0, 0, 0, 4, 0, 3, 0, 12}},
		{"client id length -2", []byte{0, 0, 0, 10, 0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xfe}},
		{"client id past frame", []byte{0, 0, 0, 10, 0, 3, 0, 12, 0, 0, 0, 1, 0, 5}},
		{"tags out of order", []byte{0, 0, 0, 0x11, 0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 2, 3, 0, 1, 0, 0}},
		{"duplicate tag", []byte{0, 0, 0, 0x11, 0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 2, 1, 0, 1, 0, 0}},
		{"tag past frame", []byte{0, 0, 0, 0x0d, 0, 3, 0, 12, 0, 0, 0, 1, 0, 0, 1, 1, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, _ := newTestConn(t, knownStore(t, "c", 1), nil)
			if _, err := c.Write(tc.frame); !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("Write err = %v, want ErrMalformedHeader", err)
			}
		})
	}
}

func TestRequestTagOrder(t *testing.T) {
	// Stamping keeps tags strictly ascending whatever was there.
	g := golden(t)
	for _, name := range []string{"req.plain", "req.tags", "req.tag0"} {
		c, m, _ := newTestConn(t, knownStore(t, "abc", 42), nil)
		if _, err := c.Write(g[name]); err != nil {
			t.Fatal(err)
		}
		var h reqHeader
		if err := parseRequest(m.written.Bytes(), &h); err != nil { // parseRequest rejects disorder
			t.Fatalf("%s: %v", name, err)
		}
	}
}

// TestWriteKeepsNoCopy: a small request is copied into one buffer for a
// single write; the copy is wiped afterwards (SASL frames carry passwords,
// admin requests may), also when the frame reaches the interceptor in
// pieces or as raw SASL bytes.
func TestWriteKeepsNoCopy(t *testing.T) {
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.Version = 2
	auth.SASLAuthBytes = []byte("\x00user\x00a-secret-password")
	authFrame := reqFrame(auth, 2)
	produce := reqFrame(produceReq(12, -1, nil), 1)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 0
	hs.Mechanism = "PLAIN"
	raw := []byte("\x00\x00\x00\x15\x00user\x00another-password")
	for _, tc := range []struct {
		name      string
		writes    [][]byte
		unstamped bool // no flexible request: nothing grows
	}{
		{name: "metadata", writes: [][]byte{reqFrame(metadataReq(12), 1)}},
		{name: "produce then SaslAuthenticate", writes: [][]byte{append(append([]byte(nil), produce...), authFrame...)}},
		{name: "SaslAuthenticate in two writes", writes: [][]byte{authFrame[:len(authFrame)-10], authFrame[len(authFrame)-10:]}},
		{name: "SaslAuthenticate split inside its header", writes: [][]byte{authFrame[:7], authFrame[7:]}},
		{name: "raw SASL after SaslHandshake v0", writes: [][]byte{reqFrame(hs, 3), raw}, unstamped: true},
		{name: "produce, then the end of a SaslAuthenticate", writes: [][]byte{append(append([]byte(nil), produce...), authFrame[:len(authFrame)-10]...), authFrame[len(authFrame)-10:]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, m, _ := newTestConn(t, knownStore(t, "cluster-a", 77), nil)
			total := 0
			for i, w := range tc.writes {
				total += len(w)
				before := m.written.Len()
				if _, err := c.Write(w); err != nil {
					t.Fatal(err)
				}
				if len(c.w.coal) == 0 && !tc.unstamped && m.written.Len() > before {
					t.Fatalf("write %d did not go through the copy", i)
				}
				if !bytes.Equal(c.w.coal, make([]byte, len(c.w.coal))) {
					t.Fatalf("after write %d the copy of the request is still in memory", i)
				}
				for _, held := range [][]byte{c.w.coal[:cap(c.w.coal)], c.w.wpend[:cap(c.w.wpend)], c.w.scratch[:cap(c.w.scratch)]} {
					if bytes.Contains(held, []byte("password")) {
						t.Fatalf("after write %d a buffer of the connection still holds a password", i)
					}
				}
			}
			if m.written.Len() < total || (!tc.unstamped && m.written.Len() == total) { // stamped: longer than the original
				t.Fatalf("wrote %d bytes of %d", m.written.Len(), total)
			}
		})
	}
}

// TestStampFollowsStore: the encoded tag 0 is kept between requests, so each
// request must still carry the store as it is when the request is written:
// after an advance, after a reset to another cluster, and not at all once
// the store is Unknown again. Both the whole-frame and the split write path
// are checked.
func TestStampFollowsStore(t *testing.T) {
	frame := reqFrame(metadataReq(12), 1)
	for _, split := range []bool{false, true} {
		store := knownStore(t, "cluster-a", 5)
		c, m, _ := newTestConn(t, store, nil)
		write := func(want consistency.Token) {
			t.Helper()
			defer c.q.pop()
			m.written.Reset()
			chunks := [][]byte{frame}
			if split {
				chunks = [][]byte{frame[:7], frame[7:]}
			}
			for _, ch := range chunks {
				if _, err := c.Write(ch); err != nil {
					t.Fatal(err)
				}
			}
			if e, ok := c.q.peek(); !ok || e.sent != want.Offset() {
				t.Fatalf("split %v: in flight %+v, %v; want sent %d", split, e, ok, want.Offset())
			}
			if want.IsUnknown() {
				if !bytes.Equal(m.written.Bytes(), frame) {
					t.Fatalf("split %v: an Unknown store changed the request", split)
				}
				return
			}
			checkStamped(t, m.written.Bytes(), [][]byte{frame}, want.ClusterID(), want.Offset())
		}
		write(consistency.MustOf("cluster-a", 5))
		write(consistency.MustOf("cluster-a", 5))
		if _, err := store.Advance(consistency.MustOf("cluster-a", 900)); err != nil {
			t.Fatal(err)
		}
		write(consistency.MustOf("cluster-a", 900))
		store.Reset()
		write(consistency.Unknown())
		// Another cluster at the same offset: the cluster id must change.
		if _, err := store.Advance(consistency.MustOf("cluster-bb", 900)); err != nil {
			t.Fatal(err)
		}
		write(consistency.MustOf("cluster-bb", 900))
	}
}

// TestRefusedRequestLeavesNoCopy: when the in-flight ring is full and the
// write deadline has passed, the request is refused, and the header stamped
// for it does not stay behind in the one-write buffer.
func TestRefusedRequestLeavesNoCopy(t *testing.T) {
	c, _, _ := newTestConn(t, knownStore(t, "cluster-a", 77), nil)
	frame := reqFrame(metadataReq(12), 1)
	for range maxInflight {
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.SetWriteDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(frame); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write with a full ring after the deadline: %v, want a deadline error", err)
	}
	if held := c.w.coal[:cap(c.w.coal)]; !bytes.Equal(held, make([]byte, len(held))) {
		t.Fatal("the refused request's stamped header is still in the one-write buffer")
	}
}

// TestHandshakeV0WriteErrorKeepsRawMode: after a SaslHandshake v0 request,
// what follows is raw SASL whether or not its write went through, in the
// whole-frame path as in the piecewise one.
func TestHandshakeV0WriteErrorKeepsRawMode(t *testing.T) {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version = 0
	hs.Mechanism = "PLAIN"
	frame := reqFrame(hs, 3)
	for _, chunks := range [][][]byte{{frame}, {frame[:6], frame[6:]}} {
		c, m, _ := newTestConn(t, knownStore(t, "cluster-a", 77), nil)
		for k, ch := range chunks {
			if k == len(chunks)-1 {
				m.Close()
			}
			_, _ = c.Write(ch)
		}
		if !c.w.wraw {
			t.Fatalf("%d writes: not in raw SASL mode after a failed SaslHandshake v0 write", len(chunks))
		}
	}
}
