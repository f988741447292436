package consistency

import (
	"fmt"
	"strconv"
)

// MaxClusterIDLen bounds the length of a cluster id in bytes. Kafka cluster
// ids are 22-character base64 UUIDs; the bound keeps parsers of untrusted
// input from accepting absurd sizes.
const MaxClusterIDLen = 255

// Token is an immutable consistency token: a cluster id and an offset in
// that cluster's metadata log. The zero value is Unknown.
//
// Token is a small value type; copy it freely. Compare with [Token.Equal]
// or ==.
type Token struct {
	clusterID string
	offset    int64
}

// Unknown returns the unknown token: the default before a client has seen
// any response from a broker that implements KIP-1243. It is the identity of
// [Token.Later].
func Unknown() Token { return Token{} }

// Of returns the token of offset in the metadata log of the cluster
// clusterID. It fails with an error wrapping [ErrInvalidToken] when the
// cluster id is empty or longer than [MaxClusterIDLen] bytes, or the offset
// is negative.
func Of(clusterID string, offset int64) (Token, error) {
	switch {
	case clusterID == "":
		return Token{}, fmt.Errorf("%w: empty cluster id", ErrInvalidToken)
	case len(clusterID) > MaxClusterIDLen:
		return Token{}, fmt.Errorf("%w: cluster id is %d bytes, more than %d", ErrInvalidToken, len(clusterID), MaxClusterIDLen)
	case offset < 0:
		return Token{}, fmt.Errorf("%w: negative offset %d", ErrInvalidToken, offset)
	}
	return Token{clusterID: clusterID, offset: offset}, nil
}

// MustOf is like [Of] but panics on invalid input. Use it only with
// constants, in tests and examples.
func MustOf(clusterID string, offset int64) Token {
	c, err := Of(clusterID, offset)
	if err != nil {
		panic(err)
	}
	return c
}

// IsUnknown reports whether c is the unknown token.
func (c Token) IsUnknown() bool { return c.clusterID == "" }

// ClusterID returns the cluster id, or "" for the unknown token.
func (c Token) ClusterID() string { return c.clusterID }

// Offset returns the metadata log offset, or -1 for the unknown token
// (the wire default of the KIP-1243 ConsistencyToken field).
func (c Token) Offset() int64 {
	if c.clusterID == "" {
		return -1
	}
	return c.offset
}

// Equal reports whether c and other name the same cluster and offset.
func (c Token) Equal(other Token) bool { return c == other }

// Later returns the more up-to-date of c and other: the one with the greater
// offset. Unknown is the identity: Later of Unknown and x is x. Two known
// tokens of different clusters cannot be compared and return an error
// wrapping [ErrClusterMismatch].
func (c Token) Later(other Token) (Token, error) {
	switch {
	case other.clusterID == "":
		return c, nil
	case c.clusterID == "":
		return other, nil
	case c.clusterID != other.clusterID:
		return c, fmt.Errorf("%w: %q and %q", ErrClusterMismatch, c.clusterID, other.clusterID)
	case other.offset > c.offset:
		return other, nil
	default:
		return c, nil
	}
}

// String returns a readable form for logs, such as "cluster-a@42" or
// "unknown". Use [Token.MarshalText] for a form that parses back.
func (c Token) String() string {
	if c.clusterID == "" {
		return "unknown"
	}
	return c.clusterID + "@" + strconv.FormatInt(c.offset, 10)
}
