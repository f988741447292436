// Package tokens owns a factory's consistency store: every change to the
// factory's token goes through one [Owner], and every consistency event of
// the factory goes out through one [Stream].
//
// Who changes the store, and how:
//
//	change                         caller                          Owner method
//	a broker's answer carried one  internal/wire responseReader    Answered
//	the cluster's committed offset internal/wire Emulator           Committed
//	an impossible token lowered    internal/wire Healer             Heal
//	a foreign token replaced       responseReader, Healer           ReplaceForeign, Heal
//	the bootstrap servers moved    responseReader, cluster.Watcher  Moved
//	a token taken from outside     factory.Accept                   Hand
//
// An advance (Answered, Committed, Hand) is the store's monotonic merge,
// which never lowers it; every other change (Heal, ReplaceForeign, Moved)
// is a compare-and-swap from the value its caller judged. So a decision
// made on an earlier Load never undoes what another writer stored
// meanwhile (a heal judged on 100 does not lower a store another
// connection raised to 105). The owner also remembers what its cluster's
// own brokers told it: the cluster it learnt from their answers, and the
// highest offset it knows that cluster committed. A token learnt that way
// is not checked at once (only once requests carrying it were held for
// a while), and is healed only if the cluster's committed offset is then
// below it: a metadata log restored under the same cluster id. A
// genuine cluster change (the learnt cluster's brokers gave way to
// another cluster's) is a move, reported as EventClusterChanged and
// EventStoreReset, never as a heal; and a store that another writer
// moved to a cluster this owner never talked to is a store shared across
// clusters, refused with one clear error instead of being healed back and
// forth.
//
// Changes are reported in store order: the owner enqueues its event while
// it holds the lock its compare-and-swap runs under, and the [Stream]
// delivers events on a goroutine of its own, so a slow observer never
// blocks a writer. Readers of the token (stamping a request) call
// Store().Load directly: the hot path takes no lock and allocates nothing.
package tokens
