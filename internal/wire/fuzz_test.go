package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// maxFuzzStream bounds the streams the fuzz targets run; longer ones return
// at once, so they never find coverage. Go minimizes every input that finds
// new coverage, in a number of runs that grows with the square of its
// length, for up to -fuzzminimizetime (a minute by default): seeds of 40
// KiB kept both workers minimizing for all but the first seconds of a
// minute, and inputs of 1 KiB still for several seconds each. A few
// frames reach every header and split path; frames too large to be
// coalesced are TestWriteSplitAndConcatenated's.
const maxFuzzStream = 256

// FuzzWriteRequests feeds arbitrary request streams, split into writes of
// arbitrary sizes. Nothing may panic; when every write succeeds, the output
// must decode to the same frames with tag 0 added to flexible ones.
func FuzzWriteRequests(f *testing.F) {
	g := golden(f)
	for _, name := range []string{"req.plain", "req.tags", "req.tag0", "req.v8"} {
		f.Add(g[name], uint8(0))
		f.Add(g[name], uint8(1))
	}
	var all []byte
	frames := append(testFrames(), reqFrame(produceReq(2, -1, nil), 10), reqFrame(produceReq(2, 0, nil), 11))
	for _, fr := range frames {
		if len(fr) > maxFuzzStream {
			continue // the large produce frames: see maxFuzzStream
		}
		f.Add(fr, uint8(3))
		if len(all)+len(fr) <= maxFuzzStream {
			all = append(all, fr...)
		}
	}
	f.Add(all, uint8(0))
	f.Add(all, uint8(7))
	f.Fuzz(func(t *testing.T, stream []byte, split uint8) {
		if len(stream) > maxFuzzStream {
			return
		}
		c, m, _ := newTestConn(t, knownStore(t, "fz", 9), nil)
		rest := stream
		for len(rest) > 0 {
			k := len(rest)
			if split > 0 {
				k = min(int(split), k)
			}
			n, err := c.Write(rest[:k])
			if err != nil {
				if !errors.Is(err, ErrMalformedHeader) {
					t.Fatalf("write error %v does not wrap ErrMalformedHeader", err)
				}
				return
			}
			if n != k {
				t.Fatalf("Write = %d, want %d", n, k)
			}
			rest = rest[k:]
		}
		out := m.written.Bytes()
		in := stream
		for {
			if len(in) == 0 {
				if len(out) != 0 {
					t.Fatalf("%d bytes written past the last frame", len(out))
				}
				return
			}
			var ih, oh reqHeader
			if err := parseRequest(in, &ih); err != nil || 4+int(ih.size) > len(in) {
				// A trailing partial frame: its header may still be
				// held back, so out may be shorter, never longer.
				if err == nil && len(out) > len(in)+1024 {
					t.Fatalf("partial frame grew from %d to %d bytes", len(in), len(out))
				}
				return
			}
			if err := parseRequest(out, &oh); err != nil {
				t.Fatalf("output frame does not parse: %v", err)
			}
			inFrame, outFrame := in[:4+ih.size], out[:4+oh.size]
			in, out = in[4+ih.size:], out[4+oh.size:]
			if !ih.flexible {
				if !bytes.Equal(inFrame, outFrame) {
					t.Fatal("non-flexible frame changed")
				}
				continue
			}
			if !bytes.Equal(inFrame[4:ih.tagsAt], outFrame[4:oh.tagsAt]) || !bytes.Equal(inFrame[ih.hdrLen:], outFrame[oh.hdrLen:]) {
				t.Fatal("header fields or body changed")
			}
			s, err := ParseState(tagData(outFrame[oh.fieldsAt:oh.tag0End]))
			if oh.tag0End == 0 || err != nil || string(s.ClusterID) != "fz" || s.Token != 9 {
				t.Fatalf("tag 0 missing or wrong: %v", err)
			}
			inRest := inFrame[ih.fieldsAt:ih.hdrLen]
			if ih.tag0End > 0 {
				inRest = inFrame[ih.tag0End:ih.hdrLen]
			}
			if !bytes.Equal(inRest, outFrame[oh.tag0End:oh.hdrLen]) {
				t.Fatal("other tags changed")
			}
		}
	})
}

