// Package bridge is how package factory builds producers without package
// producer exporting constructors that would let users make a client
// without the factory's guarantee. (Consumers and admin clients are made by
// consumer.New and admin.New, whose first parameter is of a type of
// internal/link, which code outside this module cannot name.)
//
// The follow description (ProducerFollow) is made by the
// factory's session (internal/session), which owns the cluster watcher
// and builds the franz-go clients they swap in; the factory hands them,
// with the typed value it allocated, to the hooks below.
//
// Package producer sets its hooks below in an init
// function; factory imports them, so the hooks are set before any factory
// code runs. Generic types cannot be built through a function variable, so
// the factory allocates the zero value (new(producer.Producer[K, V])) and
// passes it as dst with the serializers as any; the owning package fills it
// in, asserting the types it knows.
package bridge

import (
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// Hooks set by package producer.
var (
	// NewProducerClient makes cl a producer client that follows cluster
	// changes as f says; typed producers are attached to it with Attach.
	NewProducerClient func(cl *kgo.Client, f ProducerFollow) ProducerClient
	// InitGroupTransactSession makes dst, a new
	// *producer.GroupTransactSession[K, V], a session on s producing with
	// keys (a producer.Serializer[K]) and values (a producer.Serializer[V]).
	// f's Watch and Cluster tell it about cluster changes (it never follows
	// one); Auth and the INCONSISTENT_METADATA clocks work as for a producer.
	InitGroupTransactSession func(dst any, s *kgo.GroupTransactSession, keys, values any, f ProducerFollow)
)

// ProducerClient is a franz-go producer client that typed producers of any
// key and value types share: one producer id, one set of connections, one
// buffer.
type ProducerClient interface {
	// Attach makes dst, a new *producer.Producer[K, V], a producer on this
	// client with keys (a producer.Serializer[K]) and values (a
	// producer.Serializer[V]). It reports false, leaving dst alone, once the
	// last producer attached began to close the client: make a new one
	// then.
	Attach(dst, keys, values any) bool
}

// ClusterWatch is link.ClusterWatch.
type ClusterWatch = link.ClusterWatch

// ChangeWatch is link.ChangeWatch.
type ChangeWatch = link.ChangeWatch

// AuthWatch is link.AuthWatch.
type AuthWatch = link.AuthWatch

// ProducerFollow configures how a producer reacts to cluster changes.
type ProducerFollow struct {
	Watch ClusterWatch
	// Pinned producers fail records with Changed() instead of following.
	Pinned  bool
	Changed func() error
	// Refuse, for a pinned producer, returns the error to fail records
	// with while the bootstrap servers name another cluster than the
	// pinned one, and nil while they name the pinned one. It is asked
	// after each cluster change: from then on, records fail at once
	// instead of waiting in a client that cannot deliver them. Nil: a
	// pinned producer fails only the records its client gives back.
	Refuse func() error
	// Recheck is how often, at most, a producer refusing records asks
	// Watch to check the bootstrap servers again (so that it notices
	// the pinned cluster coming back); 1s if zero.
	Recheck time.Duration
	// NewClient makes the client that takes over after a change.
	NewClient func() (*kgo.Client, error)
	// Inconsistent and InconsistentOn tell which failures brokers behind
	// the token caused. Inconsistent is a clock that moves on each
	// INCONSISTENT_METADATA answer; InconsistentOn is the clock's value at
	// the last such answer for one partition (0 for none). A record that
	// fails after its own partition was answered so while the record was
	// in flight failed because brokers stayed behind the token, whatever
	// error franz-go gave up with; an answer for another partition says
	// nothing about it. A record that timed out (ErrRecordTimeout) while
	// any request was answered so may have waited on it (its metadata,
	// its producer id) and is reported so too. Either may be nil: no
	// failure is then attributed. (Inconsistent is the clock itself, not
	// a function: a producer reads it for every record.)
	Inconsistent *atomic.Uint64
	// TopicHeldAt returns when a Metadata answer for the topic last came
	// back INCONSISTENT_METADATA (zero for never): a record that timed out
	// while its topic's metadata was held back never had a partition to
	// go to. May be nil.
	TopicHeldAt    func(topic string) time.Time
	InconsistentOn func(topic string, partition int32) uint64
	// Auth, when not nil, tells when the cluster refuses the producer's
	// credentials or TLS settings: records then fail with the cause
	// instead of waiting for their delivery timeout.
	Auth AuthWatch
	// Cluster, when not nil, returns the cluster the bootstrap servers
	// name now: a transaction that a cluster change cut short reports the
	// cluster it began on and this one.
	Cluster func() string
	// ClusterOf, when not nil, returns the cluster the bootstrap servers
	// named in a generation of Watch ("" if unknown): a transaction that
	// began before the cluster id was learnt reports the cluster it began
	// on with it.
	ClusterOf func(gen uint64) string
	// Released, when not nil, is called once, when the last producer
	// attached to a shared client begins to close it: from then on Attach
	// refuses it, and the session forgets it.
	Released func()
}
