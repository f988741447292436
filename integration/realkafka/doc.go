// Package realkafka tests the kconsist SDK (factory, admin, producer and
// consumer) against real Apache Kafka brokers started by
// integration/kafkatest: 4.4 unless said otherwise; the read-your-writes
// test and the checker run on every release of kafkatest.MatrixVersions
// (KCONSIST_KAFKA_VERSIONS=all for 3.6.2 to 4.4.0; 4.4.0 and 3.6.2
// without it). It holds tests only.
//
//   - TestSingleNodeClusters runs two single-node clusters, A behind a
//     switchable kafkatest.Forwarder and B, and shares them between
//     subtests: Compatibility (stamping on and off: Kafka 4.4 ignores the
//     KIP-1243 request header tag and never returns a token) and KIP1242
//     (a misrouted connection through the factory, with the cluster check
//     on and off).
//   - TestFaults runs three nodes, each advertised at a forwarder: a
//     broker killed with SIGKILL (and every client connection cut ten
//     times) while an idempotent factory producer sends 50,000 records,
//     which must each be in the log exactly once; then a consumer group of
//     two factory consumers through two rebalances, missing no record.
//   - TestMisconfig runs one node with a SASL_SSL listener: records
//     through forced re-authentication (SCRAM-SHA-512, 3s sessions); then a
//     wrong password, an untrusted CA and a certificate for another host,
//     each failing the factory's Produce, Poll and admin calls with the
//     cause within seconds, with the connections reaching the broker
//     counted against plain franz-go's in the same window.
//   - TestReadYourWritesOnKafka makes metadata writes on three nodes and
//     reads each back at once from every broker: the factory's answers must
//     all show the write; plain franz-go's stale ones are counted.
//   - TestWritesThroughLeaderCrash kills the KRaft quorum leader (SIGKILL)
//     and creates topics while it is still listed: every create's token
//     covers the write and every live node lists the topic; a factory and
//     a plain producer's acknowledged records in the 20 s after the kill
//     are logged. On every release of kafkatest.MatrixVersions.
//   - TestCheckerOnKafka runs the read-your-writes and monotonic-reads
//     checker (integration/checker) on three nodes: factory clients (tokens
//     emulated from KRaft offsets) must break no rule; plain kgo's count in
//     the same run is reported.
//   - TestLeastPrivilegeOnKafka: a SCRAM user with ACLs on its own topics
//     and groups only is refused DescribeQuorum; a factory as that user
//     must still read its own metadata writes back from every broker, keep
//     reads monotonic, and say once that it lacks DESCRIBE on CLUSTER
//     (EventConsistencyLimited); plain kgo is the control. On every
//     release of kafkatest.MatrixVersions.
//   - TestAddressSwitchBefore44 switches an address from one Kafka 4.0
//     cluster to another (ApiVersions v4: no KIP-1242 check) under a
//     producing factory: one EventClusterCheckOff says the check is off,
//     and what lands on the other cluster is logged (no acknowledged
//     record lost); Kafka 4.4 as the control puts none there.
//
// Java 17+ (and Maven, unless KAFKA_HOME is set) must be installed; see
// package kafkatest. `go test -short` skips every test here.
package realkafka
