// Package bridge is how package factory builds consumers and admin clients
// without those packages exporting constructors that would let users make
// a client without the factory's guarantee. (Producers no longer go
// through it: producer.New takes a link.Producer, which only this module
// can name.)
//
// The follow description (ConsumerFollow) is made by the factory's session
// (internal/session), which owns the cluster watcher and builds the
// franz-go clients it swaps in; the factory hands it, with the typed value
// it allocated, to the hooks below.
//
// Each of consumer and admin sets its hooks below in an init function;
// factory imports them, so the hooks are set before any factory code runs.
// Generic types cannot be built through a function variable, so the
// factory allocates the zero value (new(consumer.Consumer[K, V])) and
// passes it as dst with the deserializers as any; the owning package fills
// it in, asserting the types it knows.
package bridge

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// Hooks set by package consumer.
var (
	// InitConsumer makes dst, a new *consumer.Consumer[K, V], a consumer on
	// cl decoding with keys (a consumer.Deserializer[K]) and values (a
	// consumer.Deserializer[V]); group says whether it consumes in a group.
	// It follows cluster changes as f says.
	InitConsumer func(dst any, cl *kgo.Client, keys, values any, group bool, f ConsumerFollow)
)

// Hooks set by package admin.
var (
	// InitAdmin makes dst, a new *admin.Client, an admin client on cl.
	InitAdmin func(dst any, cl *kgo.Client)
)

// ClusterWatch is link.ClusterWatch.
type ClusterWatch = link.ClusterWatch

// ChangeWatch is link.ChangeWatch.
type ChangeWatch = link.ChangeWatch

// AuthWatch is link.AuthWatch.
type AuthWatch = link.AuthWatch

// ConsumerFollow configures how a consumer reacts to a cluster change.
type ConsumerFollow struct {
	Watch ChangeWatch
	// Pinned consumers stop: Poll returns Changed() from then on.
	Pinned  bool
	Changed func() error
	// NewClient makes the client that takes over after a change: franz-go
	// stops consuming a topic whose id changed, and offsets of one cluster
	// mean nothing in another, so a consumer that follows starts afresh:
	// in a group where auto.offset.reset says, and assigned partitions at
	// the offsets first given to Assign.
	NewClient func() (*kgo.Client, error)
	// Auth, when not nil, tells when the cluster refuses the consumer's
	// credentials or TLS settings: polls then return the cause instead of
	// waiting for their context.
	Auth AuthWatch
}
