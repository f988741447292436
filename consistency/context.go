package consistency

import (
	"fmt"
	"strconv"
)

// MaxClusterIDLen bounds the length of a cluster id in bytes. Kafka cluster
// ids are 22-character base64 UUIDs; the bound keeps parsers of untrusted
// input from accepting absurd sizes.
const MaxClusterIDLen = 255

// Context is an immutable consistency context: a cluster id and an offset in
// that cluster's metadata log. The zero value is Unknown.
//
// Context is a small value type; copy it freely. Compare with [Context.Equal]
// or ==.
type Context struct {
	clusterID string
	offset    int64
}

// Unknown returns the unknown context: the default before a client has seen
// any response from a broker that implements KIP-1243. It is the identity of
// [Context.Later].
func Unknown() Context { return Context{} }

// Of returns the context of offset in the metadata log of the cluster
// clusterID. It fails with an error wrapping [ErrInvalidContext] when the
// cluster id is empty or longer than [MaxClusterIDLen] bytes, or the offset
// is negative.
func Of(clusterID string, offset int64) (Context, error) {
	switch {
	case clusterID == "":
		return Context{}, fmt.Errorf("%w: empty cluster id", ErrInvalidContext)
	case len(clusterID) > MaxClusterIDLen:
		return Context{}, fmt.Errorf("%w: cluster id is %d bytes, more than %d", ErrInvalidContext, len(clusterID), MaxClusterIDLen)
	case offset < 0:
		return Context{}, fmt.Errorf("%w: negative offset %d", ErrInvalidContext, offset)
	}
	return Context{clusterID: clusterID, offset: offset}, nil
}

// MustOf is like [Of] but panics on invalid input. Use it only with
// constants, in tests and examples.
func MustOf(clusterID string, offset int64) Context {
	c, err := Of(clusterID, offset)
	if err != nil {
		panic(err)
	}
	return c
}

// IsUnknown reports whether c is the unknown context.
func (c Context) IsUnknown() bool { return c.clusterID == "" }

// ClusterID returns the cluster id, or "" for the unknown context.
func (c Context) ClusterID() string { return c.clusterID }

// Offset returns the metadata log offset, or -1 for the unknown context
// (the wire default of the KIP-1243 ConsistencyToken field).
func (c Context) Offset() int64 {
	if c.clusterID == "" {
		return -1
	}
	return c.offset
}

// Equal reports whether c and other name the same cluster and offset.
func (c Context) Equal(other Context) bool { return c == other }

// Later returns the more up-to-date of c and other: the one with the greater
// offset. Unknown is the identity: Later of Unknown and x is x. Two known
// contexts of different clusters cannot be compared and return an error
// wrapping [ErrClusterMismatch].
func (c Context) Later(other Context) (Context, error) {
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
// "unknown". Use [Context.MarshalText] for a form that parses back.
func (c Context) String() string {
	if c.clusterID == "" {
		return "unknown"
	}
	return c.clusterID + "@" + strconv.FormatInt(c.offset, 10)
}
