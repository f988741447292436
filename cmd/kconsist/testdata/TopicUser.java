import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A Java service that uses topics someone else just created, for
 * realkafka_test.go: the Apache Kafka Java client (4.4), knowing nothing
 * of kconsist.
 *
 * <pre>
 * java -cp KAFKA_CLASSPATH TopicUser.java BOOTSTRAP PARTITIONS
 * </pre>
 *
 * It prints "ready" once its Admin and producer are connected, then for
 * each topic name read from stdin describes the topic once (Admin
 * describeTopics) and produces one record to each of its PARTITIONS
 * partitions, and prints "TOPIC DESCRIBE_ERRORS PRODUCE_ERRORS FIRST_ERROR".
 * Nothing is retried beyond what the client does by itself: a describe
 * answered UNKNOWN_TOPIC_OR_PARTITION by a broker that has not applied the
 * creation yet is what an application sees.
 */
public class TopicUser {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        int partitions = Integer.parseInt(args[1]);
        Properties a = new Properties();
        a.put("bootstrap.servers", bootstrap);
        a.put("client.id", "topic-user-admin");
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", "topic-user-producer");
        p.put("acks", "all");
        p.put("max.block.ms", "10000");
        p.put("delivery.timeout.ms", "10000");
        p.put("request.timeout.ms", "5000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (Admin admin = Admin.create(a); var producer = new KafkaProducer<String, String>(p)) {
            admin.describeCluster().nodes().get(30, TimeUnit.SECONDS);
            System.out.println("ready");
            System.out.flush();
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            String topic;
            while ((topic = in.readLine()) != null) {
                topic = topic.trim();
                if (topic.isEmpty()) {
                    continue;
                }
                int describeErrors = 0, produceErrors = 0;
                String first = "-";
                try {
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                    if (d.partitions().size() != partitions) {
                        describeErrors++;
                        first = "partitions=" + d.partitions().size();
                    }
                } catch (ExecutionException e) {
                    describeErrors++;
                    first = e.getCause().getClass().getSimpleName();
                }
                for (int i = 0; i < partitions; i++) {
                    try {
                        producer.send(new ProducerRecord<>(topic, i, null, "v")).get(15, TimeUnit.SECONDS);
                    } catch (Exception e) {
                        produceErrors++;
                        if (first.equals("-")) {
                            first = (e instanceof ExecutionException ? e.getCause() : e).getClass().getSimpleName();
                        }
                    }
                }
                System.out.println(topic + " " + describeErrors + " " + produceErrors + " " + first);
                System.out.flush();
            }
        }
    }
}
