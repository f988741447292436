package wire

import (
	"encoding/binary"
	"math"
)

// respHeader is what the reader learns from the size field and
// ResponseHeader of a response frame.
type respHeader struct {
	size     int32 // bytes after the size field
	corr     int32
	hdrLen   int // size field + response header
	state    State
	hasState bool
}

// parseResponseStart reads the size and correlation id, the part needed to
// find the request a frame answers. It returns errShort on fewer than 8
// bytes.
func parseResponseStart(b []byte, h *respHeader) error {
	if len(b) < 8 {
		return errShort
	}
	h.size = int32(binary.BigEndian.Uint32(b))
	if h.size < 4 {
		return malformed("response frame size %d", h.size)
	}
	h.corr = int32(binary.BigEndian.Uint32(b[4:]))
	return nil
}

// parseResponse parses the size and ResponseHeader at the start of b; a
// flexible header (v1) has a tag section, whose tag 0 is decoded with
// ParseState. It returns errShort when b ends before the header does, and
// an error wrapping ErrMalformedHeader for bytes no broker should send. The
// State aliases b.
func parseResponse(b []byte, flexible bool, h *respHeader) error {
	*h = respHeader{}
	if err := parseResponseStart(b, h); err != nil {
		return err
	}
	if !flexible {
		h.hdrLen = 8
		return nil
	}
	frameEnd := 4 + int(h.size)
	full := len(b) >= frameEnd
	if full {
		b = b[:frameEnd]
	}
	short := func() error {
		if full {
			return malformed("response header runs past its %d-byte frame", h.size)
		}
		return errShort
	}
	pos := 8
	count, w := binary.Uvarint(b[pos:])
	if w == 0 {
		return short()
	}
	if w < 0 || count > maxHeldHeader {
		return malformed("response tag count")
	}
	pos += w
	last := int64(-1)
	for i := uint64(0); i < count; i++ {
		tag, w := binary.Uvarint(b[pos:])
		if w == 0 {
			return short()
		}
		if w < 0 || tag > math.MaxInt32 {
			return malformed("bad response tag number")
		}
		if int64(tag) <= last {
			return malformed("response tag %d out of order or duplicate", tag)
		}
		last = int64(tag)
		pos += w
		size, w := binary.Uvarint(b[pos:])
		if w == 0 {
			return short()
		}
		if w < 0 || size > maxHeldHeader {
			return malformed("size of response tag %d", tag)
		}
		pos += w
		if uint64(len(b)-pos) < size {
			return short()
		}
		if tag == ConsistencyStateTag {
			s, err := ParseState(b[pos : pos+int(size)])
			if err != nil {
				return err
			}
			h.state, h.hasState = s, true
		}
		pos += int(size)
	}
	if pos > maxHeldHeader {
		return malformed("response header of %d bytes", pos)
	}
	h.hdrLen = pos
	return nil
}
