// Package session holds the runtime state of one factory: everything that
// follows a cluster for the clients the factory hands out.
//
// # Ownership
//
// A factory creates one [Session] in factory.New and closes it in its own
// Close. The factory keeps the public API and the configuration: options,
// properties, validation, role checks. For each client it resolves its
// settings into a [Build], a description already checked and translated to
// franz-go options, and asks the session for the client. The session never
// sees the factory's option types.
//
// The session owns:
//   - the consistency store every client stamps from and advances;
//   - the cluster watcher (internal/cluster), which learns the cluster id
//     when the first client is made and probes the bootstrap servers with
//     the factory's own settings;
//   - the emulator, its oracle (two franz-go clients of its own, made on
//     first use: one asks the quorum, one asks single brokers, so that a
//     DescribeQuorum a broker cannot answer holds no probe behind it) and
//     the one healer (wire.Healer), asked by the emulator, by the
//     observer after INCONSISTENT_METADATA and by every connection whose
//     request carrying a token stays unanswered (wire's held.go), in the
//     modes that keep tokens;
//   - the counters of [Stats] and the clocks of INCONSISTENT_METADATA
//     answers that producers read;
//   - the franz-go producer clients that producers of equal settings share,
//     by the key the factory computes;
//   - its life: after Close, every constructor returns Config.ErrClosed,
//     and Close has joined the watcher's, the emulator's, the healer's and
//     the oracle's goroutines, in that order (the emulator and the healer
//     ask the oracle).
//
// It does not own the clients it made: users close them. A franz-go client
// the session made reports its close through a hook, which folds the
// client's counters into Stats.
//
// A child session ([Session.Child], for factory.Factory.WithToken) has a store
// of its own over its parent's (consistency.NewHandedStore) and counters of its
// own, and shares the parent's watcher, emulator, oracle and healer. Its
// Close stops only its own constructors; the parent's Close stops what they
// share.
//
// # Generations and client swaps
//
// The watcher counts cluster changes (its generation): a probe that finds
// the bootstrap servers naming another cluster than the one known raises it
// and calls the OnChange callbacks. Every producer gets a link.Producer
// ([Session.Producer]) and every consumer a link.Consumer
// ([Session.Consumer]), made here (the factory seals it, link.Seal, for
// the client package's constructor, which refuses a value without the
// seal): the watcher to hear changes from,
// whether the client is pinned, and a maker of clients (a link.ClientMaker
// for a producer; for a consumer its link.Follower, whose Follow builds
// the client again or, pinned, returns the error), which builds the same
// client again from its Build (after Close it fails with ErrClosed). A
// consumer swaps at once, from its OnChange callback, to the client Follow
// made on the new cluster. A producer that is not transactional swaps at
// once too, from its OnChange callback, to a new client; any producer
// swaps when a record fails: it waits for the checks in flight (Settle),
// and if the generation moved since its client was made, sends the record
// again on a new client. At a change the oracle drops its clients and node
// map (they name the old cluster, whose refusals would hold its questions
// behind a paced rebootstrap). A pinned client never
// swaps: its work fails with a rebootstrap.ClusterChangedError naming the
// pin and the new cluster, and a pinned producer refuses records at once
// while the bootstrap servers name another cluster than its pin (the
// watcher is its link.ClusterNames), asking the watcher again every
// Recheck. Clients whose security settings are the
// factory's also watch the probes' authentication failures
// (link.AuthWatch).
package session
