package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/testkit"
)

// Produce frames written out by hand from the protocol (client id "kc",
// timeout 30000 ms, no topics): the transactional id leads the body only
// from v3 on, as a compact string from v9 on.
var produceGolden = []struct {
	name    string
	version int16
	acks    int16
	txn     *string
	hex     string
	need    int // the bytes up to and including acks
	answer  bool
}{
	// size key version corr clientid | acks timeout topics
	{"v0 acks=-1", 0, -1, nil, "00000016 0000 0000 00000005 0002 6b63 | ffff 00007530 00000000", 18, true},
	{"v0 acks=1", 0, 1, nil, "00000016 0000 0000 00000005 0002 6b63 | 0001 00007530 00000000", 18, true},
	{"v0 acks=0", 0, 0, nil, "00000016 0000 0000 00000005 0002 6b63 | 0000 00007530 00000000", 18, false},
	{"v2 acks=-1", 2, -1, nil, "00000016 0000 0002 00000005 0002 6b63 | ffff 00007530 00000000", 18, true},
	{"v2 acks=0", 2, 0, nil, "00000016 0000 0002 00000005 0002 6b63 | 0000 00007530 00000000", 18, false},
	// size key version corr clientid | txn acks timeout topics
	{"v3 acks=-1", 3, -1, nil, "00000018 0000 0003 00000005 0002 6b63 | ffff ffff 00007530 00000000", 20, true},
	{"v3 acks=0", 3, 0, nil, "00000018 0000 0003 00000005 0002 6b63 | ffff 0000 00007530 00000000", 20, false},
	{"v3 txn acks=1", 3, 1, ptr("tx"), "0000001a 0000 0003 00000005 0002 6b63 | 0002 7478 0001 00007530 00000000", 22, true},
	{"v3 txn acks=0", 3, 0, ptr("tx"), "0000001a 0000 0003 00000005 0002 6b63 | 0002 7478 0000 00007530 00000000", 22, false},
	// size key version corr clientid tags | txn acks timeout topics tags
	{"v9 acks=-1", 9, -1, nil, "00000016 0000 0009 00000005 0002 6b63 00 | 00 ffff 00007530 01 00", 20, true},
	{"v9 acks=0", 9, 0, nil, "00000016 0000 0009 00000005 0002 6b63 00 | 00 0000 00007530 01 00", 20, false},
	{"v9 txn acks=1", 9, 1, ptr("tx"), "00000018 0000 0009 00000005 0002 6b63 00 | 03 7478 0001 00007530 01 00", 22, true},
	{"v9 txn acks=0", 9, 0, ptr("tx"), "00000018 0000 0009 00000005 0002 6b63 00 | 03 7478 0000 00007530 01 00", 22, false},
}

func ptr(s string) *string { return &s }

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.NewReplacer(" ", "", "|", "").Replace(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseProduceAcksGolden(t *testing.T) {
	for _, tc := range produceGolden {
		t.Run(tc.name, func(t *testing.T) {
			frame := unhex(t, tc.hex)
			// The hand-written bytes are what kgo writes.
			r := kmsg.NewPtrProduceRequest()
			r.Version, r.Acks, r.TransactionID, r.TimeoutMillis = tc.version, tc.acks, tc.txn, 30000
			if kgoFrame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("kc")).AppendRequest(nil, r, 5); !bytes.Equal(frame, kgoFrame) {
				t.Fatalf("golden %x, kmsg writes %x", frame, kgoFrame)
			}
			var h reqHeader
			if err := parseRequest(frame, &h); err != nil {
				t.Fatal(err)
			}
			if h.expectsAnswer != tc.answer || h.need != tc.need {
				t.Fatalf("expectsAnswer %v need %d, want %v %d", h.expectsAnswer, h.need, tc.answer, tc.need)
			}
			// Short of acks the answer is undecided.
			if err := parseRequest(frame[:tc.need-1], &h); err != errShort {
				t.Fatalf("parse of %d bytes: %v, want errShort", tc.need-1, err)
			}
			// Through a connection: an answered produce is awaited and its
			// answer reaches kgo.
			c, m, _ := newTestConn(t, consistency.NewMemoryStore(), nil)
			if _, err := c.Write(frame); err != nil {
				t.Fatal(err)
			}
			if got := c.q.len(); got != map[bool]int{true: 1, false: 0}[tc.answer] {
				t.Fatalf("%d requests in flight", got)
			}
			if !tc.answer {
				return
			}
			var tags []byte
			if tc.version >= 9 {
				tags = []byte{0}
			}
			resp := respFrame(5, tags, []byte{0, 0, 0, 0})
			m.in = resp
			got, err := readAll(c, 64)
			if !errors.Is(err, io.EOF) || !bytes.Equal(got, resp) {
				t.Fatalf("read %x, %v; want %x, EOF", got, err, resp)
			}
		})
	}
}