// FuzzReadResponses feeds arbitrary response streams after a fixed set of
// requests. Nothing may panic, the store never moves back or to another
// cluster, and a stream read without error reaches kgo byte for byte (or
// with a produce body rewritten at the same length).
func FuzzReadResponses(f *testing.F) {
	g := golden(f)
	f.Add(g["resp.state"], uint8(0))
	f.Add(g["resp.state.tags"], uint8(1))
	f.Add(g["resp.notag"], uint8(3))
	f.Add(append(respFrame(7, stateTags("abc", 3), inconsistentBody(&testing.T{}, 3, 12, 1243)), g["resp.notag"]...), uint8(5))
	f.Add(respFrame(7, stateTags("abc", 3), inconsistentBody(&testing.T{}, 0, 9, 1243)), uint8(2))
	f.Add(respFrame(7, stateTags("abc", 50), inconsistentBody(&testing.T{}, 3, 12, 1243)), uint8(0))                 // ahead of the request
	f.Add(respFrame(7, []byte{0}, inconsistentBody(&testing.T{}, 3, 12, 1243)), uint8(4))                            // no tag 0
	f.Add(append(respFrame(12, stateTags("abc", 6), []byte{0, 0, 0, 0}), respFrame(7, []byte{0}, nil)...), uint8(0)) // acks=0 answered
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		if len(stream) > maxFuzzStream {
			return
		}
		store := knownStore(t, "abc", 5)
		c, m, i := newTestConn(t, store, nil)
		// Correlation ids 7 to 12; the acks=0 produce answers nothing, or
		// any response with an id no request in flight has.
		reqs := []kmsg.Request{metadataReq(12), produceReq(9, -1, nil), metadataReq(8), apiVersionsReq(4), metadataReq(12), produceReq(9, 0, nil)}
		for k, r := range reqs {
			if _, err := c.Write(reqFrame(r, int32(7+k))); err != nil {
				t.Fatal(err)
			}
		}
		m.in, m.chunk = stream, int(chunk)
		got, err := readAll(c, 4096)
		if cur := store.Load(); cur.ClusterID() != "abc" || cur.Offset() < 5 {
			t.Fatalf("store went to %v", cur)
		}
		// Bytes reach kgo unchanged, as a prefix of the stream (a frame held
		// for inspection when the stream ends is not handed over), unless a
		// produce body was rewritten.
		if len(got) > len(stream) || (i.Stats().InconsistentMetadata == 0 && !bytes.Equal(got, stream[:len(got)])) {
			t.Fatalf("kgo got %x from %x", got, stream)
		}
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrMalformedHeader) &&
			!errors.Is(err, consistency.ErrInconsistentMetadata) && !errors.Is(err, ErrMisroute) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}

