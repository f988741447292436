// Package localcluster runs a local Kafka cluster that implements the server
// side of KIP-1243 (consistency tokens), for tests, benchmarks and examples.
// No released broker implements KIP-1243; this one reproduces what it fixes.
//
// A [Cluster] is kfake brokers doing the data plane, with a gateway in front
// of each on its own loopback port. Clients only ever learn gateway
// addresses: Metadata, DescribeCluster, FindCoordinator and the leader hints
// of Produce and Fetch are rewritten. Behind the gateways is a metadata log
// ([Cluster.MetadataLog]) whose records use the KRaft formats of KIP-746
// ([TopicRecord], [PartitionRecord], [ConfigRecord], [RemoveTopicRecord],
// [PartitionChangeRecord]) after a [ClusterIDRecord] at offset 0. Log offsets
// are the consistency tokens.
//
// The rules, one file each:
//
//   - api_mutations.go: CreateTopics, DeleteTopics, CreatePartitions,
//     AlterConfigs and IncrementalAlterConfigs that succeed are committed to
//     the log, and answered once the answering broker has applied the
//     commit, with that broker's applied offset in the header; if it has
//     not within [WaitMax] and the request's own timeout, each resource is
//     answered REQUEST_TIMED_OUT. [WriteAnswers](WritesAtCommit) answers at
//     commit with the commit offset instead (a broker whose tokens go
//     back down), as Native(false) does with no token;
//     [WriteAnswers](WritesAtCommitOwnOffset) at commit with the answering
//     broker's own offset, which may be below the write (what the KIP's
//     text allows, and a token that does not cover the write). A created topic is
//     answered, as by Kafka,
//     with all its configs and their sources (kfake: only those set, with
//     no source, or null).
//   - broker.go: each broker applies the log after its lag ([Lag],
//     [BrokerLag], [Cluster.SetLag]), whole batches at a time, unless
//     paused ([Cluster.PauseApply]).
//   - api_metadata.go, api_data.go, api_configs.go: a broker serves its own
//     image, as of the offset it applied. A lagging broker omits new topics
//     from Metadata, answers UNKNOWN_TOPIC_OR_PARTITION to Produce, Fetch
//     and ListOffsets for them, keeps showing deleted topics and old config
//     values: the stale reads of real lagging brokers. Answers are
//     completed where kfake's fall short of Kafka's and break clients such
//     as the Java client's Admin: empty (not null) eligible leader replica
//     lists, and config synonyms only when asked for, the entry first.
//   - gateway.go: every flexible response header carries tag 0 =
//     {cluster id, the broker's applied offset when the answer is written},
//     so a broker's tokens never decrease (ApiVersions, whose response
//     header is v0, goes to kfake, which performs the KIP-1242 check of
//     its body; tag 0 of its v3+ header is judged as any request's: a
//     token ahead is held, then answered INCONSISTENT_METADATA in its
//     ErrorCode, and another cluster's id is answered
//     REBOOTSTRAP_REQUIRED). A request whose header token is above the broker's
//     applied offset is held for it, at most [WaitMax] or the request's own
//     timeout if shorter; in [ErrorMode], or when the wait runs out, it is
//     answered INCONSISTENT_METADATA ([InconsistentMetadataCode], see
//     inconsistent.go, header token per [InconsistentTokenIs]), or its
//     connection is closed where the answer has no error field (an
//     all-topics Metadata before v13), no answer is sent (acks=0), or
//     [BehindAnswer](BehindClose) says so. Nothing is executed or served
//     from metadata older than the request's token. A request whose header
//     names another cluster closes the connection, and so does idleness
//     ([IdleTimeout]).
//   - api_versions.go: ApiVersions v3+ answers carry, as on a KRaft broker,
//     FinalizedFeaturesEpoch = the broker's applied offset and a finalized
//     metadata.version, and advertise DescribeQuorum. Error answers and
//     older versions pass untouched. [FeaturesEpoch](false) leaves the
//     epoch and finalized features out.
//   - api_quorum.go: DescribeQuorum of __cluster_metadata-0 is answered by
//     the gateway (kfake has no quorum): every broker is a caught-up voter,
//     node 0 leads, HighWatermark is the log end + 1. A mutation is
//     committed before it is answered, so a DescribeQuorum sent after the
//     answer sees a high watermark above it. Other partitions get
//     UNKNOWN_TOPIC_OR_PARTITION; with [DescribeQuorumAllowed](false),
//     every request gets CLUSTER_AUTHORIZATION_FAILED.
//   - native.go: with [Native](false) brokers behave like Apache Kafka 4.4:
//     no tag 0 in response headers, and a request's tag 0 is skipped (no
//     wait, no INCONSISTENT_METADATA, no cluster id check). Lag, stale
//     reads, ApiVersions and DescribeQuorum are unchanged, so clients can
//     emulate tokens from those two offsets.
//   - unsupported.go: a request for an API or version kfake does not
//     serve (kfake would close the connection) is answered
//     UNSUPPORTED_VERSION in the API's error fields.
//   - sidedoor.go: the gateways (and the cluster's own control client)
//     reach kfake over in-memory connections; kfake keeps its TCP ports
//     ([Cluster.KfakeAddrs]) for anyone who wants kfake itself.
//
// Clients that send no token (plain kgo) work unchanged and see the stale
// reads. [Cluster.Repoint] sends a gateway's new connections to a broker of
// another Cluster, to test misrouted connections (KIP-1242); the other
// cluster's [Stats] count its REBOOTSTRAP_REQUIRED answers.
//
// Limits: topics created behind the gateways (kfake's auto-creation, its
// Control hooks) are unknown to the log and hidden by every broker.
// DescribeTopicPartitions is answered unpaged. A config key set after a
// broker's offset shows its default only once kfake has reported that
// default (it does for every topic created through a gateway).
package localcluster
