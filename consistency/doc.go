// Package consistency holds the consistency token of KIP-1243 and the store
// that clients of one factory share.
//
// A [Context] names a Kafka cluster and an offset in that cluster's metadata
// log (__cluster_metadata-0). A broker that has applied the log up to that
// offset knows every metadata change the holder of the context has seen, so
// a request carrying the context can be answered without a stale read. The
// zero Context is [Unknown]: no cluster, no offset, and nothing to send.
//
// Two things matter to a caller:
//
//   - [Context.Later] merges two contexts of one cluster into the more recent
//     one. It is commutative, associative and idempotent, with Unknown as its
//     identity, so contexts can be merged in any order from any number of
//     goroutines and processes.
//   - [Store] keeps the latest context of a group of clients. Every response
//     advances it, every request reads it. [NewMemoryStore] is the lock-free
//     in-process store; anything that meets the Store contract (a file, a
//     shared cache) can replace it.
//
// A Context travels between processes as a token: [Context.MarshalText] gives
// a short string that is safe in HTTP headers and Kafka record headers, and
// [Context.MarshalBinary] a compact byte form. Both parsers are strict and
// reject anything they would not have produced themselves.
package consistency
