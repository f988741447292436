package kconsist.kip1243;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.kafka.common.protocol.Message;
import org.apache.kafka.common.protocol.MessageUtil;

/**
 * Sets an error code Kafka's Errors enum does not know (INCONSISTENT_METADATA
 * has no code in 4.4) in a generated response message: every {@code errorCode}
 * field that holds the placeholder gets the code. Each API's
 * getErrorResponse decides where errors go; this follows its choice.
 */
final class ErrorCodes {
    private static final ConcurrentHashMap<Class<?>, List<Field>> FIELDS = new ConcurrentHashMap<>();

    private ErrorCodes() {}

    /**
     * Replaces placeholder by code in msg and reports whether the code is
     * in what msg serializes to at version: a field that exists in the
     * message class but not in that version (MetadataResponse's top-level
     * ErrorCode before v13) carries nothing to the client. It serializes
     * msg twice, with two codes, and compares.
     */
    static boolean setCarried(Message msg, short version, short placeholder, short code) throws IllegalAccessException {
        short probe = code == 0x7001 ? (short) 0x7002 : (short) 0x7001;
        if (replace(msg, placeholder, probe) == 0) {
            return false;
        }
        java.nio.ByteBuffer withProbe = MessageUtil.toVersionPrefixedByteBuffer(version, msg);
        replace(msg, probe, code);
        java.nio.ByteBuffer withCode = MessageUtil.toVersionPrefixedByteBuffer(version, msg);
        return !withProbe.equals(withCode);
    }

    /** Replaces placeholder by code in msg and every message it holds; returns how many it replaced. */
    static int replace(Object msg, short placeholder, short code) throws IllegalAccessException {
        if (msg == null) {
            return 0;
        }
        int n = 0;
        for (Field f : fields(msg.getClass())) {
            Object v = f.get(msg);
            if (f.getType() == short.class) {
                if ((short) v == placeholder) {
                    f.setShort(msg, code);
                    n++;
                }
            } else if (v instanceof Message) {
                n += replace(v, placeholder, code);
            } else if (v instanceof Collection) {
                for (Object e : (Collection<?>) v) {
                    if (e instanceof Message) {
                        n += replace(e, placeholder, code);
                    }
                }
            }
        }
        return n;
    }

    private static List<Field> fields(Class<?> c) {
        return FIELDS.computeIfAbsent(c, k -> {
            List<Field> out = new ArrayList<>();
            for (Class<?> x = k; x != null && x != Object.class; x = x.getSuperclass()) {
                for (Field f : x.getDeclaredFields()) {
                    if (Modifier.isStatic(f.getModifiers())) {
                        continue;
                    }
                    boolean code = f.getType() == short.class && f.getName().equals("errorCode");
                    boolean nested = Message.class.isAssignableFrom(f.getType()) || Collection.class.isAssignableFrom(f.getType());
                    if (code || nested) {
                        f.setAccessible(true);
                        out.add(f);
                    }
                }
            }
            return out;
        });
    }
}
