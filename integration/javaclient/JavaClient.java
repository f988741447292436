import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.DescribeConfigsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Drives the Apache Kafka Java client against a cluster, for the local
 * cluster's compatibility test (javaclient_test.go).
 *
 * <pre>
 * java -cp KAFKA_CLASSPATH JavaClient.java all BOOTSTRAP
 * java -cp KAFKA_CLASSPATH JavaClient.java produce BOOTSTRAP TOPIC
 * </pre>
 *
 * "all" runs every Admin call the test covers, an idempotent producer and
 * consumers in a classic and a KIP-848 group, printing "ok NAME DETAIL" per
 * step and "PASS" at the end; the first failure ends it with a stack trace
 * and exit status 1. The cluster's brokers may lag in applying metadata, so
 * a read that follows a change is retried until it sees the change, as any
 * application must do on Kafka; the retries are counted and printed.
 *
 * "produce" sends one record every 10 ms until stdin closes, printing
 * "acked N" as acknowledgements arrive and "gap MS" for each pause of more
 * than 250 ms between acknowledgements (a misrouted broker and the
 * client's rebootstrap show as one).
 */
public class JavaClient {
    static final Duration TIMEOUT = Duration.ofSeconds(60);
    static int staleReads;

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: JavaClient all BOOTSTRAP | produce BOOTSTRAP TOPIC");
            System.exit(2);
        }
        try {
            switch (args[0]) {
                case "all" -> all(args[1]);
                case "produce" -> produce(args[1], args[2]);
                default -> throw new IllegalArgumentException("unknown mode " + args[0]);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            System.out.println("FAIL " + t);
            System.exit(1);
        }
        System.exit(0); // the clients' threads are closed; do not wait for the JVM's own
    }

    static void ok(String step, Object detail) {
        System.out.println("ok " + step + " " + detail);
    }

    /** Retries call while it fails with a retriable error or returns null. */
    static <T> T eventually(String what, Callable<T> call) throws Exception {
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        for (;;) {
            Throwable last;
            try {
                T v = call.call();
                if (v != null) {
                    return v;
                }
                last = null;
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof RetriableException)) {
                    throw e;
                }
                last = e.getCause();
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(what + ": not seen within " + TIMEOUT + (last == null ? "" : ": " + last));
            }
            staleReads++;
            Thread.sleep(50);
        }
    }

    static void check(boolean cond, String what) {
        if (!cond) {
            throw new AssertionError(what);
        }
    }

    static Properties common(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        return p;
    }

    static void all(String bootstrap) throws Exception {
        String plain = "java-plain", configured = "java-configured";
        try (Admin admin = Admin.create(common(bootstrap, "java-admin"))) {
            DescribeClusterResult dc = admin.describeCluster();
            String clusterId = dc.clusterId().get();
            int nodes = dc.nodes().get().size();
            check(nodes > 0, "describeCluster: no nodes");
            ok("describeCluster", "id=" + clusterId + " nodes=" + nodes + " controller=" + dc.controller().get().id());

            // Without configs the answer's config list must still be a list.
            var created = admin.createTopics(List.of(new NewTopic(plain, 3, (short) 1)));
            created.all().get();
            check(created.numPartitions(plain).get() == 3, "createTopics: partitions of " + plain);
            ok("createTopics", plain + " configs=" + created.config(plain).get().entries().size());
            var withConfigs = new NewTopic(configured, 2, (short) 1)
                    .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "compact"));
            created = admin.createTopics(List.of(withConfigs));
            created.all().get();
            ConfigEntry retention = created.config(configured).get().get("retention.ms");
            check(retention != null && "3600000".equals(retention.value()), "createTopics: retention.ms " + retention);
            check(retention.source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "createTopics: source " + retention.source());
            ok("createTopics", configured + " retention.ms=" + retention.value() + " source=" + retention.source());

            Map<String, TopicDescription> described = eventually("describeTopics",
                    () -> admin.describeTopics(List.of(plain, configured)).allTopicNames().get());
            check(described.get(plain).partitions().size() == 3, "describeTopics: " + described.get(plain));
            check(described.get(configured).partitions().size() == 2, "describeTopics: " + described.get(configured));
            var p0 = described.get(plain).partitions().get(0);
            check(p0.leader() != null && !p0.isr().isEmpty(), "describeTopics: partition 0 " + p0);
            ok("describeTopics", plain + " " + described.get(plain).partitions().size() + " partitions, leader of 0=" + p0.leader().id()
                    + " elr=" + p0.elr() + " lastKnownElr=" + p0.lastKnownElr());

            var topicRes = new ConfigResource(ConfigResource.Type.TOPIC, configured);
            // The first node, whatever the cluster numbers its nodes from.
            String firstNode = String.valueOf(dc.nodes().get().stream().mapToInt(n -> n.id()).min().getAsInt());
            var brokerRes = new ConfigResource(ConfigResource.Type.BROKER, firstNode);
            Map<ConfigResource, Config> configs = eventually("describeConfigs", () -> admin.describeConfigs(List.of(topicRes, brokerRes),
                    new DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all().get());
            ConfigEntry policy = configs.get(topicRes).get("cleanup.policy");
            check(policy != null && "compact".equals(policy.value()), "describeConfigs: cleanup.policy " + policy);
            // Kafka lists the entry itself first, then what it overrides.
            var synonyms = policy.synonyms();
            check(synonyms.size() >= 2 && synonyms.get(0).source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG,
                    "describeConfigs: cleanup.policy synonyms " + synonyms);
            ok("describeConfigs", configured + " " + configs.get(topicRes).entries().size() + " entries, cleanup.policy=" + policy.value()
                    + " synonyms=" + policy.synonyms().size() + "; broker 0 " + configs.get(brokerRes).entries().size() + " entries");

            var plainRes = new ConfigResource(ConfigResource.Type.TOPIC, plain);
            Map<ConfigResource, Collection<AlterConfigOp>> ops = Map.of(
                    plainRes, List.of(new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET)),
                    topicRes, List.of(new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)));
            admin.incrementalAlterConfigs(ops).all().get();
            ConfigEntry altered = eventually("incrementalAlterConfigs visible", () -> {
                ConfigEntry e = admin.describeConfigs(List.of(plainRes)).all().get().get(plainRes).get("retention.ms");
                return e != null && "7200000".equals(e.value()) ? e : null;
            });
            ConfigEntry reset = eventually("incrementalAlterConfigs DELETE visible", () -> {
                ConfigEntry e = admin.describeConfigs(List.of(topicRes)).all().get().get(topicRes).get("cleanup.policy");
                return e != null && e.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG ? e : null;
            });
            ok("incrementalAlterConfigs", plain + " retention.ms=" + altered.value() + "; " + configured + " cleanup.policy=" + reset.value()
                    + " source=" + reset.source());

            admin.createPartitions(Map.of(configured, NewPartitions.increaseTo(3))).all().get();
            int grown = eventually("createPartitions visible", () -> {
                int n = admin.describeTopics(List.of(configured)).allTopicNames().get().get(configured).partitions().size();
                return n == 3 ? n : null;
            });
            ok("createPartitions", configured + " partitions=" + grown);

            int records = 1000;
            produceAll(bootstrap, plain, records);
            ok("produce", records + " records, idempotent");

            Map<TopicPartition, OffsetSpec> latest = new HashMap<>(), earliest = new HashMap<>();
            for (int p = 0; p < 3; p++) {
                latest.put(new TopicPartition(plain, p), OffsetSpec.latest());
                earliest.put(new TopicPartition(plain, p), OffsetSpec.earliest());
            }
            long end = sumOffsets(admin.listOffsets(latest).all().get());
            long start = sumOffsets(admin.listOffsets(earliest).all().get());
            check(end == records && start == 0, "listOffsets: earliest " + start + ", latest " + end);
            ok("listOffsets", plain + " earliest=" + start + " latest=" + end);

            for (String protocol : List.of("classic", "consumer")) {
                String group = "java-" + protocol;
                int n = consumeAll(bootstrap, plain, group, protocol, records);
                Map<TopicPartition, OffsetAndMetadata> committed = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
                long sum = 0;
                for (var o : committed.values()) {
                    sum += o.offset();
                }
                check(sum == records, "listConsumerGroupOffsets " + group + ": " + committed);
                ok("consume", n + " records in group " + group + " (group.protocol=" + protocol + "), committed " + sum);
            }
            var groups = admin.describeConsumerGroups(List.of("java-classic", "java-consumer")).all().get();
            check(groups.get("java-consumer").type() == GroupType.CONSUMER, "describeConsumerGroups: " + groups.get("java-consumer"));
            ok("describeConsumerGroups", "java-classic " + groups.get("java-classic").groupState() + " " + groups.get("java-classic").type()
                    + "; java-consumer " + groups.get("java-consumer").groupState() + " " + groups.get("java-consumer").type());
            ok("listGroups", admin.listGroups().all().get().size() + " groups");

            var features = admin.describeFeatures().featureMetadata().get();
            check(features.finalizedFeatures().containsKey("metadata.version"), "describeFeatures: " + features);
            ok("describeFeatures", "metadata.version=" + features.finalizedFeatures().get("metadata.version").maxVersionLevel()
                    + " epoch=" + features.finalizedFeaturesEpoch().orElse(-1L));
            var quorum = admin.describeMetadataQuorum().quorumInfo().get();
            ok("describeMetadataQuorum", "leader=" + quorum.leaderId() + " voters=" + quorum.voters().size()
                    + " highWatermark=" + quorum.highWatermark());

            admin.deleteTopics(List.of(plain, configured)).all().get();
            Set<String> left = eventually("deleteTopics visible", () -> {
                Set<String> names = admin.listTopics().names().get();
                return names.contains(plain) || names.contains(configured) ? null : names;
            });
            ok("deleteTopics", plain + ", " + configured + "; topics left " + left.size());

            dc = admin.describeCluster();
            check(clusterId.equals(dc.clusterId().get()), "describeCluster: cluster id changed");
            ok("describeCluster", "nodes=" + dc.nodes().get().size());
        }
        System.out.println("stale reads retried " + staleReads);
        System.out.println("PASS");
    }

    static long sumOffsets(Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> m) {
        long sum = 0;
        for (var info : m.values()) {
            sum += info.offset();
        }
        return sum;
    }

    static void produceAll(String bootstrap, String topic, int records) throws Exception {
        Properties p = common(bootstrap, "java-producer");
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        AtomicReference<Exception> failed = new AtomicReference<>();
        try (var producer = new KafkaProducer<String, String>(p)) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic, "k" + i, "v" + i), (md, e) -> {
                    if (e != null) {
                        failed.compareAndSet(null, e);
                    }
                });
            }
            producer.flush();
        }
        if (failed.get() != null) {
            throw failed.get();
        }
    }

    static int consumeAll(String bootstrap, String topic, String group, String protocol, int records) {
        Properties p = common(bootstrap, group);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        Set<String> seen = new java.util.HashSet<>();
        long deadline = System.nanoTime() + TIMEOUT.toNanos();
        try (var consumer = new KafkaConsumer<String, String>(p)) {
            consumer.subscribe(List.of(topic));
            while (seen.size() < records) {
                check(System.nanoTime() < deadline, group + ": " + seen.size() + " of " + records + " records within " + TIMEOUT);
                ConsumerRecords<String, String> got = consumer.poll(Duration.ofMillis(200));
                got.forEach(r -> seen.add(r.key()));
            }
            consumer.commitSync();
        }
        return seen.size();
    }

    static void produce(String bootstrap, String topic) throws Exception {
        Properties p = common(bootstrap, "java-misroute");
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        AtomicLong acked = new AtomicLong(), lastAck = new AtomicLong(System.nanoTime());
        AtomicReference<Exception> failed = new AtomicReference<>();
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                }
            } catch (java.io.IOException e) {
                // stdin gone: stop as when it closes
            }
        });
        stdin.setDaemon(true);
        stdin.start();
        try (var producer = new KafkaProducer<String, String>(p)) {
            System.out.println("producing");
            for (long i = 0; stdin.isAlive() && failed.get() == null; i++) {
                producer.send(new ProducerRecord<>(topic, "v" + i), (md, e) -> {
                    if (e != null) {
                        failed.compareAndSet(null, e);
                        return;
                    }
                    long now = System.nanoTime(), gap = (now - lastAck.getAndSet(now)) / 1_000_000;
                    if (gap > 250) {
                        System.out.println("gap " + gap);
                    }
                    long n = acked.incrementAndGet();
                    if (n % 100 == 0) {
                        System.out.println("acked " + n);
                    }
                });
                Thread.sleep(10);
            }
            producer.flush();
        }
        if (failed.get() != null) {
            throw failed.get();
        }
        System.out.println("acked " + acked.get());
        System.out.println("PASS");
    }
}
