package consistency

import "errors"

var (
	// ErrClusterMismatch is returned when two known tokens of different
	// clusters are merged, or when a store is advanced with a token of a
	// cluster other than its own. Offsets of different metadata logs cannot
	// be compared.
	ErrClusterMismatch = errors.New("consistency: tokens belong to different clusters")

	// ErrInvalidToken is returned by [Of] for an empty cluster id, a
	// cluster id longer than [MaxClusterIDLen], or a negative offset.
	ErrInvalidToken = errors.New("consistency: invalid token")

	// ErrMalformedToken wraps every error returned when decoding a token.
	ErrMalformedToken = errors.New("consistency: malformed token")

	// ErrInconsistentMetadata is returned by an operation whose broker kept
	// answering INCONSISTENT_METADATA (KIP-1243: the broker had not applied
	// the metadata offset the request carried) until the operation's retry
	// budget ended. Clients retry it transparently before that.
	ErrInconsistentMetadata = errors.New("consistency: broker metadata stayed behind the client's consistency token (INCONSISTENT_METADATA)")
)

var (
	// ErrFutureToken is returned when a token handed in from outside names
	// an offset beyond the cluster's committed metadata offset: no honest
	// holder can have seen it (a forged token, or a metadata log restored
	// under the same cluster id).
	ErrFutureToken = errors.New("consistency: token is beyond the cluster's committed metadata offset")
)
