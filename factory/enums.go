package factory

import "fmt"

// Acks is how many replicas must have a record before a produce succeeds
// (the producer's acks). The values are Kafka's own numbers.
type Acks int8

const (
	// AllISRAcks waits for every in-sync replica (acks=all, -1): the
	// default, and what idempotence needs.
	AllISRAcks Acks = -1
	// NoAck waits for nothing (acks=0): records can be lost unseen.
	NoAck Acks = 0
	// LeaderAck waits for the partition leader alone (acks=1).
	LeaderAck Acks = 1
)

// String returns the property value: "all", "0" or "1".
func (a Acks) String() string {
	switch a {
	case AllISRAcks:
		return "all"
	case NoAck:
		return "0"
	case LeaderAck:
		return "1"
	}
	return fmt.Sprintf("Acks(%d)", int8(a))
}

func (a Acks) valid() bool { return a == AllISRAcks || a == NoAck || a == LeaderAck }

// Codec is a producer's batch compression (compression.type).
type Codec uint8

const (
	CodecNone   Codec = iota // no compression: the default
	CodecGzip                // gzip
	CodecSnappy              // snappy
	CodecLz4                 // lz4
	CodecZstd                // zstd
)

var codecNames = [...]string{"none", "gzip", "snappy", "lz4", "zstd"}

// String returns the property value: none, gzip, snappy, lz4 or zstd.
func (c Codec) String() string {
	if int(c) < len(codecNames) {
		return codecNames[c]
	}
	return fmt.Sprintf("Codec(%d)", uint8(c))
}

// OffsetReset is where a consumer starts when it has no committed offset
// or its offset is out of range (auto.offset.reset).
type OffsetReset uint8

const (
	// ResetLatest starts after the last record: the default.
	ResetLatest OffsetReset = iota
	// ResetEarliest starts at the first record.
	ResetEarliest
	// ResetNone makes a missing or out-of-range offset an error.
	ResetNone
)

var resetNames = [...]string{"latest", "earliest", "none"}

// String returns the property value: latest, earliest or none.
func (r OffsetReset) String() string {
	if int(r) < len(resetNames) {
		return resetNames[r]
	}
	return fmt.Sprintf("OffsetReset(%d)", uint8(r))
}

// Isolation is which records of transactions a consumer reads
// (isolation.level).
type Isolation uint8

const (
	// ReadUncommitted reads every record: the default.
	ReadUncommitted Isolation = iota
	// ReadCommitted reads records of committed transactions only.
	ReadCommitted
)

var isolationNames = [...]string{"read_uncommitted", "read_committed"}

// String returns the property value: read_uncommitted or read_committed.
func (l Isolation) String() string {
	if int(l) < len(isolationNames) {
		return isolationNames[l]
	}
	return fmt.Sprintf("Isolation(%d)", uint8(l))
}

// Protocol is the security protocol of a client's connections
// (security.protocol).
type Protocol uint8

const (
	// ProtocolDefault derives the protocol from the other security
	// settings: SSL with TLS settings, SASL_PLAINTEXT with SASL, SASL_SSL
	// with both, PLAINTEXT with neither.
	ProtocolDefault Protocol = iota
	Plaintext                // PLAINTEXT
	SSL                      // SSL
	SASLPlaintext            // SASL_PLAINTEXT
	SASLSSL                  // SASL_SSL
)

var protocolNames = [...]string{"", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}

// String returns the property value: PLAINTEXT, SSL, SASL_PLAINTEXT or
// SASL_SSL ("" for ProtocolDefault).
func (p Protocol) String() string {
	if int(p) < len(protocolNames) {
		return protocolNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", uint8(p))
}

func (p Protocol) tls() bool  { return p == SSL || p == SASLSSL }
func (p Protocol) sasl() bool { return p == SASLPlaintext || p == SASLSSL }

// Mechanism is a SASL mechanism (sasl.mechanism).
type Mechanism uint8

const (
	mechanismUnset Mechanism = iota
	// Plain is SASL/PLAIN: the password is sent as is, so use it with TLS.
	Plain
	// ScramSHA256 is SCRAM-SHA-256.
	ScramSHA256
	// ScramSHA512 is SCRAM-SHA-512.
	ScramSHA512
)

var mechanismNames = [...]string{"", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// String returns the property value: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
func (m Mechanism) String() string {
	if int(m) < len(mechanismNames) {
		return mechanismNames[m]
	}
	return fmt.Sprintf("Mechanism(%d)", uint8(m))
}
