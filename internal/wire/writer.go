package wire

import (
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The writing half of a conn: requests as kgo writes them, stamped.

// write parses the frames in p, stamps flexible request headers and sends
// the rewritten headers and the untouched bodies: a small stamped frame
// built in one buffer and written with one write, a larger one with one
// writev (see coalesceMax), an unstamped one as it came. Frames may span
// writes and one write may carry several frames.
func (w *requestWriter) write(p []byte) (int, error) {
	if w.idleClosed(time.Now().UnixNano()) {
		return 0, w.idleClosedError()
	}
	if w.moved != nil && !w.movedOK.Load() {
		if err := w.checkMoved(p); err != nil {
			return 0, err
		}
	}
	// kgo writes each request whole, in one call: such a frame needs no
	// state kept across writes.
	if w.wbody == 0 && !w.winHeader && !w.wraw && len(p) <= coalesceMax {
		if parseRequest(p, &w.wh) == nil && 4+int(w.wh.size) == len(p) {
			if w.wh.key == apiVersionsKey {
				w.noteAPIVersions(p)
			}
			w.frame = p
			n, err := w.writeFrame(p)
			w.frame = nil
			return n, err
		}
	}
	total := len(p)
	w.out = w.out[:0]
	for len(p) > 0 {
		if w.wbody > 0 {
			k := min(w.wbody, len(p))
			w.out = append(w.out, p[:k])
			p, w.wbody = p[k:], w.wbody-k
			if w.wbody == 0 && w.wrawNext {
				w.wraw = true
			}
			continue
		}
		if w.wraw {
			w.out = append(w.out, p)
			break
		}
		// A new header reuses wpend and scratch, which earlier entries
		// of out may point into.
		if err := w.flush(); err != nil {
			return 0, err
		}
		if !w.winHeader {
			w.wpend = w.wpend[:0]
		}
		var src []byte
		if !w.winHeader {
			err := parseRequest(p, &w.wh)
			if err == errShort {
				if len(p) > maxHeldHeader {
					return 0, malformed("request header longer than %d bytes", maxHeldHeader)
				}
				w.wpend = append(w.wpend, p...)
				w.winHeader = true
				break
			}
			if err != nil {
				return 0, err
			}
			if len(p) >= 4+int(w.wh.size) {
				w.frame = p[:4+int(w.wh.size)]
			}
			src, p = p[:w.wh.need], p[w.wh.need:]
		} else {
			old := len(w.wpend)
			take := min(len(p), maxHeldHeader-old)
			w.wpend = append(w.wpend, p[:take]...)
			err := parseRequest(w.wpend, &w.wh)
			if err == errShort {
				if take < len(p) {
					return 0, malformed("request header longer than %d bytes", maxHeldHeader)
				}
				break
			}
			if err != nil {
				return 0, err
			}
			w.winHeader = false
			src, p = w.wpend[:w.wh.need], p[w.wh.need-old:]
		}
		hdr, stamped, err := w.stamp(w.scratch[:0], src)
		w.frame = nil
		if err != nil {
			return 0, err
		}
		if stamped {
			w.scratch = hdr
		} else {
			hdr = src[:w.wh.hdrLen]
		}
		w.out = append(w.out, hdr)
		if w.wh.need > w.wh.hdrLen {
			w.out = append(w.out, src[w.wh.hdrLen:])
		}
		w.wbody = 4 + int(w.wh.size) - w.wh.need
		w.wrawNext = w.wh.key == saslHandshakeKey && w.wh.version == 0
		if w.wbody == 0 && w.wrawNext {
			w.wraw = true
		}
	}
	if err := w.flush(); err != nil {
		return 0, err
	}
	return total, nil
}

// writeFrame sends p, one whole small request frame that w.wh describes:
// stamped, it is built in the one-write buffer (see coalesceMax); else it
// goes out as kgo wrote it.
func (w *requestWriter) writeFrame(p []byte) (int, error) {
	out, stamped, err := w.stamp(w.coal[:0], p)
	if err != nil {
		clear(out) // a stamped header, when the in-flight ring refused it
		return 0, err
	}
	w.wraw = w.wh.key == saslHandshakeKey && w.wh.version == 0
	if stamped {
		out = append(out, p[w.wh.hdrLen:]...)
		w.coal = out
		_, err = w.Conn.Write(out)
		clear(out) // keep no copy of a request (SASL frames carry secrets)
	} else {
		_, err = w.Conn.Write(p)
	}
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *requestWriter) flush() error {
	if len(w.out) == 0 {
		return nil
	}
	n := 0
	for _, b := range w.out {
		n += len(b)
	}
	var err error
	switch {
	case len(w.out) == 1:
		_, err = w.Conn.Write(w.out[0])
	case n <= coalesceMax:
		w.coal = w.coal[:0]
		for _, b := range w.out {
			w.coal = append(w.coal, b...)
		}
		_, err = w.Conn.Write(w.coal)
		clear(w.coal) // keep no copy of a request (SASL frames carry secrets)
	default:
		w.bufs = w.out
		_, err = w.bufs.WriteTo(w.Conn)
	}
	clear(w.out) // do not keep the caller's buffers alive
	w.out = w.out[:0]
	if !w.winHeader {
		// A header that came in pieces was held with whatever followed
		// it in the same write, body bytes included.
		clear(w.wpend)
		w.wpend = w.wpend[:0]
	}
	return err
}

// stamp lets the Emulator hold the parsed request src (beforeWrite), then
// notes it in the in-flight FIFO when a response will follow (an acks=0
// produce only in w.noAck, see noack.go). When the request is to carry the
// store's token, it appends the rewritten header to dst and reports true;
// else the header goes out as the caller wrote it.
func (w *requestWriter) stamp(dst, src []byte) ([]byte, bool, error) {
	h := &w.wh
	stamped := false
	sent := int64(-1)
	cur := w.i.store.Load()
	if v := w.view.Load(); v != nil {
		waited, err := w.i.emu.beforeWrite(v, h.key, cur, nanosTime(w.wdl.Load()), w.stopWaiting)
		if err != nil {
			return dst, false, err
		}
		if waited {
			cur = w.i.store.Load() // it may have moved, or healed, meanwhile
		}
	}
	if h.flexible {
		switch {
		case !cur.IsUnknown():
			if int64(h.size)+1024 > math.MaxInt32 {
				return dst, false, malformed("request frame of %d bytes is too large to stamp", h.size)
			}
			if cur != w.fieldFor { // encoded once per token, not per request
				w.field = appendStateField(w.field[:0], cur.ClusterID(), cur.Offset())
				w.fieldFor = cur
			}
			sent = cur.Offset()
			dst = appendStamped(dst, src, h, w.field)
			stamped = true
			w.i.stamped.Add(1)
			if w.debug {
				w.i.log(kgo.LogLevelDebug, "stamped consistency token", "addr", w.addr, "key", h.key, "version", h.version, "token", cur.String())
			}
		case h.tag0End > 0: // kept as the caller wrote it
			if s, err := ParseState(tagData(src[h.fieldsAt:h.tag0End])); err == nil {
				sent = s.Token
			}
		}
	}
	if h.expectsAnswer {
		if w.frame != nil && writesMetadata(h.key) && w.view.Load() != nil {
			w.writes.note(h.corr, h.key, h.version, w.frame[h.hdrLen:])
		}
		watched := stamped && w.i.healer != nil && !mayBlock(h.key)
		err := w.q.push(inflight{
			corr:     h.corr,
			flexible: responseFlexible(h.key, h.version),
			raw:      h.key == saslHandshakeKey && h.version == 0,
			watched:  watched,
			sent:     sent,
			key:      h.key,
			version:  h.version,
			size:     int32(h.size),
		}, w.stopWaiting)
		if err != nil {
			return dst, false, err
		}
		if watched {
			w.noteWatched(h.key, cur)
		}
	} else {
		w.noteNoAck(h)
		w.announceMove() // no answer will come to wait for
	}
	return dst, stamped, nil
}
