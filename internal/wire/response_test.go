package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
)

func TestGoldenResponses(t *testing.T) {
	g := golden(t)
	for _, tc := range []struct {
		name     string
		hasState bool
		hdrLen   int
	}{
		{"resp.state", true, 4 + 4 + 16},
		{"resp.state.tags", true, 4 + 4 + 19},
		{"resp.notag", false, 4 + 4 + 1},
	} {
		var h respHeader
		if err := parseResponse(g[tc.name], true, &h); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if h.corr != 7 || h.hdrLen != tc.hdrLen || h.hasState != tc.hasState {
			t.Fatalf("%s: %+v", tc.name, h)
		}
		if tc.hasState && (string(h.state.ClusterID) != "abc" || h.state.Token != 42) {
			t.Fatalf("%s: state %q@%d", tc.name, h.state.ClusterID, h.state.Token)
		}
	}
}

// sendRequests writes reqs with correlation ids 0, 1, ... through c.
func sendRequests(t *testing.T, c *conn, reqs ...kmsg.Request) {
	t.Helper()
	for k, r := range reqs {
		if _, err := c.Write(reqFrame(r, int32(k))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadAdvancesAndPassesBytes(t *testing.T) {
	var stream []byte
	stream = append(stream, respFrame(0, stateTags("abc", 10), []byte{1, 2, 3})...)
	stream = append(stream, respFrame(1, nil, []byte{4, 5})...) // Metadata v8: header v0
	stream = append(stream, respFrame(2, stateTags("abc", 30), bytes.Repeat([]byte{9}, 9000))...)
	stream = append(stream, respFrame(3, stateTags("abc", 20), nil)...) // lower: no step back
	stream = append(stream, respFrame(4, nil, []byte{7})...)            // ApiVersions v4: header v0
	stream = append(stream, respFrame(5, []byte{0}, []byte{8})...)      // no tags at all
	for _, tc := range []struct {
		name         string
		chunk, rdBuf int
	}{
		{"one read", 0, 1 << 16},
		{"bufio sized", 0, 4096},
		{"byte by byte", 1, 4096},
		{"odd reads", 7, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			store := consistency.NewMemoryStore()
			c, m, i := newTestConn(t, store, func(cfg *Config) { cfg.Observer = rec })
			sendRequests(t, c, metadataReq(12), metadataReq(8), metadataReq(12), metadataReq(12), apiVersionsReq(4), metadataReq(12))
			m.in, m.chunk = stream, tc.chunk
			got, err := readAll(c, tc.rdBuf)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("read err %v", err)
			}
			if !bytes.Equal(got, stream) {
				t.Fatal("bytes handed to kgo differ from the broker's")
			}
			if cur := store.Load(); cur != consistency.MustOf("abc", 30) {
				t.Fatalf("store = %v, want abc@30", cur)
			}
			st := i.Stats()
			if st.ResponsesRead != 6 || st.TokensAdvanced != 2 {
				t.Fatalf("stats %+v", st)
			}
			if a, _, _ := rec.counts(); a != 2 {
				t.Fatalf("observer saw %d advances", a)
			}
			if n := c.q.len(); n != 0 {
				t.Fatalf("%d requests still in flight", n)
			}
		})
	}
}

func TestReadMalformed(t *testing.T) {
	tag0 := func(payload []byte) []byte {
		b := []byte{1, 0}
		b = binary.AppendUvarint(b, uint64(len(payload)))
		return append(b, payload...)
	}
	negToken := AppendState(nil, "abc", 0)
	binary.BigEndian.PutUint64(negToken[4:], uint64(0xfffffffffffffffe)) // -2
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"negative frame size", []byte{0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0}},
		{"frame too small", []byte{0, 0, 0, 2, 0, 0, 0, 0}},
		{"correlation mismatch", respFrame(99, []byte{0}, nil)},
		{"bad tag count uvarint", respFrame(0, bytes.Repeat([]byte{0xff}, 11), nil)},
		{"tag count beyond frame", respFrame(0, []byte{5}, nil)},
		{"tag size beyond frame", respFrame(0, []byte{1, 3, 40, 1}, nil)},
		{"duplicate tag", respFrame(0, []byte{2, 3, 0, 3, 0}, nil)},
		{"out of order tags", respFrame(0, []byte{2, 4, 0, 3, 0}, nil)},
		{"negative token", respFrame(0, tag0(negToken), nil)},
		{"state truncated", respFrame(0, tag0([]byte{4, 'a', 'b', 'c', 0, 0}), nil)},
		{"state cluster too long", respFrame(0, tag0(append([]byte{0xff, 0x02}, bytes.Repeat([]byte{'x'}, 300)...)), nil)},
		{"state trailing bytes", respFrame(0, tag0(append(AppendState(nil, "abc", 5), 0)), nil)},
		{"garbage", []byte("HTTP/1.1 400 Bad Request\r\n\r\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := knownStore(t, "abc", 3)
			c, m, _ := newTestConn(t, store, nil)
			sendRequests(t, c, metadataReq(12))
			m.in = tc.frame
			_, err := readAll(c, 4096)
			if !errors.Is(err, ErrMalformedHeader) {
				t.Fatalf("err = %v, want ErrMalformedHeader", err)
			}
			if !m.isClosed() {
				t.Fatal("underlying conn left open")
			}
			if cur := store.Load(); cur != consistency.MustOf("abc", 3) {
				t.Fatalf("store moved to %v", cur)
			}
			if _, err2 := c.Read(make([]byte, 8)); !errors.Is(err2, ErrMalformedHeader) {
				t.Fatalf("error is not sticky: %v", err2)
			}
		})
	}
}

