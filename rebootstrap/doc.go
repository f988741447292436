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
//
// The watcher's probes back off exponentially with jitter while they fail,
// and each distinct failure is logged once. A probe refused for its
// credentials or TLS settings ([IsAuthFailure]) is not retried: the
// failure is kept ([Watcher.AuthFailure]), subscribers are told (the
// factory's producers and consumers then fail records and polls with it),
// and no probe is made for a quiet period that doubles, up to 30s, while
// the failure persists.
package rebootstrap