// noAckProduce is an acks=0 produce frame.
func noAckProduce(version int16, corr int32) []byte {
	return reqFrame(produceReq(version, 0, nil), corr)
}

func TestNoAckProduceAnswered(t *testing.T) {
	body := []byte{0, 0, 0, 0} // opaque: an acks=0 answer is never held
	for _, tc := range []struct {
		name    string
		reqs    [][]byte
		resps   [][]byte
		token   int64  // the store's token after reading, 0 for unchanged
		wantErr string // "" when every byte must reach kgo
	}{{
		name:  "flexible answers, then the awaited one",
		reqs:  [][]byte{noAckProduce(9, 1), noAckProduce(9, 2), reqFrame(metadataReq(12), 3)},
		resps: [][]byte{respFrame(1, stateTags("abc", 20), body), respFrame(2, stateTags("abc", 21), body), respFrame(3, stateTags("abc", 22), body)},
		token: 22,
	}, {
		name:  "only some answered",
		reqs:  [][]byte{noAckProduce(9, 1), noAckProduce(9, 2), reqFrame(metadataReq(12), 3), noAckProduce(9, 4)},
		resps: [][]byte{respFrame(2, stateTags("abc", 20), body), respFrame(3, []byte{0}, body), respFrame(4, stateTags("abc", 23), body)},
		token: 23,
	}, {
		name:  "not flexible",
		reqs:  [][]byte{noAckProduce(7, 1), noAckProduce(7, 2)},
		resps: [][]byte{respFrame(1, nil, body), respFrame(2, nil, body)},
	}, {
		name:  "correlation ids wrapped",
		reqs:  [][]byte{noAckProduce(9, math.MaxInt32), noAckProduce(9, math.MinInt32)},
		resps: [][]byte{respFrame(math.MaxInt32, stateTags("abc", 20), body), respFrame(math.MinInt32, stateTags("abc", 21), body)},
		token: 21,
	}, {
		name:    "newer than any acks=0 produce",
		reqs:    [][]byte{noAckProduce(9, 1)},
		resps:   [][]byte{respFrame(2, []byte{0}, body)},
		wantErr: "answers no request in flight",
	}, {
		name:    "newer than any acks=0 produce, a request in flight",
		reqs:    [][]byte{noAckProduce(9, 1), reqFrame(metadataReq(12), 2)},
		resps:   [][]byte{respFrame(3, []byte{0}, body)},
		wantErr: "correlation id 3, expected 2",
	}, {
		name:    "no acks=0 produce sent",
		reqs:    [][]byte{reqFrame(produceReq(9, -1, nil), 1)},
		resps:   [][]byte{respFrame(1, []byte{0}, body), respFrame(0, []byte{0}, body)},
		wantErr: "answers no request in flight",
	}} {
		for _, chunk := range []int{0, 1, 7} {
			store := knownStore(t, "abc", 10)
			c, m, _ := newTestConn(t, store, nil)
			for _, r := range tc.reqs {
				if _, err := c.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			m.in, m.chunk = bytes.Join(tc.resps, nil), chunk
			stream := m.in
			got, err := readAll(c, 64)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrMalformedHeader) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s, chunk %d: error %v, want one containing %q", tc.name, chunk, err, tc.wantErr)
				}
				continue
			}
			if !errors.Is(err, io.EOF) || !bytes.Equal(got, stream) {
				t.Fatalf("%s, chunk %d: read %x, %v; want %x, EOF", tc.name, chunk, got, err, stream)
			}
			if want := max(tc.token, 10); store.Load().Offset() != want {
				t.Fatalf("%s, chunk %d: store at %v, want token %d", tc.name, chunk, store.Load(), want)
			}
			if c.q.len() != 0 {
				t.Fatalf("%s, chunk %d: %d requests still in flight", tc.name, chunk, c.q.len())
			}
		}
	}
}