func TestReadNoRequestInFlight(t *testing.T) {
	c, m, _ := newTestConn(t, consistency.NewMemoryStore(), nil)
	m.in = respFrame(0, nil, []byte{1})
	if _, err := readAll(c, 4096); !errors.Is(err, ErrMalformedHeader) {
		t.Fatalf("err = %v", err)
	}
}

func TestReadMisroute(t *testing.T) {
	for _, tc := range []struct {
		name      string
		store     func(t *testing.T) *consistency.MemoryStore
		pinned    string
		got       string
		misroute  bool
		wantStore consistency.Token
		adopt     Adoption // what the Adopt hook says
		healed    int      // heals reported
	}{
		{"other cluster than store", func(t *testing.T) *consistency.MemoryStore { return knownStore(t, "abc", 5) }, "", "evil", true, consistency.MustOf("abc", 5), AdoptNone, 0},
		{"other cluster than pin, store unknown", func(*testing.T) *consistency.MemoryStore { return consistency.NewMemoryStore() }, "abc", "evil", true, consistency.Unknown(), AdoptNone, 0},
		{"pin matches, store unknown", func(*testing.T) *consistency.MemoryStore { return consistency.NewMemoryStore() }, "abc", "abc", false, consistency.MustOf("abc", 50), AdoptNone, 0},
		{"no pin, store unknown adopts", func(*testing.T) *consistency.MemoryStore { return consistency.NewMemoryStore() }, "", "any", false, consistency.MustOf("any", 50), AdoptNone, 0},
		{"same cluster", func(t *testing.T) *consistency.MemoryStore { return knownStore(t, "abc", 5) }, "", "abc", false, consistency.MustOf("abc", 50), AdoptNone, 0},
		{"adopted by a bootstrap server", func(t *testing.T) *consistency.MemoryStore { return knownStore(t, "abc", 90) }, "", "new", false, consistency.MustOf("new", 50), AdoptMove, 0},
		{"foreign token replaced by a bootstrap server's", func(t *testing.T) *consistency.MemoryStore { return knownStore(t, "abc", 9_000) }, "", "new", false, consistency.MustOf("new", 50), AdoptForeign, 1},
		{"pin beats adoption", func(t *testing.T) *consistency.MemoryStore { return knownStore(t, "abc", 5) }, "abc", "new", true, consistency.MustOf("abc", 5), AdoptMove, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			store := tc.store(t)
			owner, healed := healLog(store)
			h := NewHealer(HealerConfig{Tokens: owner, Oracle: &scriptedOracle{committed: consistency.MustOf("new", 40)}})
			defer h.Close()
			c, m, i := newTestConn(t, store, func(cfg *Config) {
				cfg.Observer = rec
				cfg.ExpectedCluster = func() string { return tc.pinned }
				cfg.Adopt = func(string, string) Adoption { return tc.adopt }
				cfg.Healer = h
				cfg.Tokens = owner
			})
			sendRequests(t, c, metadataReq(12))
			m.in = respFrame(0, stateTags(tc.got, 50), []byte{1})
			_, err := readAll(c, 4096)
			var me *MisrouteError
			if tc.misroute {
				if !errors.As(err, &me) || !errors.Is(err, ErrMisroute) || !errors.Is(err, consistency.ErrClusterMismatch) || !me.Temporary() {
					t.Fatalf("err = %v, want a temporary MisrouteError", err)
				}
				if !m.isClosed() {
					t.Fatal("misrouted conn left open")
				}
				if _, _, n := rec.counts(); n != 1 || i.Stats().Misroutes != 1 {
					t.Fatal("misroute not counted or observed")
				}
			} else if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v", err)
			}
			if cur := store.Load(); cur != tc.wantStore {
				t.Fatalf("store = %v, want %v", cur, tc.wantStore)
			}
			if got := healed.get(); len(got) != tc.healed {
				t.Fatalf("heals reported: %v, want %d", got, tc.healed)
			}
			if tc.healed == 1 && healed.get()[0] != [2]consistency.Token{consistency.MustOf("abc", 9_000), tc.wantStore} {
				t.Fatalf("heal reported %v", healed.get()[0])
			}
		})
	}
}

