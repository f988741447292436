// Package integration holds the cross-cutting tests of kconsist: the
// read-your-writes guarantee on a local KIP-1243 cluster with lagging
// brokers, against plain franz-go on the same cluster. Its subpackages are
// the test clusters (localcluster, kafkatest) and the tools built on them.
package integration
