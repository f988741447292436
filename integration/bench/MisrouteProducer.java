import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The Apache Kafka Java producer's side of the misroute benchmark
 * (misroute.go), run in source-file mode on integration/kafkatest's
 * classpath:
 *
 * <pre>
 * java -cp KAFKA_CLASSPATH MisrouteProducer.java BOOTSTRAP TOPIC [KEY=VALUE...]
 * </pre>
 *
 * It makes one producer with the client's defaults (idempotent, acks=all,
 * metadata.recovery.strategy=rebootstrap, the KIP-1242 check on), plus any
 * KEY=VALUE settings, and prints "ready". Each line "p" on stdin sends one
 * record; each outcome is printed as a line, "ack" or "fail" and the error,
 * in the order the callbacks run (one partition: the order of the sends).
 * The benchmark times a record from its side, from the line it writes to
 * the line it reads back. The program exits when stdin closes.
 */
public class MisrouteProducer {
    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: MisrouteProducer BOOTSTRAP TOPIC [KEY=VALUE...]");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("client.id", "java");
        for (int i = 2; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                System.err.println("not KEY=VALUE: " + args[i]);
                System.exit(2);
            }
            props.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        String topic = args[1];
        byte[] value = "r".getBytes(StandardCharsets.UTF_8);
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            say("ready");
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            String line;
            while ((line = in.readLine()) != null) {
                if (!line.equals("p")) {
                    say("fail unknown command " + line);
                    continue;
                }
                producer.send(new ProducerRecord<>(topic, value), (md, e) -> {
                    if (e == null) {
                        say("ack");
                    } else {
                        say(("fail " + e).replace('\n', ' '));
                    }
                });
            }
        }
        System.exit(0); // the producer is closed; do not wait for the JVM's own threads
    }

    static synchronized void say(String s) {
        System.out.println(s);
        System.out.flush();
    }
}