// inconsistentBody is a response body for key at version whose error codes
// are code.
func inconsistentBody(t *testing.T, key, version, code int16) []byte {
	t.Helper()
	switch key {
	case 0:
		r := kmsg.NewPtrProduceResponse()
		r.Version = version
		tp := kmsg.NewProduceResponseTopic()
		tp.Topic = "t"
		p := kmsg.NewProduceResponseTopicPartition()
		p.ErrorCode = code
		tp.Partitions = append(tp.Partitions, p)
		r.Topics = append(r.Topics, tp)
		return r.AppendTo(nil)
	case 3:
		r := kmsg.NewPtrMetadataResponse()
		r.Version = version
		tp := kmsg.NewMetadataResponseTopic()
		tp.Topic = kmsg.StringPtr("t")
		tp.ErrorCode = code
		r.Topics = append(r.Topics, tp)
		return r.AppendTo(nil)
	}
	t.Fatalf("no body for key %d", key)
	return nil
}

func TestReadInconsistentMetadata(t *testing.T) {
	for _, tc := range []struct {
		name        string
		req         kmsg.Request
		code        int16 // code in the response
		respToken   int64
		config      int16 // Config.InconsistentMetadataCode
		wantErr     bool
		wantRewrite bool
	}{
		{"metadata answered 1243 behind", metadataReq(12), 1243, 90, 0, true, false},
		{"metadata custom code", metadataReq(12), 777, 90, 777, true, false},
		{"metadata 1243 at the request's token", metadataReq(12), 1243, 100, 0, true, false},
		{"metadata 1243 ahead of the request's token", metadataReq(12), 1243, 150, 0, true, false},
		{"metadata ahead, other error", metadataReq(12), 3, 150, 0, false, false},
		{"produce answered 1243 ahead", produceReq(9, -1, nil), 1243, 150, 0, false, true},
		{"metadata behind, other error", metadataReq(12), 3, 90, 0, false, false},
		{"produce answered 1243 behind", produceReq(9, -1, nil), 1243, 90, 0, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			store := knownStore(t, "abc", 100)
			c, m, i := newTestConn(t, store, func(cfg *Config) {
				cfg.Observer = rec
				cfg.InconsistentMetadataCode = tc.config
			})
			sendRequests(t, c, tc.req, metadataReq(12))
			body := inconsistentBody(t, tc.req.Key(), tc.req.GetVersion(), tc.code)
			first := respFrame(0, stateTags("abc", tc.respToken), body)
			next := respFrame(1, stateTags("abc", 101), []byte{1})
			m.in, m.chunk = append(append([]byte{}, first...), next...), 5
			got, err := readAll(c, 4096)
			if tc.wantErr {
				var ie *InconsistentMetadataError
				if !errors.As(err, &ie) || !errors.Is(err, consistency.ErrInconsistentMetadata) || !ie.Temporary() {
					t.Fatalf("err = %v, want InconsistentMetadataError", err)
				}
				if ie.Sent != 100 || ie.BrokerAt != tc.respToken || ie.APIKey != tc.req.Key() {
					t.Fatalf("error fields %+v", ie)
				}
				if !m.isClosed() {
					t.Fatal("conn left open")
				}
				if len(got) >= len(first) {
					t.Fatal("the whole inconsistent frame reached kgo")
				}
				if _, n, _ := rec.counts(); n != 1 || i.Stats().InconsistentMetadata != 1 {
					t.Fatal("not counted or observed")
				}
				return
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v", err)
			}
			want := append(append([]byte{}, first...), next...)
			if tc.wantRewrite {
				want = append(append([]byte{}, first[:len(first)-len(body)]...), inconsistentBody(t, 0, 9, produceRetryCode)...)
				want = append(want, next...)
				if i.Stats().InconsistentMetadata != 1 {
					t.Fatal("not counted")
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("kgo got %x\nwant     %x", got, want)
			}
			if cur := store.Load(); cur != consistency.MustOf("abc", max(101, tc.respToken)) {
				t.Fatalf("store %v, frames after the held one were not scanned", cur)
			}
		})
	}
}

