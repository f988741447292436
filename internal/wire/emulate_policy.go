package wire

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Emulator's policy: which requests it holds, which answers teach the
// store what, and for how long. The mechanism (the wait loop, the
// questions, healing) reads these and decides nothing of its own.

// Request keys the connection code branches on.
const (
	produceKey          = int16(kmsg.Produce)
	fetchKey            = int16(kmsg.Fetch)
	metadataKey         = int16(kmsg.Metadata)
	controlledShutV0    = int16(kmsg.ControlledShutdown)
	saslHandshakeKey    = int16(kmsg.SASLHandshake)
	apiVersionsKey      = int16(kmsg.ApiVersions)
	saslAuthenticateKey = int16(kmsg.SASLAuthenticate)
)

// neverHeld reports whether a request of key goes out without waiting for
// its broker to catch up: the connection handshake, which has to come
// first whatever the broker applied.
func neverHeld(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.ApiVersions, kmsg.SASLHandshake, kmsg.SASLAuthenticate:
		return true
	}
	return false
}

// isData reports whether a request of key is sent anyway once its wait
// ends (see Emulator.waitFor), and waits at most dataMaxWait.
func isData(key int16) bool {
	return key == produceKey || key == fetchKey
}

// writesMetadata reports whether a request of key changes the cluster
// metadata that reads serve, so that its answer must teach the store the
// committed offset: topics and partitions every client routes by
// (CreateTopics, DeleteTopics, CreatePartitions); configs DescribeConfigs
// reads back (AlterConfigs, IncrementalAlterConfigs); what DescribeAcls
// reads and the broker authorizes (CreateAcls, DeleteAcls); replicas and
// leaders in Metadata (AlterPartitionAssignments, ElectLeaders); what their
// Describe calls read back (AlterClientQuotas, AlterUserSCRAMCredentials,
// UpdateFeatures).
//
// Group offsets and records live in data logs, not the metadata log, and
// are not in the list.
func writesMetadata(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.CreatePartitions,
		kmsg.AlterConfigs, kmsg.IncrementalAlterConfigs,
		kmsg.CreateACLs, kmsg.DeleteACLs,
		kmsg.AlterPartitionAssignments, kmsg.ElectLeaders,
		kmsg.AlterClientQuotas, kmsg.AlterUserSCRAMCredentials, kmsg.UpdateFeatures:
		return true
	}
	return false
}

// readsMetadata reports whether an answer to key shows the broker's
// metadata image, so that a later read must not show an older one.
func readsMetadata(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Metadata, kmsg.DescribeConfigs, kmsg.DescribeACLs,
		kmsg.ListPartitionReassignments, kmsg.DescribeClientQuotas,
		kmsg.DescribeUserSCRAMCredentials, kmsg.DescribeCluster,
		kmsg.DescribeTopicPartitions:
		return true
	}
	return false
}

// clusterCheckVersion is the first ApiVersions version that names the
// cluster and node the client expects (KIP-1242; Apache Kafka 4.4).
const clusterCheckVersion = 5

// Bounds of the Emulator's waits. Each question to the cluster is also
// bounded by EmulationConfig.AskTimeout, but no request or answer waits for
// one longer than its own bound: the question goes on without it.
const (
	// dataMaxWait bounds the hold of a Produce or Fetch, which go out
	// afterwards anyway (see waitFor): a leader that knows the partition
	// serves them correctly, only perhaps under an older config, and a
	// longer hold would only slow every batch while one broker lags.
	dataMaxWait = time.Second
	// writeMargin is left before kgo's write deadline for the write
	// itself.
	writeMargin = 100 * time.Millisecond
	// stallAfter is how long a broker may show no progress at all before
	// a request waiting for it gives up early. A KRaft broker applies a
	// no-op record every 500ms even when idle: one that shows no progress
	// is stuck (fenced, partitioned from the quorum).
	stallAfter = 1500 * time.Millisecond
	// healAfter is how long a request waits for its broker before the
	// token itself is checked against the committed offset.
	healAfter = 250 * time.Millisecond
	// pauseMin and pauseMax bound the pause between two questions to a
	// broker a request waits for; it doubles from one to the other.
	pauseMin = time.Millisecond
	pauseMax = 50 * time.Millisecond
	// verifyEvery rate-limits the DescribeQuorum that verifies the cluster
	// keeps a metadata log, while it has not answered.
	verifyEvery = time.Second
	// committedRetryMin and committedRetryMax bound the pause before the
	// committed offset is asked again after a failed answer (a broker
	// that crashed, a quorum without a leader); it doubles from one to
	// the other, within the question's AskTimeout.
	committedRetryMin = 20 * time.Millisecond
	committedRetryMax = 500 * time.Millisecond
	// stopEvery is how often a wait looks whether its connection died or
	// its write deadline moved (kgo moves it to cancel a write).
	stopEvery = 50 * time.Millisecond
)
