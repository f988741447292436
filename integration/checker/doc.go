// Package checker checks that clients read their writes and read
// monotonically, on a local cluster whose brokers apply metadata late
// (GitHub issue #8), or on a real Kafka cluster (issue #19).
//
// [Run] starts a 3-broker [localcluster] with a random apply lag per broker
// (redrawn during the run with SetLag, with short PauseApply/ResumeApply
// pauses), whose brokers implement KIP-1243 or, with [Config].Kafka44,
// behave like Apache Kafka 4.4 (no header tokens: the factory emulates
// them from KRaft offsets). With [Config].Addrs it uses an existing
// cluster instead, such as three real Kafka 4.4 nodes started by
// integration/kafkatest, without chaos: real brokers lag by themselves.
// It runs a seeded workload from several goroutines sharing
// several clients: admin writes (create and delete topics, create
// partitions, alter a topic config), admin reads (ListTopics,
// DescribeTopicConfigs, ListEndOffsets), produces (the producer must know
// the topic) and one group consumer. In [ModeFactory] every client comes
// from one kconsist factory; in [ModePlain] they are plain kgo/kadm clients
// with the same franz-go options. It records a [History] and [Check]s it.
//
// The model. Topic names are never reused, and the workload never runs two
// writes to one topic at once, so each topic has a linear write history:
// version 0 is "absent", version k the state after its k-th successful
// write. A read's [View] of a topic (absent; present with n partitions or
// config value v; absent or at most n partitions) matches a set of versions.
// Writes of different topics commute, so a read's observation of the whole
// cluster is the vector of its per-topic versions.
//
//   - Read-your-writes: with lo the number of writes to the topic that
//     completed before the read started (real time, any client) and hi the
//     number that started before it ended, the view matches a version in
//     [lo, hi]. A match only below lo is a stale read. A ListEndOffsets
//     after an acknowledged produce lists an end offset past it.
//   - Monotonic reads: for two reads of one client, the second starting
//     after the first ended, the newest version the second can show is not
//     older than the oldest version the first can show.
//   - No loss, no duplication: every acknowledged produce to a topic the
//     group consumer subscribes to is consumed exactly once, at its
//     acknowledged offset, after a drain.
//   - Well-formed: no view of a version that no write made or that was
//     written after the read ended, no overlapping writes to one topic, no
//     consumed record nobody produced.
//
// A write without an answer (timeout) may or may not have happened: views
// of its topic from its start on are counted as unjudged, not judged.
// Every [Violation] carries the shortest excerpt that shows it (the missed
// write and the read; or the write, the first read and the second read for
// monotonic reads) and the history carries the seed to replay it with the
// command in integration/cmd/checker. The seed fixes the operation plan,
// the chaos schedule and every random choice; thread scheduling still
// varies between runs.
package checker