func TestProduceRetryCodeIsNotEnoughReplicas(t *testing.T) {
	// kgo must retry the rewritten code, and it must mean "not appended"
	// (REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND would make kgo
	// unsure whether the batch was written).
	err := kerr.ErrorForCode(produceRetryCode)
	if err != kerr.NotEnoughReplicas || !kerr.IsRetriable(err) {
		t.Fatalf("produceRetryCode %d is %v", produceRetryCode, err)
	}
}

// metadataBody is a Metadata v12 answer's body naming cluster.
func metadataBody(cluster string) []byte {
	r := kmsg.NewPtrMetadataResponse()
	r.Version = 12
	r.ClusterID = kmsg.StringPtr(cluster)
	return r.AppendTo(nil)
}

// TestReadPinnedMetadata: a pinned interceptor reads the cluster id of every
// Metadata answer, with or without KIP-1243 tags, and fails the connection
// when it names another cluster; other answers and the right cluster pass.
func TestReadPinnedMetadata(t *testing.T) {
	for _, tc := range []struct {
		name, pin, got string
		misroute       bool
	}{
		{"pinned, other cluster", "abc", "evil", true},
		{"pinned, same cluster", "abc", "abc", false},
		{"not pinned", "", "evil", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := consistency.NewMemoryStore()
			c, m, i := newTestConn(t, store, func(cfg *Config) {
				cfg.ExpectedCluster = func() string { return tc.pin }
			})
			sendRequests(t, c, metadataReq(12))
			frame := respFrame(0, []byte{0}, metadataBody(tc.got)) // no tag 0: a broker without KIP-1243
			m.in = frame
			out, err := readAll(c, 4096)
			if tc.misroute {
				require.ErrorIs(t, err, ErrMisroute)
				require.NotContains(t, string(out), tc.got, "kgo never sees the other cluster's answer")
				require.Less(t, len(out), len(frame))
				require.Equal(t, uint64(1), i.Stats().Misroutes)
				return
			}
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, frame, out, "the answer passes unchanged")
		})
	}
}

// learner is a Learner that learns the first cluster it is told.
type learner struct {
	mu   sync.Mutex
	told []string
}

