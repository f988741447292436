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
// client does: a fresh client for the new cluster is made as soon as the
// change is seen (for a transactional producer, when a record fails on the
// old cluster), and the records the old client held or failed are
// delivered by it. A producer pinned to a cluster
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
// In this package, the engine all producers of one franz-go client share
// is split into parts, each the one owner of its state, that meet through
// a few methods:
//
//   - producer.go: the typed API (Producer, Record, Result, Produce,
//     ProduceSync, ProduceAsync, Flush, Close) and serialization.
//   - member.go: one producer on a client that others may share; its
//     Flush and Close.
//   - pending.go: what a Flush waits for. Each producer counts its records
//     in epochs, from Produce until their callback returned; Flush seals
//     the current epoch and waits for it (and those sealed before it)
//     only, so it ends while other goroutines keep producing.
//   - record.go: a record on its way (inflight, tag, ref): its kgo.Record,
//     its callback and what its outcome needs, in 176 bytes.
//   - engine.go: the engine: joining and leaving it, the producers its
//     flush waits for, giving records to the current client.
//   - outcome.go: outcome ordering (outcomes: the ordered queue and its
//     goroutine, which asks the follower through the verdicts interface
//     what a failed record becomes), the engine's own work on records
//     (work: what a flush whose client holds nothing waits to change),
//     the goroutines Close joins (tasks), the engine's flush and the
//     last Close.
//   - refusal.go: records refused unsent (a closed producer, a pinned
//     producer's cluster gone, a refused client, a broken transaction),
//     delivered in order on a goroutine of their own, apart from the
//     outcomes: a stream of them never holds up an acknowledgement, nor
//     a Flush or Close.
//   - follow.go: following a cluster change, the engine's own: settling a
//     record's outcome, waiting for the verdict on a failed record,
//     swapping the client, sending the record again; a pinned producer's
//     retired client.
//   - pin.go: a pinned producer's side of a change (pinState): refusing
//     records while its cluster is gone, failing what the client holds.
//   - attribute.go: error attribution (attributor): which failures
//     brokers behind the token caused (the INCONSISTENT_METADATA marks and
//     clock), which the cluster refusing the client caused, and the error
//     of a Produce whose context ended first.
//   - auth.go: the auth watch's side (authState): records failed at once
//     while the cluster refuses the client, and the buffered ones aborted.
//   - txn.go, groupsession.go: transactions (txnState: what the open
//     transaction is, whether a cluster change broke it; beginning and
//     ending one, which flush and may replace the client, are the
//     engine's), and GroupTransactSession.
//
// # Locks
//
// A goroutine takes the engine's mutexes only in these orders, and never
// calls a user's callback holding any of them:
//
//	txnState.mu → engine.mu → work.mu, tasks.mu
//	txnState.mu → engine.vmu → epochs.mu (the engine's flush)
//	link.Share's mutex → engine.vmu
//	outcomes.mu → work.mu, tasks.mu
//	authState.mu → tasks.mu
//
// engine.mu serializes replacing the current client, and is held while
// franz-go purges a pinned producer's topics; work.mu, tasks.mu, epochs.mu
// and refusals.mu are leaves: nothing else is taken while one is held. The
// fields each mutex guards are listed at their structs; the rest are
// atomics, or set before the engine is used and never changed.
package producer
