package wire

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
)

// The reading half of a conn: responses as the broker sends them, observed.

// read hands kgo the response stream unchanged. Bytes are read straight into
// p and scanned there; only a header split across reads is copied, and only
// a frame that may carry INCONSISTENT_METADATA is held back whole.
func (r *responseReader) read(p []byte) (int, error) {
	for {
		if len(r.release) > 0 {
			n := copy(p, r.release)
			r.release = r.release[n:]
			if len(r.release) == 0 && cap(r.hold) > maxKeptHold {
				// A large held answer (a 4 MiB Metadata) is not kept
				// for the connection's life.
				r.hold, r.release = nil, nil
			}
			return n, nil
		}
		if r.rerr != nil {
			return 0, r.rerr
		}
		if len(p) == 0 {
			return 0, nil
		}
		// Bytes already read come before the error that ended them: a
		// socket may return the last bytes and io.EOF together (tls.Conn
		// does when close_notify follows a record).
		if r.holding {
			if err := r.fillHold(); err != nil {
				r.fail(err)
			}
			continue
		}
		var n, d int
		var err error
		if r.stashAt >= len(r.stash) && r.pendErr != nil {
			err := r.pendErr
			r.pendErr = nil
			return 0, err
		}
		if r.stashAt < len(r.stash) {
			n = copy(p, r.stash[r.stashAt:])
			d, err = r.scan(p[:n])
			r.stashAt += d
			if r.stashAt == len(r.stash) {
				r.stash, r.stashAt = r.stash[:0], 0
			}
		} else {
			var rerr error
			n, rerr = r.Conn.Read(p)
			if n == 0 {
				if rerr != nil {
					if e := r.held.aborted.Load(); e != nil {
						rerr = e
						r.rerr = e
						return 0, e
					}
					if !r.dead.Load() && peerEnded(rerr) {
						r.peerClosed()
						r.i.noteClose(r.addr)
						if e := r.closedBehind(); e != nil {
							rerr = e
						}
					}
					r.dead.Store(true)
				}
				return 0, rerr
			}
			r.pendErr = rerr
			d, err = r.scan(p[:n])
			if d < n && err == nil {
				r.stash = append(r.stash[:0], p[d:n]...)
				r.stashAt = 0
			}
		}
		if err != nil {
			r.fail(err)
		}
		if d > 0 {
			return d, nil
		}
	}
}

// scan runs the response parser over b, bytes about to be handed to kgo. It
// returns how many may be handed over now: all of them, or fewer when a
// frame must be held back or the stream is bad from that frame on.
func (r *responseReader) scan(b []byte) (int, error) {
	pos := 0
	for pos < len(b) {
		if r.rraw {
			return len(b), nil
		}
		if r.rbody > 0 {
			k := min(r.rbody, len(b)-pos)
			pos += k
			r.rbody -= k
			continue
		}
		hdr := b[pos:]
		old := len(r.hb)
		if old > 0 {
			take := min(len(b)-pos, maxHeldHeader-old)
			r.hb = append(r.hb, b[pos:pos+take]...)
			hdr = r.hb
		}
		if err := parseResponseStart(hdr, &r.rh); err != nil {
			if err != errShort {
				return pos, err
			}
			if old == 0 {
				r.hb = append(r.hb, hdr...)
			}
			return len(b), nil
		}
		if !r.haveCur { // take the request answered now, keep it while the header lasts
			head, ok := r.q.peek()
			switch {
			case ok && head.corr == r.rh.corr:
				r.q.pop()
				r.cur = head
				if head.watched {
					r.noteAnswered()
				}
			case r.noAckAnswer(r.rh.corr, &r.cur):
				// An acks=0 produce answered anyway; the head still waits.
			case ok:
				return pos, malformed("response correlation id %d, expected %d", r.rh.corr, head.corr)
			default:
				return pos, malformed("response with correlation id %d answers no request in flight", r.rh.corr)
			}
			r.haveCur = true
		}
		req := &r.cur // stays put until the next frame's header
		if err := parseResponse(hdr, req.flexible, &r.rh); err != nil {
			if err != errShort {
				return pos, err
			}
			if len(r.hb) >= maxHeldHeader {
				return pos, malformed("response header longer than %d bytes", maxHeldHeader)
			}
			if old == 0 {
				r.hb = append(r.hb, hdr...)
			}
			return len(b), nil
		}
		r.haveCur = false
		r.i.read.Add(1)
		frameStart := pos
		pos += r.rh.hdrLen - old
		r.rbody = 4 + int(r.rh.size) - r.rh.hdrLen
		err := r.observe(req, &r.rh)
		r.hb = r.hb[:0] // after observe: the header state may alias hb
		if err != nil {
			return frameStart, err
		}
		if r.moved != nil && !isSetupKey(req.key) {
			r.announceMove()
		}
		if req.raw {
			r.rraw = true
		}
		if hold, scanOnly := r.shouldHold(req, &r.rh, b[pos:]); hold {
			r.holding, r.holdFor, r.holdAt, r.holdScan = true, *req, r.rh.state.Token, scanOnly
			r.holdTok = r.rh.hasState && len(r.rh.state.ClusterID) > 0
			r.hold = r.hold[:0]
			return pos, nil
		}
		if v := r.view.Load(); v != nil {
			r.i.emu.afterRead(v, &answer{key: req.key, version: req.version, flexible: req.flexible,
				token: r.rh.hasState && len(r.rh.state.ClusterID) > 0})
		}
	}
	return pos, nil
}

