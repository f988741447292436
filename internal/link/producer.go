package link

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer is what package factory gives package producer's constructors
// (producer.New, and producer.NewGroupTransactSession within a
// GroupTransact): how the new producer meets the factory's session. The
// session fills it in (internal/session, Session.Producer and
// Session.GroupTransact) and the factory seals it (Seal): producer.New
// refuses a value that is not sealed, so only the factory can make a
// producer.
//
// It is a plain value: the interfaces are the session's own objects (the
// cluster watcher, the marks of INCONSISTENT_METADATA answers), shared by
// every producer of the factory; a nil one turns its concern off.
type Producer struct {
	// Share, when not nil, is where producers of equal settings share one
	// franz-go client: the producer joins the client in it, or puts there
	// the one it makes. Nil: a client of its own.
	Share *Share
	// Clients builds the producer's franz-go clients: the first one (a
	// producer, not a GroupTransactSession, which is given its own) and
	// the ones that take over after a cluster change. Nil: the producer
	// never changes its client.
	Clients ClientMaker
	// Watch tells the producer about cluster changes; nil: it sees none.
	Watch ClusterWatch
	// Clusters names the cluster behind the bootstrap servers: a pinned
	// producer refuses records while it is another than Pin, and a
	// transaction a change cut short names both. Nil: unknown ("").
	Clusters ClusterNames
	// Pin is the only cluster the producer may talk to; "" follows the
	// bootstrap servers.
	Pin string
	// Recheck is how often, at most, a pinned producer that refuses
	// records asks Watch to check the bootstrap servers again (so that it
	// notices the pinned cluster coming back); one second if zero.
	Recheck time.Duration
	// Marks are the clocks of INCONSISTENT_METADATA answers, by which a
	// record's failure is attributed to brokers that stayed behind the
	// token. Nil: none is.
	Marks InconsistentMarks
	// Auth, when not nil, tells when the cluster refuses the producer's
	// credentials or TLS settings (see AuthWatch).
	Auth AuthWatch

	seal
}

// ClientMaker builds the franz-go client of one producer's settings, each
// time anew (after the factory closed, it fails with its ErrClosed).
// Implemented by the session.
type ClientMaker interface {
	NewClient() (*kgo.Client, error)
}

// ClusterNames says which cluster the bootstrap servers name. Implemented
// by the cluster watcher (internal/cluster).
type ClusterNames interface {
	// Cluster returns the cluster id the bootstrap servers name now, ""
	// while unknown.
	Cluster() string
	// ClusterOf returns the cluster they named in generation gen of the
	// ClusterWatch, "" if unknown.
	ClusterOf(gen uint64) string
}

// InconsistentMarks are the clocks of INCONSISTENT_METADATA answers.
// Implemented by *wire.ProduceMarks, which the session feeds from every
// client's connections.
//
// A record that fails after its own partition was answered so while it was
// in flight failed because brokers stayed behind the token, whatever error
// franz-go gave up with; an answer for another partition says nothing
// about it. A record that timed out while any request was answered so may
// have waited on it (its metadata, its producer id) and is reported so
// too.
type InconsistentMarks interface {
	// Clock moves on each INCONSISTENT_METADATA answer. It is the clock
	// itself, not a method reading it: a producer loads it for every
	// record.
	Clock() *atomic.Uint64
	// At returns the clock's value at the last such answer for one
	// partition, 0 for none.
	At(topic string, partition int32) uint64
	// TopicHeldAt returns when a Metadata answer for topic last came back
	// INCONSISTENT_METADATA, the zero time for never.
	TopicHeldAt(topic string) time.Time
}

// ProducerClient is a franz-go producer client as package producer made
// it, which typed producers of any key and value types share: one producer
// id, one set of connections, one buffer. Package producer implements it;
// a Share keeps it.
type ProducerClient interface {
	// Join counts one more producer on the client. It reports false once
	// the last producer on it began to close it: make a new one then.
	Join() bool
}

// Share is where the producers of one factory with equal settings find
// the client they share. The session keeps one per settings key; package
// producer joins a new producer to the client in it, or makes one. It is
// safe for concurrent use; the zero value is empty.
type Share struct {
	// mu guards c; it is taken before the client's own lock (Join calls
	// c.Join under it), never after.
	mu sync.Mutex
	c  ProducerClient
}

// Join returns the client in s, counting one more producer on it, or,
// when s holds none or its last producer began to close it, the one mk
// makes (which counts its first producer itself), kept in s from then on.
func (s *Share) Join(mk func() (ProducerClient, error)) (ProducerClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c != nil && s.c.Join() {
		return s.c, nil
	}
	c, err := mk()
	if err != nil {
		return nil, err
	}
	s.c = c
	return c, nil
}

// Forget empties s if it holds c, whose last producer began to close it.
func (s *Share) Forget(c ProducerClient) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.c == c {
		s.c = nil
	}
}
