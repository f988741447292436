// Package javaclient runs the Apache Kafka Java client (4.4, the
// kafka-clients jar that package kafkatest provisions) against a cluster,
// so tests can show that the local cluster serves more than Go clients.
//
// The client is one small program, JavaClient.java, launched in source-file
// mode (java JavaClient.java), with no build tool of its own. Its "all"
// mode goes through the everyday Admin calls, an idempotent producer and
// consumers in a classic and a KIP-848 group; its "produce" mode produces
// until stdin closes, reporting pauses between acknowledgements. [Command]
// prepares either.
//
// Prerequisites are those of package kafkatest: Java 17+ on PATH, and Maven
// unless KAFKA_HOME is set; without them a test fails with a message naming
// what to install. `go test -short` skips every test that runs the JVM.
package javaclient