func (l *learner) Learning() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.told) == 0
}

func (l *learner) Learn(cluster string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.told = append(l.told, cluster)
}

// TestReadLearnsCluster: while its Learner is learning, an interceptor
// tells it the cluster id of a Metadata answer without KIP-1243 tags and
// hands the answer on unchanged; once it knows one, no later answer is
// decoded for it.
func TestReadLearnsCluster(t *testing.T) {
	l := &learner{}
	c, m, _ := newTestConn(t, consistency.NewMemoryStore(), func(cfg *Config) { cfg.Learner = l })
	sendRequests(t, c, metadataReq(12), metadataReq(12))
	first := respFrame(0, []byte{0}, metadataBody("cluster-a"))
	second := respFrame(1, []byte{0}, metadataBody("cluster-b"))
	m.in = append(append([]byte(nil), first...), second...)
	out, err := readAll(c, 4096)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, append(append([]byte(nil), first...), second...), out, "the answers pass unchanged")
	require.Equal(t, []string{"cluster-a"}, l.told, "the first answer's cluster, and only it")
}

// TestReadAPIVersionsInconsistentClusterID: earlier drafts of KIP-1242 had
// a broker answer INCONSISTENT_CLUSTER_ID (104) to an ApiVersions naming
// another cluster; franz-go rebootstraps only on REBOOTSTRAP_REQUIRED (129),
// so the interceptor hands kgo that code instead. Other codes pass as they
// are.
func TestReadAPIVersionsInconsistentClusterID(t *testing.T) {
	for _, tc := range []struct{ code, want int16 }{
		{104, 129}, // INCONSISTENT_CLUSTER_ID → REBOOTSTRAP_REQUIRED
		{129, 129},
		{35, 35}, // UNSUPPORTED_VERSION
		{0, 0},
	} {
		c, m, _ := newTestConn(t, consistency.NewMemoryStore(), nil)
		sendRequests(t, c, apiVersionsReq(4))
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = 4
		r.ErrorCode = tc.code
		body := r.AppendTo(nil)
		m.in = respFrame(0, nil, body) // ApiVersions answers have a v0 header
		out, err := readAll(c, 4096)
		require.ErrorIs(t, err, io.EOF)
		require.Len(t, out, 8+len(body))
		got := kmsg.NewPtrApiVersionsResponse()
		got.Version = 4
		require.NoError(t, got.ReadFrom(out[8:]))
		require.Equal(t, tc.want, got.ErrorCode, "code %d", tc.code)
	}
}

// TestReadAPIVersionsInconsistentMetadata: a KIP-1243 broker behind the
// token an ApiVersions v3+ request carried may answer it
// INCONSISTENT_METADATA, whatever the version; kgo must not see the code
// (it would fail the connection with UNKNOWN_SERVER_ERROR for good): the
// connection fails with a temporary InconsistentMetadataError, so the
// handshake is made again, and the answer is counted and reported.
func TestReadAPIVersionsInconsistentMetadata(t *testing.T) {
	for _, version := range []int16{3, 4, 5} {
		rec := &recorder{}
		c, m, i := newTestConn(t, knownStore(t, "abc", 50), func(cfg *Config) { cfg.Observer = rec })
		sendRequests(t, c, apiVersionsReq(version))
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = version
		r.ErrorCode = DefaultInconsistentMetadataCode
		m.in = respFrame(0, nil, r.AppendTo(nil))
		out, err := readAll(c, 4096)
		var ie *InconsistentMetadataError
		require.ErrorAs(t, err, &ie, "v%d", version)
		require.True(t, ie.Temporary())
		require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
		require.LessOrEqual(t, len(out), 8, "kgo never sees the body and its code (only the frame's size and correlation id went)")
		require.EqualValues(t, 1, i.Stats().InconsistentMetadata)
		_, n, _ := rec.counts()
		require.Equal(t, 1, n, "reported once")
	}
}

