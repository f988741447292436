package link

import "github.com/twmb/franz-go/pkg/kgo"

// Consumer is what a consumer is made of: the argument of consumer.New,
// which factory.NewConsumer fills from what the session returns
// (session.Session.Consumer) and seals (Seal): consumer.New refuses a
// value that is not sealed, so only the factory can make a consumer.
//
// Who owns what: the consumer owns Client and every client Follow gives it,
// and closes them; the session owns the cluster watcher behind Follow and
// Auth, and only answers.
type Consumer struct {
	// Client is the consumer's first franz-go client, its topics or
	// group already set.
	Client *kgo.Client
	// Group says the client consumes in a group: Commit works, Assign
	// does not.
	Group bool
	// Follow tells the consumer about cluster changes and gives it what
	// comes after one. Nil: the consumer keeps its client for good.
	Follow Follower
	// Auth, when not nil, tells when the cluster refuses the consumer's
	// credentials or TLS settings: polls then return the cause instead of
	// waiting for their context.
	Auth AuthWatch

	seal
}

// Follower is how a client follows the cluster behind its bootstrap
// servers. The session implements it, once per client, from the
// description the client was built from.
type Follower interface {
	// OnChange calls fn after each cluster change, until cancel; fn calls
	// Follow.
	ChangeWatch
	// Follow returns the client that takes over after a cluster change,
	// built as the first was, on the cluster the bootstrap servers name
	// now: franz-go stops consuming a topic whose id changed, and offsets
	// of one cluster mean nothing in another, so the new client starts
	// afresh (in a group where auto.offset.reset says; assigned
	// partitions, which the caller adds again, at the offsets first
	// given). When there is none to go on with, it returns the error the
	// client's work fails with from then on: a
	// *rebootstrap.ClusterChangedError for a client pinned to the cluster
	// it began on, or why the next client could not be built (the
	// factory was closed).
	Follow() (*kgo.Client, error)
}
