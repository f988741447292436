package localcluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/kconsist/kconsist/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const apiVersionsKey int16 = 18

// ErrMalformedRequest wraps errors of request headers that do not parse.
var ErrMalformedRequest = errors.New("localcluster: malformed request")

// requestHeader is what the gateway reads of every request: RequestHeader
// v1 (key, version, correlation id, client id) or v2 (plus tagged fields,
// where tag 0 is KIP-1243's ConsistencyState).
type requestHeader struct {
	key, version int16
	corr         int32
	flexible     bool
	hasState     bool
	state        wire.State
	bodyOff      int // where the request body starts in the frame
}

// parseRequestHeader parses the header of a whole frame (size prefix
// included). An api key kmsg does not know is an error: the gateway cannot
// tell where its header ends, and kfake could not serve it either.
func parseRequestHeader(frame []byte) (requestHeader, error) {
	var h requestHeader
	b := frame[4:]
	if len(b) < 10 {
		return h, fmt.Errorf("%w: header of %d bytes", ErrMalformedRequest, len(b))
	}
	h.key = int16(binary.BigEndian.Uint16(b))
	h.version = int16(binary.BigEndian.Uint16(b[2:]))
	h.corr = int32(binary.BigEndian.Uint32(b[4:]))
	idLen := int(int16(binary.BigEndian.Uint16(b[8:])))
	b = b[10:]
	if idLen < -1 || idLen > len(b) {
		return h, fmt.Errorf("%w: client id length %d", ErrMalformedRequest, idLen)
	}
	if idLen > 0 {
		b = b[idLen:]
	}
	req := kmsg.RequestForKey(h.key)
	if req == nil {
		return h, fmt.Errorf("%w: unknown api key %d", ErrMalformedRequest, h.key)
	}
	if h.version < 0 || h.version > req.MaxVersion() {
		// kfake answers unsupported versions itself; the gateway only
		// needs to know the header layout, which kmsg knows up to max.
		if h.key != apiVersionsKey {
			return h, fmt.Errorf("%w: %s version %d", ErrMalformedRequest, kmsg.NameForKey(h.key), h.version)
		}
	}
	req.SetVersion(h.version)
	h.flexible = req.IsFlexible()
	// ApiVersions v3+ is sent with header v2 and carries tag 0 like any
	// request (its answer's header is v0 and carries none); a version
	// beyond kmsg's is answered by kfake, whatever its header holds.
	if h.flexible && (h.key != apiVersionsKey || h.version <= req.MaxVersion()) {
		var rest []byte
		_, err := wire.EachTag(b, func(tag uint64, data []byte) error {
			if tag != wire.ConsistencyStateTag {
				return nil
			}
			st, err := wire.ParseState(data)
			if err != nil {
				return err
			}
			h.state, h.hasState = st, true
			return nil
		}, &rest)
		if err != nil {
			return h, fmt.Errorf("%w: header tags: %w", ErrMalformedRequest, err)
		}
		b = rest
	}
	h.bodyOff = len(frame) - len(b)
	return h, nil
}

// rawTag is a response header tag other than ConsistencyState, kept as is.
type rawTag struct {
	tag  uint64
	data []byte
}

type responseHeader struct {
	corr    int32
	tags    []rawTag
	bodyOff int
}

func parseResponseHeader(frame []byte, flexible bool) (responseHeader, error) {
	var h responseHeader
	b := frame[4:]
	if len(b) < 4 {
		return h, fmt.Errorf("response of %d bytes", len(b))
	}
	h.corr = int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if flexible {
		var rest []byte
		_, err := wire.EachTag(b, func(tag uint64, data []byte) error {
			if tag != wire.ConsistencyStateTag { // ours replaces any upstream one
				h.tags = append(h.tags, rawTag{tag, data})
			}
			return nil
		}, &rest)
		if err != nil {
			return h, fmt.Errorf("response header tags: %w", err)
		}
		b = rest
	}
	h.bodyOff = len(frame) - len(b)
	return h, nil
}

// appendResponseFrame appends a whole response frame: size, correlation id,
// for flexible headers the tagged fields with tag 0 = {clusterID, token}
// first and other tags after it, then body.
func appendResponseFrame(dst []byte, corr int32, flexible bool, tags []rawTag, clusterID string, token int64, body []byte) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	switch {
	case flexible && clusterID != "":
		dst = binary.AppendUvarint(dst, uint64(1+len(tags)))
		dst = binary.AppendUvarint(dst, wire.ConsistencyStateTag)
		dst = binary.AppendUvarint(dst, uint64(wire.StateLen(clusterID)))
		dst = wire.AppendState(dst, clusterID, token)
	case flexible:
		dst = binary.AppendUvarint(dst, uint64(len(tags)))
	}
	if flexible {
		for _, t := range tags {
			dst = binary.AppendUvarint(dst, t.tag)
			dst = binary.AppendUvarint(dst, uint64(len(t.data)))
			dst = append(dst, t.data...)
		}
	}
	dst = append(dst, body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
