// Package rebootstrap holds the settings and errors of KIP-1242 misroute
// protection that users of a kconsist factory see: the Java client's
// metadata.recovery.strategy ([Strategy], [ParseStrategy]) and the error a
// client pinned to a cluster reports when the bootstrap servers name
// another one ([ErrClusterChanged], [ClusterChangedError]).
//
// A factory (see factory.RecoveryStrategy, factory.ClusterCheck,
// factory.PinCluster and factory.Resolver) applies them to franz-go:
//
//   - Strategy Rebootstrap with the cluster check on (the default): the
//     check is sent (ApiVersions v5 names the cluster and node the client
//     expects), and a rebootstrap re-resolves bootstrap.servers: host names
//     are handed back to the client unresolved and resolved again on every
//     dial, so a moved DNS name is followed.
//   - Cluster check off: ApiVersions is capped at v4, so it carries neither
//     ClusterId nor NodeId and no broker can detect a misroute.
//   - Strategy None: no check (as the KIP says) and no rebootstrap,
//     including the KIP-1102 metadata-level one.
//
// After a rebootstrap the factory asks the bootstrap servers for their
// cluster id. If it changed, the consistency store is reset to Unknown,
// since offsets of one metadata log mean nothing in another, and the change
// is reported (factory.EventClusterChanged). A factory pinned to a cluster
// does not follow: its records fail with an error that satisfies
// errors.Is(err, ErrClusterChanged).
package rebootstrap
