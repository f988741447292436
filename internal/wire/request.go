package wire

import (
	"encoding/binary"
	"errors"
	"math"
)

// errShort reports that a header parser needs more bytes than it was given.
// It never leaves the package.
var errShort = errors.New("wire: need more bytes")

// maxHeldHeader bounds the bytes a connection holds back while a header is
// split across writes or reads. A client id is at most 32767 bytes, a
// transactional id as long; tags from kgo are empty.
const maxHeldHeader = 1 << 17

// reqHeader is what the writer needs to know about a request frame.
type reqHeader struct {
	size          int32 // bytes after the size field
	key, version  int16
	corr          int32
	flexible      bool
	hdrLen        int // size field + request header
	need          int // bytes needed to decide: hdrLen, or up to acks for produce
	tagsAt        int // start of the tag section (== hdrLen when not flexible)
	fieldsAt      int // first tagged field, after the count
	tagCount      uint64
	tag0End       int // end of an existing tag 0 field, or 0 when absent
	expectsAnswer bool
}

// parseRequest parses the size and RequestHeader at the start of b, and for
// produce the acks (after the transactional id from v3 on), which say
// whether a response follows. It returns errShort when b ends too early,
// and an error wrapping ErrMalformedHeader when the bytes cannot be a
// request kgo wrote.
func parseRequest(b []byte, h *reqHeader) error {
	*h = reqHeader{}
	if len(b) < 4 {
		return errShort
	}
	h.size = int32(binary.BigEndian.Uint32(b))
	if h.size < 8 {
		return malformed("request frame size %d", h.size)
	}
	frameEnd := 4 + int(h.size)
	full := len(b) >= frameEnd // a short read past frameEnd is a malformed frame, not errShort
	if full {
		b = b[:frameEnd]
	}
	short := func() error {
		if full {
			return malformed("request header runs past its %d-byte frame", h.size)
		}
		return errShort
	}
	if len(b) < 12 {
		return short()
	}
	h.key = int16(binary.BigEndian.Uint16(b[4:]))
	h.version = int16(binary.BigEndian.Uint16(b[6:]))
	h.corr = int32(binary.BigEndian.Uint32(b[8:]))
	h.expectsAnswer = true
	pos := 12
	if h.key == controlledShutV0 && h.version == 0 { // RequestHeader v0: no client id
		h.hdrLen, h.need, h.tagsAt = pos, pos, pos
		return nil
	}
	if len(b) < pos+2 {
		return short()
	}
	idLen := int(int16(binary.BigEndian.Uint16(b[pos:])))
	pos += 2
	if idLen < -1 {
		return malformed("client id length %d", idLen)
	}
	if idLen > 0 {
		pos += idLen
		if len(b) < pos {
			return short()
		}
	}
	h.tagsAt = pos
	h.flexible = requestFlexible(h.key, h.version)
	if h.flexible {
		end, err := scanRequestTags(b, pos, h)
		if err != nil {
			if err == errShort {
				return short()
			}
			return err
		}
		pos = end
	}
	h.hdrLen, h.need = pos, pos
	if h.key == produceKey {
		acksAt := pos
		if h.version >= 3 { // the transactional id leads the body from v3 on
			var err error
			if acksAt, err = skipTransactionalID(b, pos, h.flexible); err != nil {
				if err == errShort {
					return short()
				}
				return err
			}
		}
		if len(b) < acksAt+2 {
			return short()
		}
		h.expectsAnswer = binary.BigEndian.Uint16(b[acksAt:]) != 0
		h.need = acksAt + 2
	}
	return nil
}

// scanRequestTags checks the tag section at b[pos:] (ascending tags, sizes
// inside b) and notes where tag 0 ends if there is one.
func scanRequestTags(b []byte, pos int, h *reqHeader) (int, error) {
	count, w := binary.Uvarint(b[pos:])
	if w == 0 {
		return 0, errShort
	}
	if w < 0 || count > maxHeldHeader {
		return 0, malformed("request tag count")
	}
	pos += w
	h.tagCount = count
	h.fieldsAt = pos
	last := int64(-1)
	for i := uint64(0); i < count; i++ {
		tag, w := binary.Uvarint(b[pos:])
		if w == 0 {
			return 0, errShort
		}
		if w < 0 || tag > math.MaxInt32 || int64(tag) <= last {
			return 0, malformed("request tag %d out of order, duplicate or too large", tag)
		}
		last = int64(tag)
		pos += w
		size, w := binary.Uvarint(b[pos:])
		if w == 0 {
			return 0, errShort
		}
		if w < 0 || size > maxHeldHeader {
			return 0, malformed("size of request tag %d", tag)
		}
		pos += w + int(size)
		if len(b) < pos {
			return 0, errShort
		}
		if tag == ConsistencyStateTag {
			h.tag0End = pos
		}
	}
	return pos, nil
}

// skipTransactionalID returns where acks starts in a produce body at b[pos:].
func skipTransactionalID(b []byte, pos int, flexible bool) (int, error) {
	if flexible { // compact nullable string: uvarint length+1, 0 is null
		n, w := binary.Uvarint(b[pos:])
		if w == 0 {
			return 0, errShort
		}
		if w < 0 || n > math.MaxInt16+1 {
			return 0, malformed("produce transactional id length")
		}
		pos += w
		if n > 0 {
			pos += int(n - 1)
		}
		return pos, nil
	}
	if len(b) < pos+2 {
		return 0, errShort
	}
	n := int(int16(binary.BigEndian.Uint16(b[pos:])))
	if n < -1 {
		return 0, malformed("produce transactional id length %d", n)
	}
	pos += 2
	if n > 0 {
		pos += n
	}
	return pos, nil
}

// appendStamped appends to dst the header hdr (hdr[:h.hdrLen] of a parsed
// flexible request) with tag 0 set to field, a whole encoded tag 0 field
// (see appendStateField): an existing tag 0 is replaced, other tags keep
// their bytes and order, and the frame size grows by the difference. Tag 0
// is the smallest tag, so it always leads.
func appendStamped(dst, hdr []byte, h *reqHeader, field []byte) []byte {
	rest := hdr[h.fieldsAt:h.hdrLen] // fields after tag 0
	count := h.tagCount
	if h.tag0End > 0 {
		rest = hdr[h.tag0End:h.hdrLen]
	} else {
		count++
	}
	section := uvarintLen(count) + len(field) + len(rest)
	size := int(h.size) - (h.hdrLen - h.tagsAt) + section
	dst = binary.BigEndian.AppendUint32(dst, uint32(size))
	dst = append(dst, hdr[4:h.tagsAt]...)
	dst = binary.AppendUvarint(dst, count)
	dst = append(dst, field...)
	return append(dst, rest...)
}

// appendStateField appends the tagged field tag 0 = {clusterID, token}: the
// tag, the payload size and the ConsistencyState payload.
func appendStateField(dst []byte, clusterID string, token int64) []byte {
	dst = append(dst, ConsistencyStateTag)
	dst = binary.AppendUvarint(dst, uint64(StateLen(clusterID)))
	return AppendState(dst, clusterID, token)
}
