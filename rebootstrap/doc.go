// Package rebootstrap maps the Java client's metadata.recovery.strategy and
// metadata.cluster.check.enable (KIP-1242) onto franz-go, and keeps the
// consistency store honest when a client lands on another cluster.
//
// franz-go itself names the expected cluster and node in ApiVersions v5 and
// rebootstraps when a broker answers REBOOTSTRAP_REQUIRED. This package
// decides when that happens:
//
//   - Strategy Rebootstrap with the cluster check on (the default): the check
//     is sent, and a rebootstrap re-resolves bootstrap.servers (host names
//     are handed back to the client unresolved, and the dialer resolves them
//     again on every dial).
//   - Cluster check off: ApiVersions is capped at v4, so it carries neither
//     ClusterId nor NodeId and no broker can detect a misroute.
//   - Strategy None: no check (as the KIP says) and no rebootstrap, including
//     the KIP-1102 metadata-level one.
//
// After a rebootstrap, [Watcher] asks the cluster for its id. If it changed,
// the consistency store is reset to Unknown, since offsets of one metadata
// log mean nothing in another, and the change is reported.
package rebootstrap