// observe applies a response header's consistency state: a misroute check,
// then an advance of the store. Steady state it neither allocates nor
// writes: Context values are only built when the store moves.
func (r *responseReader) observe(req *inflight, h *respHeader) error {
	if !h.hasState || len(h.state.ClusterID) == 0 {
		return nil
	}
	got := h.state.ClusterID
	cur := r.i.store.Load()
	want := cur.ClusterID()
	pinned := ""
	if r.i.expected != nil {
		if pinned = r.i.expected(); pinned != "" {
			want = pinned
		}
	}
	token := h.state.Token
	if token >= 0 && (want == "" || string(got) == want) {
		r.lastAt, r.sawAt = token, true
	}
	if want != "" && string(got) != want {
		adopt := AdoptNone
		if pinned == "" && r.i.adopt != nil {
			adopt = r.i.adopt(r.addr, string(got))
		}
		if adopt != AdoptNone {
			switch r.i.tokens.Judge(cur, string(got)) {
			case tokens.Shared:
				adopt = AdoptNone
			case tokens.Move:
				adopt = AdoptMove
			}
		}
		switch {
		case adopt == AdoptNone:
			return r.misroute(want, string(got))
		case adopt == AdoptForeign && token >= 0:
			return r.replaceForeign(cur, got, token)
		}
		// Only a store still on the old cluster is reset, atomically: a
		// check and a separate reset could wipe a newer token another
		// connection stored for the new cluster meanwhile.
		r.i.tokens.Moved(r.addr, want, string(got), true)
		r.i.log(kgo.LogLevelWarn, "bootstrap server answers for another cluster; consistency store reset", "addr", r.addr, "from_cluster", want, "to_cluster", string(got))
		cur = consistency.Unknown()
	}
	if token < 0 || (!cur.IsUnknown() && token <= cur.Offset()) {
		return nil
	}
	next, err := consistency.Of(string(got), token)
	if err != nil {
		return malformed("response consistency state: %v", err)
	}
	var by tokens.Listener
	if r.i.observer != nil {
		by = r.i.observer
	}
	now, err := r.i.tokens.Answered(r.addr, next, by)
	if err != nil { // the store adopted another cluster meanwhile
		return r.misroute(now.ClusterID(), string(got))
	}
	if now != cur {
		r.i.advanced.Add(1)
		if r.debug {
			r.i.log(kgo.LogLevelDebug, "advanced consistency token", "addr", r.addr, "key", req.key, "from", cur.String(), "to", now.String())
		}
	}
	return nil
}

