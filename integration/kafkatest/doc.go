// Package kafkatest runs real Apache Kafka brokers for tests: 4.4.0 by
// default, or any release of [Versions] (3.6.2, 3.9.1, 4.0.0, 4.1.0, 4.2.0,
// 4.4.0, all in KRaft mode) with [Version]. Tests meant for several
// releases run on [MatrixVersions]: $KCONSIST_KAFKA_VERSIONS (a
// comma-separated list, or "all"), else 4.4.0 and 3.6.2.
//
// kconsist has to work against the broker its users run, not only against
// kfake. This package provisions Kafka from Maven Central with Maven (or uses
// KAFKA_HOME), formats KRaft storage and starts nodes as child JVMs that
// listen on loopback only. Three things are worth knowing first:
//
//   - [Start] returns a [Cluster]: one combined broker+controller node by
//     default, or [Nodes](3) for three combined nodes (a three-voter quorum
//     on which replication factor 3 works). Every process is ended by pid in
//     t.Cleanup, and broker logs are printed (tail) when the test failed.
//     [StartCluster] does the same for programs that are not tests; they
//     end it with [Cluster.Close].
//
//   - [Forwarder] is a switchable loopback TCP forwarder. Pointing a broker's
//     advertised address at it ([AdvertisedAddr]) and switching it to another
//     cluster reproduces a misrouted connection (KIP-1242) on demand. It
//     forwards whole frames and can show each [Frame] to an observer, with
//     decoders for the ApiVersions exchange that KIP-1242 changed.
//
//   - [SASLSSL] adds a SASL_SSL client listener (SCRAM-SHA-512,
//     SCRAM-SHA-256 and PLAIN; [ReauthInterval] for KIP-368 sessions) with
//     a PEM keystore signed by a CA made at Start: [Cluster.TLSConfig] and
//     [Cluster.CAFile] trust it, [Cluster.SecureAddrs] name the host its
//     certificate is for. [NewStreamForwarder] carries such TLS traffic
//     and counts the connections made through it.
//
//   - [Authorizer] turns ACLs on (KRaft's StandardAuthorizer; what no ACL
//     allows is refused), so that SASLSSL's users can be given least
//     privilege. The plaintext listeners' principal, User:ANONYMOUS, stays
//     a super user: the cluster runs, and [Cluster.Grant] creates ACLs
//     through them, returning once every node applies them.
//
//   - [KIP1243] starts every node with the KIP-1243 Java agent
//     (kip1243agent/, built with Maven at test time and cached): the
//     brokers stamp tag 0 on every flexible response header and hold or
//     answer INCONSISTENT_METADATA to requests whose token is ahead.
//     Start fails ([ErrAgent]) if the agent did not attach. See KIP1243.md.
//
// [CountRecords] (and [Cluster.CountRecords]) counts what a topic holds in
// one cluster, to prove that no record went to the wrong one.
//
// Each node has three listeners: EXTERNAL for clients (its advertised address
// can be replaced), INTERNAL for replication and CONTROLLER for the quorum, so
// redirecting client traffic never disturbs the cluster itself; SASLSSL adds
// a fourth, SECURE, for clients.
//
// Java 17+ must be on PATH, and Maven too unless KAFKA_HOME points at an
// unpacked Kafka 4.4 distribution. Without them tests fail with a message
// naming what to install. `go test -short ./...` skips every test that starts
// a real cluster.
//
// The download is cached outside the repository, in $KCONSIST_KAFKA_CACHE
// (other releases than 4.4.0 in its subdirectory kafka-<version>) or else in
// the user cache directory (kconsist/kafka-<version>), and shared by
// parallel test binaries through a file lock and an atomic rename. Next to it
// a class data sharing archive, made once by a broker that starts and stops,
// saves about 40% of the CPU each later broker start costs.
package kafkatest