// FuzzEmulatedResponses feeds arbitrary response streams to a connection
// whose broker the Emulator serves, after requests whose answers it holds
// (Metadata, CreateTopics, DescribeConfigs) or reads (ApiVersions), pinned
// to the store's cluster or not. Nothing may panic or hang, the store
// never moves back or to another cluster, errors are of the kinds a
// connection fails with, and bytes reach kgo unchanged. It runs in a
// synctest bubble: the Emulator's waits take no time.
func FuzzEmulatedResponses(f *testing.F) {
	meta := metadataBody
	created := kmsg.NewPtrCreateTopicsResponse()
	created.Version = 5
	versions := kmsg.NewPtrApiVersionsResponse()
	versions.Version = 3
	versions.FinalizedFeaturesEpoch = 9
	configs := kmsg.NewPtrDescribeConfigsResponse()
	configs.Version = 4
	var all []byte
	for k, fr := range [][]byte{
		respFrame(7, []byte{0}, meta("abc")),
		respFrame(8, []byte{0}, created.AppendTo(nil)),
		respFrame(9, nil, versions.AppendTo(nil)),
		respFrame(10, []byte{0}, configs.AppendTo(nil)),
	} {
		f.Add(fr, uint8(0), uint8(k))
		all = append(all, fr...)
	}
	f.Add(all, uint8(0), uint8(0))
	f.Add(all, uint8(5), uint8(1))
	f.Add(respFrame(7, []byte{0}, meta("xyz")), uint8(0), uint8(1)) // pinned: another cluster
	f.Add(respFrame(7, stateTags("abc", 3), meta("abc")), uint8(2), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, chunk, mode uint8) {
		if len(stream) > maxFuzzStream {
			return
		}
		synctest.Test(t, func(t *testing.T) {
			const addr = "127.0.0.1:9092" // newTestConn's
			store := knownStore(t, "abc", 5)
			o := &scriptedOracle{applied: map[string]int64{addr: 5}, step: 1, committed: consistency.MustOf("abc", 7), cluster: "abc"}
			e, err := NewEmulator(EmulationConfig{Store: store, Oracle: o, Force: mode&2 != 0})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			e.learnCommitted(t.Context())
			c, m, _ := newTestConn(t, store, func(cfg *Config) {
				cfg.Emulator = e
				if mode&1 != 0 {
					cfg.ExpectedCluster = func() string { return "abc" }
				}
			})
			reqs := []kmsg.Request{metadataReq(12), createTopicsReq(5), apiVersionsReq(3), describeConfigsReq(4)}
			for k, r := range reqs {
				if _, err := c.Write(reqFrame(r, int32(7+k))); err != nil {
					t.Fatal(err)
				}
			}
			m.in, m.chunk = stream, int(chunk)
			got, err := readAll(c, 4096)
			if cur := store.Load(); cur.ClusterID() != "abc" || cur.Offset() < 7 {
				t.Fatalf("store went to %v", cur)
			}
			if len(got) > len(stream) || !bytes.Equal(got, stream[:len(got)]) {
				t.Fatalf("kgo got %x from %x", got, stream)
			}
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrMalformedHeader) &&
				!errors.Is(err, consistency.ErrInconsistentMetadata) && !errors.Is(err, ErrMisroute) {
				t.Fatalf("unexpected error kind: %v", err)
			}
		})
	})
}

func createTopicsReq(version int16) kmsg.Request {
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = version
	return r
}

func describeConfigsReq(version int16) kmsg.Request {
	r := kmsg.NewPtrDescribeConfigsRequest()
	r.Version = version
	return r
}

