package consistency

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
)

// Text tokens look like "kc1.42.Y2x1c3Rlci1h": a version prefix, the decimal
// offset and the base64url (unpadded) cluster id. The unknown token is
// "kc1.unknown". Every character is in [A-Za-z0-9._-], so a token is safe in
// HTTP headers, URLs, Kafka record headers and file names.
const (
	textPrefix  = "kc1."
	textUnknown = "kc1.unknown"
)

// Binary tokens are: version byte 1, uvarint length of the cluster id, the
// cluster id, and (only when the length is not zero) the uvarint offset.
const binaryVersion = 1

var b64 = base64.RawURLEncoding.Strict()

// ParseToken parses a text token produced by [Token.MarshalText].
func ParseToken(token string) (Token, error) {
	var c Token
	err := c.UnmarshalText([]byte(token))
	return c, err
}

// Encode returns the text token of c, as a string: the text of
// [Token.MarshalText].
func (c Token) Encode() string {
	b, _ := c.MarshalText()
	return string(b)
}

// AppendText appends the text token of c to dst.
func (c Token) AppendText(dst []byte) []byte {
	if c.clusterID == "" {
		return append(dst, textUnknown...)
	}
	dst = append(dst, textPrefix...)
	dst = strconv.AppendInt(dst, c.offset, 10)
	dst = append(dst, '.')
	return b64.AppendEncode(dst, []byte(c.clusterID))
}

// MarshalText returns the versioned text token of c. It never fails.
// encoding/json uses it, so a Token is a JSON string.
func (c Token) MarshalText() ([]byte, error) {
	return c.AppendText(make([]byte, 0, 24+b64.EncodedLen(len(c.clusterID)))), nil
}

// UnmarshalText parses a text token. Parsing is strict: only the exact bytes
// [Token.MarshalText] produces are accepted (no leading zeros, no padding,
// no surrounding space). Errors wrap [ErrMalformedToken]; on error *c is left
// unchanged.
func (c *Token) UnmarshalText(text []byte) error {
	got, err := parseText(text)
	if err != nil {
		return err
	}
	*c = got
	return nil
}

func parseText(text []byte) (Token, error) {
	if string(text) == textUnknown {
		return Token{}, nil
	}
	rest, ok := bytes.CutPrefix(text, []byte(textPrefix))
	if !ok {
		return Token{}, malformed("text token must start with %q", textPrefix)
	}
	num, enc, ok := bytes.Cut(rest, []byte{'.'})
	if !ok {
		return Token{}, malformed("text token has no cluster id part")
	}
	if len(num) == 0 || len(num) > 19 || (num[0] == '0' && len(num) > 1) {
		return Token{}, malformed("offset %q is not a canonical decimal", num)
	}
	var off int64
	for _, d := range num {
		if d < '0' || d > '9' {
			return Token{}, malformed("offset %q is not a canonical decimal", num)
		}
		next := off*10 + int64(d-'0')
		if next < off {
			return Token{}, malformed("offset %q overflows int64", num)
		}
		off = next
	}
	if len(enc) == 0 || len(enc) > b64.EncodedLen(MaxClusterIDLen) {
		return Token{}, malformed("cluster id part has %d characters", len(enc))
	}
	id, err := b64.DecodeString(string(enc))
	if err != nil {
		return Token{}, malformed("cluster id is not unpadded base64url: %v", err)
	}
	// The decoder skips CR and LF; re-encoding catches them and any other
	// non-canonical form.
	if b64.EncodeToString(id) != string(enc) {
		return Token{}, malformed("cluster id is not canonical base64url")
	}
	c, err := Of(string(id), off)
	if err != nil {
		return Token{}, malformed("%v", err)
	}
	return c, nil
}

// AppendBinary appends the binary token of c to dst.
func (c Token) AppendBinary(dst []byte) ([]byte, error) {
	dst = append(dst, binaryVersion)
	dst = binary.AppendUvarint(dst, uint64(len(c.clusterID)))
	if c.clusterID == "" {
		return dst, nil
	}
	dst = append(dst, c.clusterID...)
	return binary.AppendUvarint(dst, uint64(c.offset)), nil
}

// MarshalBinary returns the compact binary token of c. It never fails.
func (c Token) MarshalBinary() ([]byte, error) {
	return c.AppendBinary(make([]byte, 0, 2+len(c.clusterID)+binary.MaxVarintLen64))
}

// UnmarshalBinary parses a binary token. Like [Token.UnmarshalText] it
// accepts only canonical encodings; errors wrap [ErrMalformedToken] and leave
// *c unchanged.
func (c *Token) UnmarshalBinary(data []byte) error {
	got, err := parseBinary(data)
	if err != nil {
		return err
	}
	*c = got
	return nil
}

func parseBinary(data []byte) (Token, error) {
	if len(data) == 0 {
		return Token{}, malformed("empty binary token")
	}
	if data[0] != binaryVersion {
		return Token{}, malformed("binary token version %d, want %d", data[0], binaryVersion)
	}
	rest := data[1:]
	n, w := uvarint(rest)
	if w <= 0 {
		return Token{}, malformed("bad cluster id length")
	}
	rest = rest[w:]
	if n == 0 {
		if len(rest) != 0 {
			return Token{}, malformed("%d trailing bytes after unknown token", len(rest))
		}
		return Token{}, nil
	}
	if n > MaxClusterIDLen || n > uint64(len(rest)) {
		return Token{}, malformed("cluster id length %d exceeds the token or %d", n, MaxClusterIDLen)
	}
	id := rest[:n]
	rest = rest[n:]
	off, w := uvarint(rest)
	if w <= 0 {
		return Token{}, malformed("bad offset")
	}
	if len(rest) != w {
		return Token{}, malformed("%d trailing bytes", len(rest)-w)
	}
	if off > 1<<63-1 {
		return Token{}, malformed("offset %d overflows int64", off)
	}
	return Of(string(id), int64(off))
}

// uvarint decodes a minimally encoded uvarint, returning a width <= 0 for
// truncated, overlong or non-minimal input.
func uvarint(b []byte) (uint64, int) {
	v, w := binary.Uvarint(b)
	if w <= 0 {
		return 0, -1
	}
	if w > 1 && b[w-1] == 0 { // a trailing zero group is a non-minimal encoding
		return 0, -1
	}
	return v, w
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedToken, fmt.Sprintf(format, args...))
}