// TestReadDataWithEOF: a socket that returns the last bytes together with
// io.EOF must not lose them, also when the frame is held for inspection
// (ApiVersions answers always are).
func TestReadDataWithEOF(t *testing.T) {
	c, m, _ := newTestConn(t, consistency.NewMemoryStore(), nil)
	sendRequests(t, c, apiVersionsReq(4))
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 4
	r.ErrorCode = 104
	frame := respFrame(0, nil, r.AppendTo(nil))
	m.in, m.eofWith = frame, true
	out, err := readAll(c, 4096)
	require.ErrorIs(t, err, io.EOF)
	require.Len(t, out, len(frame), "every byte of the frame reaches kgo before EOF")
	require.Equal(t, []byte{0, 129}, out[8:10], "and the rewrite still happened")
}

// TestLocalCloseIsNoRejection: only a broker ending the connection under a
// stamped request is reported as a rejection; a local close is not.
func TestLocalCloseIsNoRejection(t *testing.T) {
	store := knownStore(t, "abc", 5)
	rec := &rejections{}
	c, _, _ := newTestConn(t, store, func(cfg *Config) { cfg.Observer = rec })
	sendRequests(t, c, metadataReq(12))
	require.NoError(t, c.Close())
	_, _ = readAll(c, 4096)
	require.Zero(t, rec.n.Load(), "a local close is no rejection")

	c, m, _ := newTestConn(t, store, func(cfg *Config) { cfg.Observer = rec })
	sendRequests(t, c, metadataReq(12))
	m.in = nil // the broker hangs up without answering
	_, err := readAll(c, 4096)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, int32(1), rec.n.Load(), "a hang-up under a stamped request is")
}

type rejections struct {
	recorder
	n atomic.Int32
}

func (r *rejections) OnStampRejected(string) { r.n.Add(1) }

// TestMoveRightAfterStartIsAMove: a bootstrap server that answered for
// cluster abc, whose token the store learnt from it, and now answers for
// cluster new is a cluster change even before the watcher's first check
// learnt a cluster (Adopt says AdoptForeign): the store is reset and the
// move reported, never taken for a foreign token and healed. (It used to
// be reported as a heal in about 2 of 8 runs, by the watcher's timing.)
func TestMoveRightAfterStartIsAMove(t *testing.T) {
	store := consistency.NewMemoryStore()
	var changes []tokens.Change
	owner := tokens.New(store, func(c tokens.Change) { changes = append(changes, c) })
	c, m, _ := newTestConn(t, store, func(cfg *Config) {
		cfg.Tokens = owner
		cfg.Adopt = func(string, string) Adoption { return AdoptForeign } // the watcher knows none yet
		cfg.Healer = NewHealer(HealerConfig{Tokens: owner, Oracle: &scriptedOracle{committed: consistency.MustOf("new", 40)}})
	})
	defer c.i.healer.Close()
	sendRequests(t, c, metadataReq(12))
	m.in = respFrame(0, stateTags("abc", 90), []byte{1})
	// One read, not to the end: a connection read to io.EOF is dead, and
	// a write more than the idle bound (1 ms) later is refused as closed
	// while idle (seen once on a loaded machine).
	_, err := c.Read(make([]byte, 4096))
	require.NoError(t, err)
	require.Equal(t, consistency.MustOf("abc", 90), store.Load())

	sendRequests(t, c, metadataReq(12))
	m.in = respFrame(0, stateTags("new", 50), []byte{1})
	_, err = readAll(c, 4096)
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, consistency.MustOf("new", 50), store.Load())
	var got []tokens.Kind
	for _, ch := range changes {
		got = append(got, ch.Kind)
	}
	require.Equal(t, []tokens.Kind{tokens.Advanced, tokens.Moved, tokens.Advanced}, got)
	require.True(t, changes[1].StoreReset)
	require.Equal(t, "abc", changes[1].FromCluster)
}

