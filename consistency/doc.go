// Package consistency holds the consistency token of KIP-1243 and the store
// that clients of one factory share.
//
// A [Token] names a Kafka cluster and an offset in that cluster's metadata
// log (__cluster_metadata-0). A broker that has applied the log up to that
// offset knows every metadata change the holder of the token has seen, so
// a request carrying the token can be answered without a stale read. The
// zero Token is [Unknown]: no cluster, no offset, and nothing to send.
//
// Two things matter to a caller:
//
//   - [Token.Later] merges two tokens of one cluster into the more recent
//     one. It is commutative, associative and idempotent, with Unknown as its
//     identity, so tokens can be merged in any order from any number of
//     goroutines and processes.
//   - [Store] keeps the latest token of a group of clients. Every response
//     advances it, every request reads it. [NewMemoryStore] is the lock-free
//     in-process store; anything that meets the Store contract (a file, a
//     shared cache) can replace it.
//
// A Token travels between processes as text or bytes: [Token.Encode] (and
// [Token.MarshalText]) gives a short string that is safe in HTTP headers and
// Kafka record headers, which [ParseToken] reads back, and
// [Token.MarshalBinary] a compact byte form. Both parsers are strict and
// reject anything they would not have produced themselves.
package consistency
