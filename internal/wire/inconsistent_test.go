package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// TestInconsistentWhateverHeaderToken: an INCONSISTENT_METADATA answer to a
// request that carried a token is retried (the connection fails with the
// typed, temporary error) whatever its header says: below the request's
// token, at it, above it, or no tag 0 at all; whether the frame arrives
// whole in one read or in pieces.
func TestInconsistentWhateverHeaderToken(t *testing.T) {
	for _, hdr := range []struct {
		name string
		tags []byte
		at   int64
	}{
		{"below", stateTags("abc", 90), 90},
		{"equal", stateTags("abc", 100), 100},
		{"above", stateTags("abc", 5000), 5000},
		{"no tag 0", []byte{0}, 0},
	} {
		for _, chunk := range []int{0, 3} {
			t.Run(fmt.Sprintf("%s/chunk%d", hdr.name, chunk), func(t *testing.T) {
				store := knownStore(t, "abc", 100)
				c, m, i := newTestConn(t, store, nil)
				sendRequests(t, c, metadataReq(12))
				first := respFrame(0, hdr.tags, inconsistentBody(t, 3, 12, 1243))
				m.in, m.chunk = first, chunk
				got, err := readAll(c, 4096)
				var ie *InconsistentMetadataError
				if !errors.As(err, &ie) || !ie.Temporary() || !errors.Is(err, consistency.ErrInconsistentMetadata) {
					t.Fatalf("chunk %d: err = %v, want InconsistentMetadataError", chunk, err)
				}
				if ie.Sent != 100 || ie.BrokerAt != hdr.at {
					t.Fatalf("error fields %+v", ie)
				}
				if len(got) >= len(first) {
					t.Fatal("the INCONSISTENT_METADATA frame reached kgo")
				}
				if i.Stats().InconsistentMetadata != 1 {
					t.Fatal("not counted")
				}
			})
		}
	}
}

// TestInconsistentProduceAheadRewritten: a Produce answered
// INCONSISTENT_METADATA with a header token above the request's is
// rewritten to NOT_ENOUGH_REPLICAS, which kgo retries, as below it is.
func TestInconsistentProduceAheadRewritten(t *testing.T) {
	store := knownStore(t, "abc", 100)
	c, m, i := newTestConn(t, store, nil)
	sendRequests(t, c, produceReq(9, -1, nil))
	body := inconsistentBody(t, 0, 9, 1243)
	first := respFrame(0, stateTags("abc", 100), body)
	m.in = first
	got, err := readAll(c, 4096)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("err = %v", err)
	}
	want := append(append([]byte{}, first[:len(first)-len(body)]...), inconsistentBody(t, 0, 9, produceRetryCode)...)
	if !bytes.Equal(got, want) {
		t.Fatalf("kgo got %x\nwant     %x", got, want)
	}
	if i.Stats().InconsistentMetadata != 1 {
		t.Fatal("not counted")
	}
}

// TestCodeBytesElsewherePassUntouched: an answer whose bytes hold the
// code's bytes outside an error field (a topic name here) is decoded, found
// clean, and handed on byte for byte, in one read or in pieces.
func TestCodeBytesElsewherePassUntouched(t *testing.T) {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = 12
	tp := kmsg.NewMetadataResponseTopic()
	tp.Topic = kmsg.StringPtr("a\x04\xdbb")
	r.Topics = append(r.Topics, tp)
	body := r.AppendTo(nil)
	if !hasCode(body, 1243) {
		t.Fatal("test body lacks the code's bytes")
	}
	for _, chunk := range []int{0, 3} {
		store := knownStore(t, "abc", 100)
		c, m, i := newTestConn(t, store, nil)
		sendRequests(t, c, metadataReq(12))
		frame := respFrame(0, stateTags("abc", 100), body)
		m.in, m.chunk = frame, chunk
		got, err := readAll(c, 4096)
		if !errors.Is(err, io.EOF) || !bytes.Equal(got, frame) {
			t.Fatalf("chunk %d: got %x, %v", chunk, got, err)
		}
		if i.Stats().InconsistentMetadata != 0 {
			t.Fatal("counted")
		}
	}
}

// TestLargeAnswersAreNotScanned: an answer larger than any
// INCONSISTENT_METADATA answer to its request can be carries data; it is
// neither held nor scanned, even when its bytes hold the code's.
func TestLargeAnswersAreNotScanned(t *testing.T) {
	req := metadataReq(12)
	size := len(reqFrame(req, 0)) - 4
	big := bytes.Repeat([]byte{0x04, 0xdb}, (maxInconsistentGrowth*size+maxInconsistentSlack)/2+1)
	store := knownStore(t, "abc", 100)
	c, m, _ := newTestConn(t, store, nil)
	sendRequests(t, c, req)
	frame := respFrame(0, stateTags("abc", 100), big)
	m.in, m.chunk = frame, 7
	// Passed on as it arrives, a few bytes at a time; a held frame's body
	// would come out whole (up to the buffer) once read to its end. The
	// header's bytes pass as they come either way.
	buf := make([]byte, 4096)
	for k := range 20 {
		n, err := c.Read(buf)
		if err != nil || n == 0 {
			t.Fatalf("read %d: %d, %v", k, n, err)
		}
		if n >= 64 {
			t.Fatalf("read %d gave %d bytes: the large answer was held", k, n)
		}
	}
}

