package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// seenRequest is a request header as the spy proxy saw it on the wire.
type seenRequest struct {
	conn     int
	clientID string
	key      int16
	hasState bool
	cluster  string
	token    int64
}

// spyHooks decide what the spy does; all may be nil.
type spyHooks struct {
	// token returns the tag 0 token to put in a flexible response header
	// for a request from clientID, or false for none.
	token func(clientID string, key int16) (int64, bool)
	// answer lets the spy answer a request itself instead of forwarding
	// it: it returns the response body and the header token.
	answer func(key, version int16, body []byte, sent int64) (resp []byte, token int64, ok bool)
}

// spy is a frame-level TCP proxy in front of one kfake broker. It records
// request header tags and injects tag 0 into flexible response headers,
// which kfake does not write. It handles one request at a time per
// connection, which keeps responses in order without bookkeeping.
type spy struct {
	t       testing.TB
	target  string
	cluster string
	ln      net.Listener

	mu    sync.Mutex
	hooks spyHooks
	seen  []seenRequest
	conns []net.Conn
	nconn int

	wg sync.WaitGroup
}

func newSpy(t testing.TB, target, cluster string) *spy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &spy{t: t, target: target, cluster: cluster, ln: ln}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.close)
	return s
}

func (s *spy) setHooks(h spyHooks) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = h
}

func (s *spy) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

func (s *spy) close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *spy) accept() {
	defer s.wg.Done()
	for {
		client, err := s.ln.Accept()
		if err != nil {
			return
		}
		broker, err := net.Dial("tcp", s.target)
		if err != nil {
			client.Close()
			continue
		}
		s.mu.Lock()
		s.conns = append(s.conns, client, broker)
		s.nconn++
		id := s.nconn
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer client.Close()
			defer broker.Close()
			s.serve(id, client, broker)
		}()
	}
}

func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, errors.New("spy: frame too large")
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeFrame(w io.Writer, b []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	return err
}

// flexibleByKmsg is the spy's own answer to "is this header flexible",
// independent of the table under test.
func flexibleByKmsg(key, version int16) bool {
	r := kmsg.RequestForKey(key)
	if r == nil {
		return false
	}
	r.SetVersion(version)
	return r.IsFlexible()
}

func (s *spy) serve(id int, client, broker net.Conn) {
	for {
		req, err := readFrame(client)
		if err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(req))
		version := int16(binary.BigEndian.Uint16(req[2:]))
		corr := req[4:8]
		pos := 8
		var clientID string
		if !(key == 7 && version == 0) {
			n := int(int16(binary.BigEndian.Uint16(req[pos:])))
			pos += 2
			if n > 0 {
				clientID = string(req[pos : pos+n])
				pos += n
			}
		}
		flexible := flexibleByKmsg(key, version)
		rec := seenRequest{conn: id, clientID: clientID, key: key, token: -1}
		if flexible {
			r := kbin.Reader{Src: req[pos:]}
			tags := kmsg.ReadTags(&r)
			if r.Complete() != nil {
				s.t.Errorf("spy: request tags do not parse")
				return
			}
			pos = len(req) - len(r.Src)
			tags.Each(func(tag uint32, data []byte) {
				if tag != 0 {
					return
				}
				st, err := ParseState(data)
				if err != nil {
					s.t.Errorf("spy: request tag 0: %v", err)
					return
				}
				rec.hasState, rec.cluster, rec.token = true, string(st.ClusterID), st.Token
			})
		}
		body := req[pos:]
		s.mu.Lock()
		s.seen = append(s.seen, rec)
		hooks := s.hooks
		s.mu.Unlock()

		expects := true
		if key == 0 {
			pr := kmsg.NewPtrProduceRequest()
			pr.Version = version
			if err := pr.ReadFrom(body); err != nil {
				s.t.Errorf("spy: produce body: %v", err)
				return
			}
			expects = pr.Acks != 0
		}
		respFlexible := flexible && key != 18

		var resp []byte
		token, inject := int64(-1), false
		if hooks.token != nil {
			token, inject = hooks.token(clientID, key)
		}
		if hooks.answer != nil {
			if b, tok, ok := hooks.answer(key, version, body, rec.token); ok {
				resp, token, inject = b, tok, true
			}
		}
		if resp == nil {
			if err := writeFrame(broker, req); err != nil {
				return
			}
			if !expects {
				continue
			}
			raw, err := readFrame(broker)
			if err != nil {
				return
			}
			if string(raw[:4]) != string(corr) {
				s.t.Errorf("spy: kfake answered out of order")
				return
			}
			resp = raw[4:]
			if respFlexible {
				r := kbin.Reader{Src: resp}
				kmsg.SkipTags(&r)
				resp = r.Src
			}
		}
		out := append([]byte(nil), corr...)
		if respFlexible {
			if inject {
				out = append(out, stateTags(s.cluster, token)...)
			} else {
				out = append(out, 0)
			}
		}
		out = append(out, resp...)
		if err := writeFrame(client, out); err != nil {
			return
		}
	}
}

// spyCluster is kfake behind one spy per broker. Dial sends kgo, which
// learns the kfake addresses from metadata, through the spies.
type spyCluster struct {
	kf    *kfake.Cluster
	spies map[string]*spy
}

func newSpyCluster(t testing.TB, brokers int, opts ...kfake.Opt) *spyCluster {
	kf, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kf.Close)
	sc := &spyCluster{kf: kf, spies: map[string]*spy{}}
	for _, addr := range kf.ListenAddrs() {
		sc.spies[addr] = newSpy(t, addr, "kfake")
	}
	return sc
}

func (sc *spyCluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if s, ok := sc.spies[addr]; ok {
		addr = s.ln.Addr().String()
	}
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

func (sc *spyCluster) setHooks(h spyHooks) {
	for _, s := range sc.spies {
		s.setHooks(h)
	}
}

func (sc *spyCluster) requests() []seenRequest {
	var out []seenRequest
	for _, s := range sc.spies {
		out = append(out, s.requests()...)
	}
	return out
}

func (sc *spyCluster) seeds() []string { return sc.kf.ListenAddrs() }

// perConn groups the recorded requests by connection, in wire order.
func (sc *spyCluster) perConn() [][]seenRequest {
	var out [][]seenRequest
	for _, s := range sc.spies {
		byConn := map[int][]seenRequest{}
		for _, r := range s.requests() {
			byConn[r.conn] = append(byConn[r.conn], r)
		}
		for _, rs := range byConn {
			out = append(out, rs)
		}
	}
	return out
}
