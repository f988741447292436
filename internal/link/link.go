// Package link is the contract between the factory's session
// (internal/session), which follows a cluster for every client a factory
// made, and the public client packages (producer, consumer, admin), which
// are thin typed facades over franz-go clients. It holds only small
// interfaces and plain values, as database/sql/driver does: the session
// implements them, the clients call them. The values the public
// constructors take (Admin, Consumer, Producer, GroupTransact) are sealed
// by the factory (Seal), and the constructors refuse any other.
package link

import (
	"context"
	"sync/atomic"
)

// ClusterWatch tells a client when the cluster behind its bootstrap servers
// changed.
type ClusterWatch interface {
	// Generation counts the cluster changes seen so far.
	Generation() uint64
	// Settle waits for cluster checks in flight and returns the
	// generation then.
	Settle(ctx context.Context) uint64
	// Check starts a check of which cluster the bootstrap servers name
	// (Settle waits for it); rebootstrapped is false when no rebootstrap
	// prompted it.
	Check(rebootstrapped bool)
	ChangeWatch
}

// ChangeWatch tells when the cluster behind the bootstrap servers changed.
type ChangeWatch interface {
	// OnChange calls fn after each cluster change, until cancel.
	OnChange(fn func()) (cancel func())
}

// AuthWatch reports authentication and TLS failures, for clients whose
// security settings are the factory's own.
//
// franz-go retries a connection that fails SASL or certificate checks as it
// would a broker that is down, so records wait until their delivery timeout
// and polls for their whole context, the cause only in the logs. The Java
// clients fail at once with SaslAuthenticationException or
// SslAuthenticationException; with an AuthWatch, producers fail records and
// consumers' polls return with the cause as soon as it is found, and at once
// while it holds. The watch checks again now and then, and clients work
// again once the cluster accepts them.
type AuthWatch interface {
	// AuthFailure returns the failure that holds now, or nil. It is called
	// for every record and poll and must be cheap when nil.
	AuthFailure() error
	// OnAuthFailure calls fn each time a failure is found, until cancel;
	// fn must not block.
	OnAuthFailure(fn func(error)) (cancel func())
	// Failing returns a flag that is set whenever a failure holds (and
	// may be set when none does): a producer reads it for every record
	// and calls AuthFailure only when it is set, an atomic load instead
	// of an interface call. The flag is set before the subscribers of
	// OnAuthFailure are called.
	Failing() *atomic.Bool
}
