package kconsist.kip1243;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The agent's settings, from {@code -javaagent:kip1243-agent.jar=key=value,...}
 * and, for keys the agent argument leaves out, from system properties
 * {@code -Dkip1243.key=value}.
 *
 * <ul>
 * <li>{@code mode}: {@code hold} (default) parks a request whose token is
 * ahead of the broker until the broker has applied it, then lets it
 * through; {@code error} refuses it once its bound is over, which is at
 * once by default. Either way a request still behind at the end of its
 * bound is refused (see {@code inconsistent}).
 * <li>{@code holdMs}: the agent's bound; default 30000 in hold mode (the
 * Java client's default request.timeout.ms), 0 in error mode. A request
 * that carries its own timeout (Produce, CreateTopics, DeleteTopics,
 * ListOffsets v10+, ... : a {@code timeoutMs} field) is held no longer
 * than that timeout.
 * <li>{@code inconsistent}: how a request is refused: {@code answer}
 * (default) answers INCONSISTENT_METADATA where the answer has a place
 * for an error and closes the connection where it has none (an
 * all-topics Metadata, an acks=0 Produce); {@code close} always closes.
 * <li>{@code errorToken}: the header token of an INCONSISTENT_METADATA
 * answer: {@code newest} (default) the broker's latest applied offset as
 * the answer is built, {@code judged} the offset the request was judged
 * at.
 * <li>{@code writeHoldMs}: how long the answer to a forwarded write
 * (CreateTopics, DeleteTopics, ...) waits for this broker to apply the
 * write before it is answered with the API's timeout error instead;
 * default 30000, and never longer than the request's own timeout.
 * <li>{@code errorCode}: the code of INCONSISTENT_METADATA; default 1243
 * (provisional: KIP-1243 has no code assigned upstream).
 * <li>{@code tokens}: {@code on} (default); {@code off} makes the broker
 * neither stamp responses nor read request tokens: plain Kafka with the
 * agent attached.
 * <li>{@code mismatch}: what a request naming another cluster gets:
 * {@code rebootstrap} (default) an answer with REBOOTSTRAP_REQUIRED (129),
 * or {@code close} the connection closed without an answer.
 * <li>{@code requireHook}: {@code class#method}, a further hook the agent
 * must find or stay out of the way (tests use it to show what happens on a
 * Kafka version without the expected methods).
 * </ul>
 */
final class Config {
    static final String PREFIX = "kip1243.";
    static final List<String> KEYS = List.of("mode", "holdMs", "inconsistent", "errorToken", "writeHoldMs", "errorCode",
        "tokens", "mismatch", "requireHook");

    boolean hold = true;
    long holdMs = 30_000;
    long writeHoldMs = 30_000;
    boolean inconsistentClose = false;
    boolean errorTokenJudged = false;
    short errorCode = 1243;
    boolean tokens = true;
    boolean mismatchClose = false;
    final List<String> requiredHooks = new ArrayList<>();

    static Config parse(String args) {
        Map<String, String> kv = new LinkedHashMap<>();
        if (args != null) {
            for (String part : args.split(",")) {
                part = part.trim();
                if (part.isEmpty()) {
                    continue;
                }
                int eq = part.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("agent argument \"" + part + "\": want key=value");
                }
                kv.put(part.substring(0, eq).trim(), part.substring(eq + 1).trim());
            }
        }
        for (String key : KEYS) {
            String v = System.getProperty(PREFIX + key);
            if (v != null && !kv.containsKey(key)) {
                kv.put(key, v.trim());
            }
        }
        Config c = new Config();
        String mode = kv.getOrDefault("mode", "hold").toLowerCase(Locale.ROOT);
        switch (mode) {
            case "hold":
                c.hold = true;
                c.holdMs = 30_000;
                break;
            case "error":
                c.hold = false;
                c.holdMs = 0;
                break;
            default:
                throw new IllegalArgumentException("mode=" + mode + ": want hold or error");
        }
        for (Map.Entry<String, String> e : kv.entrySet()) {
            String k = e.getKey(), v = e.getValue();
            switch (k) {
                case "mode":
                    break;
                case "holdMs":
                    c.holdMs = nonNegative(k, v);
                    break;
                case "writeHoldMs":
                    c.writeHoldMs = nonNegative(k, v);
                    break;
                case "inconsistent":
                    if (v.equals("close")) {
                        c.inconsistentClose = true;
                    } else if (v.equals("answer")) {
                        c.inconsistentClose = false;
                    } else {
                        throw new IllegalArgumentException("inconsistent=" + v + ": want answer or close");
                    }
                    break;
                case "errorToken":
                    if (v.equals("judged")) {
                        c.errorTokenJudged = true;
                    } else if (v.equals("newest")) {
                        c.errorTokenJudged = false;
                    } else {
                        throw new IllegalArgumentException("errorToken=" + v + ": want newest or judged");
                    }
                    break;
                case "errorCode":
                    long code = parseLong(k, v);
                    if (code <= 0 || code > Short.MAX_VALUE) {
                        throw new IllegalArgumentException("errorCode=" + v + ": want 1 to 32767");
                    }
                    c.errorCode = (short) code;
                    break;
                case "tokens":
                    c.tokens = onOff(k, v);
                    break;
                case "mismatch":
                    if (v.equals("close")) {
                        c.mismatchClose = true;
                    } else if (v.equals("rebootstrap")) {
                        c.mismatchClose = false;
                    } else {
                        throw new IllegalArgumentException("mismatch=" + v + ": want rebootstrap or close");
                    }
                    break;
                case "requireHook":
                    for (String h : v.split(";")) {
                        if (!h.contains("#")) {
                            throw new IllegalArgumentException("requireHook=" + v + ": want class#method");
                        }
                        c.requiredHooks.add(h);
                    }
                    break;
                default:
                    throw new IllegalArgumentException("unknown key \"" + k + "\" (want one of " + String.join(", ", KEYS) + ")");
            }
        }
        return c;
    }

    private static long parseLong(String k, String v) {
        try {
            return Long.parseLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(k + "=" + v + ": want a number");
        }
    }

    private static long nonNegative(String k, String v) {
        long n = parseLong(k, v);
        if (n < 0) {
            throw new IllegalArgumentException(k + "=" + v + ": want 0 or more");
        }
        return n;
    }

    private static boolean onOff(String k, String v) {
        if (v.equals("on")) {
            return true;
        }
        if (v.equals("off")) {
            return false;
        }
        throw new IllegalArgumentException(k + "=" + v + ": want on or off");
    }

    @Override
    public String toString() {
        return "mode=" + (hold ? "hold" : "error") + " holdMs=" + holdMs
            + " inconsistent=" + (inconsistentClose ? "close" : "answer") + " errorToken=" + (errorTokenJudged ? "judged" : "newest")
            + " writeHoldMs=" + writeHoldMs + " errorCode=" + errorCode + " tokens=" + (tokens ? "on" : "off")
            + " mismatch=" + (mismatchClose ? "close" : "rebootstrap");
    }
}