// replaceForeign replaces cur, a token of a cluster the bootstrap
// servers never belonged to, by the answer's token of cluster at offset
// (see AdoptForeign), unless the store moved meanwhile (another
// connection or the Healer replaced it first): the owner reports the heal
// once.
func (r *responseReader) replaceForeign(cur consistency.Token, cluster []byte, offset int64) error {
	next, err := consistency.Of(string(cluster), offset)
	if err != nil {
		return malformed("response consistency state: %v", err)
	}
	if r.i.tokens.ReplaceForeign(r.addr, cur, next) {
		r.i.advanced.Add(1)
		return nil
	}
	if now := r.i.tokens.Load(); now.IsUnknown() || now.ClusterID() == string(cluster) {
		_, _ = r.i.tokens.Answered(r.addr, next, nil) // an Unknown store, or the answer's cluster already
	}
	return nil
}

func (r *responseReader) misroute(want, got string) error {
	r.i.misroutes.Add(1)
	r.i.log(kgo.LogLevelWarn, "response names another cluster; closing the connection", "addr", r.addr, "expected_cluster", want, "got_cluster", got)
	if r.i.observer != nil {
		r.i.observer.OnMisroute(r.addr, want, got)
	}
	return &MisrouteError{Addr: r.addr, Expected: want, Got: got}
}

// shouldHold reports whether the frame whose header was just parsed must be
// held back whole before kgo sees it, and scanOnly when it is held only to
// look for INCONSISTENT_METADATA's bytes. view is the frame's body as far
// as it is already in the read buffer.
//
// ApiVersions answers, one per connection, are always held: see
// rewriteAPIVersionsError. An answer to a request that carried a token may
// carry INCONSISTENT_METADATA whatever its header token: one below the
// request's says the broker was behind, and the frame is held; one at or
// above it may come from a broker that caught up between judging and
// answering, or that answers with the newest offset it knows (KIP-1243
// allows both), so the frame is looked at too (see mayBeInconsistent).
func (r *responseReader) shouldHold(req *inflight, h *respHeader, view []byte) (hold, scanOnly bool) {
	if req.key == apiVersionsKey {
		return r.rbody >= 2 && r.rbody <= maxHeldFrame, false
	}
	if v := r.view.Load(); v != nil && r.rbody > 0 && r.rbody <= maxHeldFrame && r.i.emu.holds(v, req.key, h.hasState) {
		return true, false
	}
	if req.key == metadataKey && (r.pinned() != "" || r.learning()) {
		return r.rbody > 0 && r.rbody <= maxHeldFrame, false
	}
	if r.uncoveredWrite(req, h.hasState && len(h.state.ClusterID) > 0, h.state.Token) {
		return r.rbody > 0 && r.rbody <= maxHeldFrame, false
	}
	if req.sent < 0 || r.rbody <= 0 || r.rbody > maxHeldFrame || !knownResponse(req.key) {
		return false, false
	}
	if h.hasState && h.state.Token >= 0 && h.state.Token < req.sent {
		return true, false
	}
	return r.mayBeInconsistent(req, view), true
}

// uncoveredWrite reports whether an answer to req whose header carried
// token (hasToken) answers a metadata write with a token that cannot cover
// the write, and an Emulator can learn the write's
// offset instead: a token at or below the one the request carried (the
// write's offset is above every offset committed before it, the request's
// token included). KIP-1243's text has a broker answer with "their latest
// cluster metadata offset", which for a write forwarded to the controller
// may be its own, below the write; read-your-writes then needs the offset
// from the quorum, as on Kafka 4.4. A broker that covers its writes (the
// KIP-1243 agent, the local cluster by default) never costs the question.
func (r *responseReader) uncoveredWrite(req *inflight, hasToken bool, token int64) bool {
	return r.i.emu != nil && writesMetadata(req.key) && req.sent >= 0 &&
		hasToken && token >= 0 && token <= req.sent
}