// tokenWaiter is an Observer that lets a test wait for the store to reach a
// token.
type tokenWaiter struct {
	recorder
	mu      sync.Mutex
	at      int64
	changed chan struct{} // closed and replaced on every advance
}

func newTokenWaiter() *tokenWaiter { return &tokenWaiter{changed: make(chan struct{})} }

func (w *tokenWaiter) OnTokenAdvanced(from, to consistency.Token) {
	w.recorder.OnTokenAdvanced(from, to)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at = to.Offset()
	close(w.changed)
	w.changed = make(chan struct{})
}

func (w *tokenWaiter) wait(t testing.TB, token int64, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		at, changed := w.at, w.changed
		w.mu.Unlock()
		if at >= token {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("store at token %d after %v, want %d", at, timeout, token)
		}
	}
}

// A broker that answers acks=0 produce requests (Azure Event Hubs does) keeps
// its connection: kgo reads and drops the answers, the interceptor reads
// their tokens.
func TestKfakeNoAckProduceAnswered(t *testing.T) {
	// Every write idle-checked, as on a loaded machine where the first
	// produce comes more than defaultIdleCheckAfter after the connection's setup
	// (and kgo's discard reader is already reading).
	sc := newSpyCluster(t, 1, kfake.SeedTopics(1, testTopic))
	var mu sync.Mutex
	token := int64(100)
	sc.setHooks(spyHooks{answer: func(key, version int16, body []byte, _ int64) ([]byte, int64, bool) {
		if key != produceKey {
			return nil, 0, false
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = version
		if err := req.ReadFrom(body); err != nil || req.Acks != 0 {
			return nil, 0, false
		}
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		for _, tp := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
			for _, p := range tp.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition = p.Partition
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		mu.Lock()
		defer mu.Unlock()
		token++
		return resp.AppendTo(nil), token, true
	}})
	store := consistency.NewMemoryStore()
	obs := newTokenWaiter()
	i := newInterceptor(t, Config{Store: store, Dial: sc.dial, Observer: obs, timing: timing{idleCheckAfter: time.Nanosecond}})
	cl := newClient(t, sc.seeds(), i, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	ctx := testkit.Ctx(t)

	const rounds = 5
	for r := 1; r <= rounds; r++ {
		// One record, one request, one answer with token 100+r, which only
		// an intact connection reads.
		produceN(t, ctx, cl, testTopic, r, 1)
		obs.wait(t, 100+int64(r), 5*time.Second)
	}
	produceConns := map[int]bool{}
	for _, r := range sc.requests() {
		if r.key == produceKey {
			produceConns[r.conn] = true
		}
	}
	if len(produceConns) != 1 {
		t.Fatalf("produce requests went over %d connections, want 1", len(produceConns))
	}
	if _, _, misroutes := obs.counts(); misroutes != 0 || store.Load().Offset() != 100+rounds {
		t.Fatalf("store at %v, %d misroutes", store.Load(), misroutes)
	}
}
