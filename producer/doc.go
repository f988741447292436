// Package producer is the typed producer of a kconsist factory: a franz-go
// producer whose requests carry the factory's consistency token, so it sees
// every topic the factory's admin client created or changed.
//
// Records are serialized before anything is sent: a serialization error is
// returned by Produce or ProduceAsync and nothing reaches the broker.
// Producers are idempotent by default (acks=all), so the retries the
// consistency protocol may cause never duplicate or reorder records.
//
// When the cluster behind the bootstrap servers changes (a disaster-recovery
// switch, a DNS name moved), a factory producer follows it as the Java
// client does: records that failed because of the change are delivered to
// the new cluster by a fresh client. A producer pinned to a cluster
// (factory.PinCluster) fails them instead, with an error that errors.As
// finds a *rebootstrap.ClusterChangedError in (errors.Is(err,
// rebootstrap.ErrClusterChanged)). A producer whose credentials or TLS
// settings the cluster refuses fails its records with a *kconsist.AuthError.
//
// # Who owns what
//
// The factory (package factory) resolves a producer's settings; the
// factory's session (internal/session) makes its franz-go clients, keeps
// the ones producers of equal settings share (link.Share), and owns what
// every client follows: the cluster watcher (internal/cluster), the clocks
// of INCONSISTENT_METADATA answers (internal/wire), the auth watch. A
// producer meets them through the small interfaces of internal/link, which
// the session hands New as one link.Producer value; this package owns
// everything a record goes through on the way.
//
// A Produce call's stack crosses two packages: this one and franz-go
// (kgo), which writes the record on its connection goroutines through the
// session's wire interceptor (internal/wire). Only a failure asks more: the
// watcher's verdict and the marks, called through internal/link, and a
// new client from the session when the cluster changed.
//
// In this package:
//
//   - producer.go: the typed API (Producer, Record, Result, Produce,
//     ProduceSync, ProduceAsync, Flush, Close) and serialization.
//   - member.go: one producer on a client that others may share, and what
//     its own Flush waits for (its outstanding records).
//   - record.go: a record on its way (inflight, tag, ref): its kgo.Record,
//     its callback and what its outcome needs, in 176 bytes.
//   - engine.go: the engine all producers of one franz-go client share:
//     joining and leaving it, giving records to the current client.
//   - outcome.go: outcomes in order (settle, the queue drained by one
//     goroutine), what the engine's flush waits for, the last Close.
//   - follow.go: following a cluster change: waiting for the verdict on a
//     failed record, swapping the client, sending the record again; a
//     pinned producer's refusal and its retired client.
//   - attribute.go: which failures brokers behind the token caused (the
//     INCONSISTENT_METADATA clocks), and the error of a Produce whose
//     context ended first.
//   - auth.go: records failed at once while the cluster refuses the client.
//   - txn.go, groupsession.go: transactions, and GroupTransactSession.
//
// # Locks
//
// A goroutine takes the engine's three mutexes only in this order, and
// never calls franz-go or a user's callback holding engine.omu:
//
//	txnState.mu → engine.mu → engine.omu
//
// link.Share's mutex is taken before engine.vmu (a producer joining a
// shared client); engine.vmu and member.mu are leaves: nothing else is
// taken while one is held. The fields each mutex guards are listed at the
// engine, txnState and member structs; the rest are atomics, or set before
// the engine is used and never changed.
package producer