func TestHasCode(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want bool
	}{
		{nil, false},
		{[]byte{0x04}, false},
		{[]byte{0x04, 0xdb}, true},
		{[]byte{0xdb, 0x04}, false},
		{[]byte{0x04, 0x04, 0xdb}, true},
		{[]byte{1, 2, 0x04, 3, 0x04}, false},
	} {
		if got := hasCode(tc.b, 1243); got != tc.want {
			t.Errorf("hasCode(%x) = %v", tc.b, got)
		}
	}
	if !hasCode([]byte{0xff, 0x9c}, -100) {
		t.Error("negative code")
	}
}

// FuzzHasCode checks the scan against a plain search.
func FuzzHasCode(f *testing.F) {
	f.Add([]byte{0x04, 0xdb}, int16(1243))
	f.Add([]byte{0x04, 0x04, 0x01, 0xdb}, int16(1243))
	f.Fuzz(func(t *testing.T, b []byte, code int16) {
		want := bytes.Contains(b, []byte{byte(uint16(code) >> 8), byte(code)})
		if got := hasCode(b, code); got != want {
			t.Fatalf("hasCode(%x, %d) = %v", b, code, got)
		}
	})
}

// TestInconsistentWithMessagesIsHeld: an INCONSISTENT_METADATA answer that
// carries an error message per resource, as Kafka's error answers do, is
// many times its request's size when the request names many short names;
// whatever its header token (the request's, or none), it is taken for what
// it is and retried, not handed to kgo (which would report the unknown
// code as UNKNOWN_SERVER_ERROR). A successful answer of the same size with
// no code passes intact.
func TestInconsistentWithMessagesIsHeld(t *testing.T) {
	msg := "The broker's cluster metadata is behind the client's consistency token; retry."
	build := func(n int, code int16) (*kmsg.DescribeConfigsRequest, []byte) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.Version = 4
		resp := kmsg.NewPtrDescribeConfigsResponse()
		resp.Version = 4
		for k := range n {
			r := kmsg.NewDescribeConfigsRequestResource()
			r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, fmt.Sprintf("t%d", k)
			req.Resources = append(req.Resources, r)
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			if code != 0 {
				rr.ErrorMessage = &msg
			} else {
				c := kmsg.NewDescribeConfigsResponseResourceConfig()
				c.Name, c.Value = "retention.ms", kmsg.StringPtr("604800000")
				rr.Configs = append(rr.Configs, c, c)
			}
			resp.Resources = append(resp.Resources, rr)
		}
		return req, resp.AppendTo(nil)
	}
	for _, n := range []int{1, 50, 400} {
		for _, tags := range [][]byte{stateTags("abc", 100), {0}} {
			t.Run(fmt.Sprintf("%d resources, header token %v", n, len(tags) > 1), func(t *testing.T) {
				req, body := build(n, 1243)
				size := len(reqFrame(req, 0)) - 4
				if n > 1 && len(body) <= maxInconsistentGrowth*size+maxInconsistentSlack {
					t.Fatalf("the answer (%d bytes) fits the bound of a Fetch's (%d): the test shows nothing", len(body), maxInconsistentGrowth*size+maxInconsistentSlack)
				}
				c, m, i := newTestConn(t, knownStore(t, "abc", 100), nil)
				sendRequests(t, c, req)
				m.in = respFrame(0, tags, body)
				_, err := readAll(c, 4096)
				var ie *InconsistentMetadataError
				if !errors.As(err, &ie) || !errors.Is(err, consistency.ErrInconsistentMetadata) {
					t.Fatalf("got %v, want an *InconsistentMetadataError", err)
				}
				if i.Stats().InconsistentMetadata != 1 {
					t.Fatalf("counted %d", i.Stats().InconsistentMetadata)
				}

				// The same size of answer with data and no code.
				req, body = build(n, 0)
				c, m, i = newTestConn(t, knownStore(t, "abc", 100), nil)
				sendRequests(t, c, req)
				frame := respFrame(0, tags, body)
				m.in, m.chunk = frame, 5
				got, err := readAll(c, 4096)
				if !errors.Is(err, io.EOF) || !bytes.Equal(got, frame) {
					t.Fatalf("a successful answer: got %d of %d bytes, %v", len(got), len(frame), err)
				}
				if i.Stats().InconsistentMetadata != 0 {
					t.Fatal("a successful answer was counted")
				}
			})
		}
	}
}