// fillHold reads the rest of the held frame and decides its fate.
func (r *responseReader) fillHold() error {
	if cap(r.hold) < r.rbody {
		r.hold = make([]byte, 0, r.rbody)
	}
	for len(r.hold) < r.rbody {
		if r.stashAt < len(r.stash) {
			k := min(r.rbody-len(r.hold), len(r.stash)-r.stashAt)
			r.hold = append(r.hold, r.stash[r.stashAt:r.stashAt+k]...)
			r.stashAt += k
			if r.stashAt == len(r.stash) {
				r.stash, r.stashAt = r.stash[:0], 0
			}
			continue
		}
		if r.pendErr != nil {
			return r.pendErr
		}
		n, err := r.Conn.Read(r.hold[len(r.hold):r.rbody])
		r.hold = r.hold[:len(r.hold)+n]
		if err != nil {
			if len(r.hold) < r.rbody {
				return err
			}
			r.pendErr = err // after the frame
		}
	}
	r.holding, r.rbody = false, 0
	if r.holdScan && !hasCode(r.hold, r.i.code) {
		r.release = r.hold
		if v := r.view.Load(); v != nil {
			r.i.emu.afterRead(v, &answer{key: r.holdFor.key, version: r.holdFor.version, flexible: r.holdFor.flexible, token: r.holdTok})
		}
		return nil
	}
	body, err := r.inspect(r.holdFor, r.holdAt, r.hold)
	if err != nil {
		return err
	}
	r.release = body
	return nil
}

// learning reports whether the interceptor's Learner waits for a cluster
// id.
func (r *responseReader) learning() bool {
	return r.i.learner != nil && r.i.learner.Learning()
}

// pinned returns the cluster the interceptor is pinned to, or "".
func (r *responseReader) pinned() string {
	if r.i.expected == nil {
		return ""
	}
	return r.i.expected()
}

// peerClosed tells a RejectObserver that the connection ended under a
// request that carried a token. A KIP-1243 broker closes the connection,
// without an answer, of a request naming another cluster than its own: when
// that happens on a bootstrap server, the cluster behind it may have
// changed.
func (r *responseReader) peerClosed() {
	ro, ok := r.i.observer.(RejectObserver)
	if !ok || r.rerr != nil {
		return
	}
	stamped := false
	r.q.each(func(e inflight) bool {
		stamped = e.sent >= 0
		return !stamped
	})
	if r.haveCur && r.cur.sent >= 0 {
		stamped = true
	}
	if stamped {
		ro.OnStampRejected(r.addr)
	}
}

// closedBehind returns the error for a connection a KIP-1243 broker closed
// under a request whose token is beyond what the broker last said it had
// applied: the KIP lets a broker behind the token close the connection
// where its answer has no place for INCONSISTENT_METADATA (all-topics
// Metadata, acks=0 Produce). The caller sees what an INCONSISTENT_METADATA
// answer gives (consistency.ErrInconsistentMetadata, temporary: kgo sends
// the request again), not io.EOF. Nil when the broker never sent a token
// on this connection, or the oldest request carried none beyond it. The
// first request of a connection, a stamped ApiVersions, is judged without
// a token from the broker: closed unanswered, it is taken to be behind too
// (kgo would fail it for good as a TLS mismatch, ErrFirstReadEOF); a
// broker of another cluster closes it the same way, which peerClosed
// reported to the watcher.
func (r *responseReader) closedBehind() error {
	req, ok := r.cur, r.haveCur
	if !ok {
		req, ok = r.q.peek()
	}
	switch {
	case !ok || req.sent < 0:
		return nil
	case !r.sawAt:
		if req.key != apiVersionsKey {
			return nil
		}
		r.lastAt = -1
	case req.sent <= r.lastAt:
		return nil
	}
	r.i.inconsistent.Add(1)
	if r.i.observer != nil {
		r.i.observer.OnInconsistentMetadata(r.addr, req.key, req.sent, r.lastAt)
	}
	return &InconsistentMetadataError{Addr: r.addr, APIKey: req.key, Sent: req.sent, BrokerAt: r.lastAt}
}

// fail makes err sticky and closes the socket: no later answer can be
// matched to its request.
func (r *responseReader) fail(err error) {
	if e := r.held.aborted.Load(); e != nil {
		err = e
	}
	if r.rerr == nil {
		r.rerr = err
		r.dead.Store(true)
		r.Conn.Close()
	}
}
