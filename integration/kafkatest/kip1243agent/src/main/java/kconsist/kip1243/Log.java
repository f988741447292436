package kconsist.kip1243;

import java.time.Instant;

/** Lines on stderr, which a broker started by kafkatest sends to its log file. */
final class Log {
    static final String PREFIX = "kip1243-agent: ";

    private Log() {}

    static void line(String msg) {
        System.err.println("[" + Instant.now() + "] " + PREFIX + msg);
    }
}