// FuzzHostileHeld drives the paths that hold frames over hostile response
// streams: a connection whose ApiVersions v5 named its node (the emulator's
// view of node 3 of abc), with the emulator on (holding metadata answers
// to learn from them), a pinned cluster (holding Metadata answers to check
// them), the Healer's watch of held requests, and, in the relocator's
// mode, a redirected connection that lets nothing but its ApiVersions v5
// through until the broker answered it without error. Nothing may panic;
// the store never leaves cluster abc nor goes below the committed offset
// (7); kgo gets a prefix of the stream (unless a produce answer was
// rewritten); errors are of the kinds a broker's input may cause; and a
// redirected connection lets another request through only after a whole
// answer without error to its ApiVersions v5.
func FuzzHostileHeld(f *testing.F) {
	meta := kmsg.NewPtrMetadataResponse()
	meta.Version = 12
	meta.ClusterID = kmsg.StringPtr("abc")
	versions := kmsg.NewPtrApiVersionsResponse()
	versions.Version = 5
	versions.FinalizedFeaturesEpoch = 9
	created := kmsg.NewPtrCreateTopicsResponse()
	created.Version = 5
	okVersions := respFrame(6, nil, versions.AppendTo(nil))
	unsupported := respFrame(6, nil, []byte{0, 35, 0, 0, 0, 0})
	all := append(append(append([]byte(nil), okVersions...), respFrame(7, []byte{0}, meta.AppendTo(nil))...), respFrame(8, []byte{0}, created.AppendTo(nil))...)
	for mode := range uint8(8) {
		f.Add(all, uint8(0), mode)
		f.Add(okVersions, uint8(3), mode)
		f.Add(unsupported, uint8(0), mode)
	}
	f.Add(append(append([]byte(nil), okVersions...), respFrame(7, []byte{0}, func() []byte {
		m := *meta
		m.ClusterID = kmsg.StringPtr("xyz")
		return m.AppendTo(nil)
	}())...), uint8(0), uint8(1))
	f.Add(append(append([]byte(nil), okVersions...), respFrame(7, stateTags("abc", 3), meta.AppendTo(nil))...), uint8(5), uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, chunk, mode uint8) {
		if len(stream) > maxFuzzStream {
			return
		}
		synctest.Test(t, func(t *testing.T) {
			const addr = "127.0.0.1:9092"
			store := knownStore(t, "abc", 5)
			o := &scriptedOracle{applied: map[string]int64{addr: 5}, step: 1, committed: consistency.MustOf("abc", 7), cluster: "abc"}
			h := NewHealer(HealerConfig{Store: store, Oracle: o})
			defer h.Close()
			e, err := NewEmulator(EmulationConfig{Store: store, Oracle: o, Healer: h, Force: mode&2 != 0})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			e.learnCommitted(t.Context())
			cfg := Config{Store: store, Emulator: e, Healer: h, Relocator: &fakeRelocator{}}
			if mode&1 != 0 {
				cfg.ExpectedCluster = func() string { return "abc" }
			}
			i, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var mv *moved
			if mode&4 != 0 {
				mv = &moved{cluster: "abc", node: 3, to: "127.0.0.1:9093"}
			}
			m := &memConn{}
			c := newConn(i, m, addr, mv)
			if _, err := c.Write(reqFrame(apiVersionsV5("abc", 3), 6)); err != nil {
				t.Fatal(err)
			}
			later := []kmsg.Request{metadataReq(12), createTopicsReq(5), produceReq(9, -1, nil), describeConfigsReq(4)}
			for k, r := range later {
				_, err := c.Write(reqFrame(r, int32(7+k)))
				switch {
				case mv != nil && !errors.Is(err, errMovedCheck):
					t.Fatalf("%T went through a redirected connection before its check was answered: %v", r, err)
				case mv == nil && err != nil:
					t.Fatal(err)
				}
			}
			m.in, m.chunk = stream, int(chunk)
			got, err := readAll(c, 4096)
			time.Sleep(2 * healAfter) // the held watch looks at what stayed unanswered
			synctest.Wait()
			if cur := store.Load(); cur.ClusterID() != "abc" || cur.Offset() < 7 {
				t.Fatalf("store went to %v", cur)
			}
			if len(got) > len(stream) || (i.Stats().InconsistentMetadata == 0 && !bytes.Equal(got, stream[:len(got)])) {
				t.Fatalf("kgo got %x from %x", got, stream)
			}
			if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, ErrMalformedHeader) &&
				!errors.Is(err, consistency.ErrInconsistentMetadata) && !errors.Is(err, ErrMisroute) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			if mv == nil {
				return
			}
			// Redirected: checked only by a whole answer to corr 6 whose
			// error code is 0.
			answered := len(got) >= 10 && binary.BigEndian.Uint32(got[4:8]) == 6 &&
				int(binary.BigEndian.Uint32(got))+4 <= len(got) && got[8] == 0 && got[9] == 0
			if c.movedOK.Load() && !answered {
				t.Fatalf("a redirected connection counts as checked after the answer %x", got)
			}
		})
	})
}
