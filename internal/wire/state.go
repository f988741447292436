package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ConsistencyStateTag is the header tag of KIP-1243's ConsistencyState, in
// RequestHeader v2 and ResponseHeader v1.
const ConsistencyStateTag = 0

// MaxClusterIDLen bounds cluster ids read from the wire; see
// consistency.MaxClusterIDLen.
const MaxClusterIDLen = 255

// ErrMalformedHeader wraps every error returned for header bytes that do not
// parse.
var ErrMalformedHeader = errors.New("wire: malformed header")

// State is the decoded ConsistencyState header field:
//
//	ConsistencyState {
//	  ClusterId        compact nullable string (default null)
//	  ConsistencyToken int64                   (default -1)
//	  _tagged_fields
//	}
//
// ClusterID aliases the parsed bytes; copy it before keeping it.
type State struct {
	ClusterID []byte // nil when null
	Token     int64
}

// AppendState appends the encoded ConsistencyState payload (the bytes inside
// the tag, without the tag number and size) to dst.
func AppendState(dst []byte, clusterID string, token int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(clusterID))+1)
	dst = append(dst, clusterID...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(token))
	return append(dst, 0) // no tagged fields
}

// StateLen returns len(AppendState(nil, clusterID, token)).
func StateLen(clusterID string) int {
	return uvarintLen(uint64(len(clusterID))+1) + len(clusterID) + 8 + 1
}

// ParseState decodes a ConsistencyState payload. All of b must be consumed.
// A null cluster id gives a nil ClusterID. Tagged fields inside the payload
// are skipped. Errors wrap ErrMalformedHeader.
func ParseState(b []byte) (State, error) {
	var s State
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return s, malformed("ConsistencyState: bad cluster id length")
	}
	b = b[w:]
	if n > 0 {
		n--
		if n > MaxClusterIDLen {
			return s, malformed("ConsistencyState: cluster id of %d bytes", n)
		}
		if uint64(len(b)) < n {
			return s, malformed("ConsistencyState: cluster id truncated")
		}
		s.ClusterID = b[:n:n]
		b = b[n:]
	}
	if len(b) < 8 {
		return s, malformed("ConsistencyState: token truncated")
	}
	s.Token = int64(binary.BigEndian.Uint64(b))
	if s.Token < -1 {
		return s, malformed("ConsistencyState: negative token %d", s.Token)
	}
	b = b[8:]
	if len(b) == 1 && b[0] == 0 { // no tagged fields, the usual case
		return s, nil
	}
	rest, err := SkipTags(b)
	if err != nil {
		return s, fmt.Errorf("ConsistencyState: %w", err)
	}
	if len(rest) != 0 {
		return s, malformed("ConsistencyState: %d trailing bytes", len(rest))
	}
	return s, nil
}

// SkipTags skips a tagged-field section (uvarint count, then per field a
// uvarint tag, a uvarint size and the data) and returns what follows it.
// Tags must be strictly ascending, as the Kafka protocol requires.
func SkipTags(b []byte) ([]byte, error) {
	var err error
	_, err = EachTag(b, func(uint64, []byte) error { return nil }, &b)
	return b, err
}

// EachTag walks a tagged-field section, calling fn for each field in order.
// It stores what follows the section in *rest and returns the number of
// fields. Tags must be strictly ascending and sizes must fit in b; errors
// wrap ErrMalformedHeader.
func EachTag(b []byte, fn func(tag uint64, data []byte) error, rest *[]byte) (int, error) {
	count, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, malformed("bad tag count")
	}
	if count > uint64(len(b)) { // every field needs at least two bytes
		return 0, malformed("tag count %d exceeds the header", count)
	}
	b = b[w:]
	last := int64(-1)
	for i := uint64(0); i < count; i++ {
		tag, w := binary.Uvarint(b)
		if w <= 0 {
			return 0, malformed("bad tag number")
		}
		b = b[w:]
		if int64(tag) <= last || tag > 1<<31 {
			return 0, malformed("tag %d out of order or duplicate", tag)
		}
		last = int64(tag)
		size, w := binary.Uvarint(b)
		if w <= 0 {
			return 0, malformed("bad size of tag %d", tag)
		}
		b = b[w:]
		if size > uint64(len(b)) {
			return 0, malformed("tag %d of %d bytes is truncated", tag, size)
		}
		if err := fn(tag, b[:size:size]); err != nil {
			return 0, err
		}
		b = b[size:]
	}
	*rest = b
	return int(count), nil
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedHeader, fmt.Sprintf(format, args...))
}