// TestClosedBehindIsInconsistentMetadata: a KIP-1243 broker may close the
// connection of a request it is behind on where the answer has no place
// for an error. A hang-up under a request whose token is beyond what the
// broker last said it applied reaches kgo as INCONSISTENT_METADATA
// (temporary, errors.Is consistency.ErrInconsistentMetadata), not io.EOF;
// one under a request it had caught up with stays io.EOF.
func TestClosedBehindIsInconsistentMetadata(t *testing.T) {
	for _, tc := range []struct {
		name   string
		raise  int64 // the store's token when the second request goes out
		behind bool
	}{
		{"beyond the broker's last token", 60, true},
		{"at the broker's last token", 50, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := consistency.NewMemoryStore()
			rec := &recorder{}
			c, m, i := newTestConn(t, store, func(cfg *Config) { cfg.Observer = rec })
			sendRequests(t, c, metadataReq(12))
			m.in = respFrame(0, stateTags("abc", 50), []byte{1})
			_, err := c.Read(make([]byte, 4096))
			require.NoError(t, err)
			_, err = store.Advance(consistency.MustOf("abc", tc.raise)) // another connection learnt more
			require.NoError(t, err)
			sendRequests(t, c, metadataReq(12))
			m.in = nil // the broker hangs up without answering
			_, err = readAll(c, 4096)
			if !tc.behind {
				require.ErrorIs(t, err, io.EOF)
				require.Zero(t, i.Stats().InconsistentMetadata)
				return
			}
			var ie *InconsistentMetadataError
			require.ErrorAs(t, err, &ie)
			require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
			require.True(t, ie.Temporary())
			require.Equal(t, int64(60), ie.Sent)
			require.Equal(t, int64(50), ie.BrokerAt)
			require.EqualValues(t, 1, i.Stats().InconsistentMetadata)
			_, n, _ := rec.counts()
			require.Equal(t, 1, n)
		})
	}
}

// TestClosedBehindOnHandshake: a KIP-1243 broker in close mode closes the
// connection of a stamped ApiVersions it is behind on; kgo would take the
// EOF for a TLS mismatch and never retry (ErrFirstReadEOF). The reader
// returns a temporary INCONSISTENT_METADATA instead; an unstamped one
// stays io.EOF.
func TestClosedBehindOnHandshake(t *testing.T) {
	for _, stamped := range []bool{true, false} {
		store := consistency.NewMemoryStore()
		if stamped {
			_, err := store.Advance(consistency.MustOf("abc", 60))
			require.NoError(t, err)
		}
		c, m, _ := newTestConn(t, store, nil)
		sendRequests(t, c, apiVersionsReq(4))
		m.in = nil
		_, err := readAll(c, 4096)
		if !stamped {
			require.ErrorIs(t, err, io.EOF)
			continue
		}
		var ie *InconsistentMetadataError
		require.ErrorAs(t, err, &ie)
		require.True(t, ie.Temporary())
		require.Equal(t, int64(60), ie.Sent)
		require.Equal(t, int64(-1), ie.BrokerAt)
	}
}

// TestRefusedHandshakeIsReported: a KIP-1243 broker answering a stamped
// ApiVersions REBOOTSTRAP_REQUIRED refuses the cluster the token named:
// the RejectObserver hears it (on a bootstrap server the session then
// checks which cluster it belongs to, and a token given from another
// cluster is healed). An unstamped refusal is KIP-1242's, not reported.
func TestRefusedHandshakeIsReported(t *testing.T) {
	for _, stamped := range []bool{true, false} {
		store := consistency.NewMemoryStore()
		if stamped {
			_, err := store.Advance(consistency.MustOf("other", 9))
			require.NoError(t, err)
		}
		rec := &rejections{}
		c, m, _ := newTestConn(t, store, func(cfg *Config) { cfg.Observer = rec })
		sendRequests(t, c, apiVersionsReq(4))
		r := kmsg.NewPtrApiVersionsResponse()
		r.Version = 4
		r.ErrorCode = 129
		m.in = respFrame(0, nil, r.AppendTo(nil))
		_, _ = readAll(c, 4096)
		want := int32(0)
		if stamped {
			want = 1
		}
		require.Equal(t, want, rec.n.Load(), "stamped=%v", stamped)
	}
}
