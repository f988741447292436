// Package cluster keeps track of the cluster a factory's clients talk to:
// the factory's side of KIP-1242 (see package rebootstrap for the settings
// users see).
//
// After a rebootstrap, or anything else that hints at a move, [Watcher]
// asks the bootstrap servers for their cluster id. If it changed, the
// consistency store is reset to Unknown, since offsets of one metadata log
// mean nothing in another, and the change is reported. [Dialer] resolves
// host names again on every dial, so a rebootstrap follows a moved DNS
// name.
//
// The watcher's probes back off exponentially with jitter while they fail,
// and each distinct failure is logged once. A probe refused for its
// credentials or TLS settings ([IsAuthFailure]) is not retried: the
// failure is kept ([Watcher.AuthFailure]), subscribers are told (the
// factory's producers and consumers then fail records and polls with it),
// and no probe is made for a quiet period that doubles, up to 30s, while
// the failure persists.
package cluster
