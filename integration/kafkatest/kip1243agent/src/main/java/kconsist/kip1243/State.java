package kconsist.kip1243;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * KIP-1243's ConsistencyState, header tag 0: {ClusterId: compact nullable
 * string, ConsistencyToken: int64, tagged fields}.
 */
final class State {
    final String clusterId; // null when the sender did not name one
    final long token;

    State(String clusterId, long token) {
        this.clusterId = clusterId;
        this.token = token;
    }

    static byte[] encode(String clusterId, long token) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(32);
        if (clusterId == null) {
            writeUvarint(out, 0);
        } else {
            byte[] id = clusterId.getBytes(StandardCharsets.UTF_8);
            writeUvarint(out, id.length + 1L);
            out.write(id, 0, id.length);
        }
        for (int shift = 56; shift >= 0; shift -= 8) {
            out.write((int) (token >>> shift) & 0xff);
        }
        writeUvarint(out, 0); // no tagged fields
        return out.toByteArray();
    }

    /** Decodes tag 0's data, or throws IllegalArgumentException saying what is wrong. */
    static State decode(byte[] data) {
        ByteBuffer b = ByteBuffer.wrap(data);
        long n = readUvarint(b, "ClusterId length");
        String id = null;
        if (n > 0) {
            long len = n - 1;
            if (len > b.remaining()) {
                throw new IllegalArgumentException("ClusterId of " + len + " bytes, " + b.remaining() + " left");
            }
            byte[] s = new byte[(int) len];
            b.get(s);
            id = new String(s, StandardCharsets.UTF_8);
        }
        if (b.remaining() < 8) {
            throw new IllegalArgumentException("ConsistencyToken needs 8 bytes, " + b.remaining() + " left");
        }
        long token = b.getLong();
        long tags = readUvarint(b, "tagged field count");
        for (long i = 0; i < tags; i++) {
            readUvarint(b, "tag");
            long size = readUvarint(b, "tag size");
            if (size > b.remaining()) {
                throw new IllegalArgumentException("tagged field of " + size + " bytes, " + b.remaining() + " left");
            }
            b.position(b.position() + (int) size);
        }
        if (b.hasRemaining()) {
            throw new IllegalArgumentException(b.remaining() + " bytes after the tagged fields");
        }
        return new State(id, token);
    }

    /**
     * Reads tag 0 from the tagged fields of a response header whose
     * correlation id b starts at, or returns -1 when there is none (or it
     * is malformed: a forwarded answer is then taken at the broker's own
     * offset).
     */
    static long responseToken(ByteBuffer b) {
        try {
            return responseTokenOrThrow(b);
        } catch (IllegalArgumentException e) {
            return -1;
        }
    }

    private static long responseTokenOrThrow(ByteBuffer b) {
        if (b.remaining() < 4) {
            return -1;
        }
        b.getInt(); // correlation id
        long n = readUvarint(b, "tagged field count");
        for (long i = 0; i < n; i++) {
            long tag = readUvarint(b, "tag");
            long size = readUvarint(b, "tag size");
            if (size > b.remaining()) {
                return -1;
            }
            byte[] data = new byte[(int) size];
            b.get(data);
            if (tag == 0) {
                try {
                    return decode(data).token;
                } catch (IllegalArgumentException e) {
                    return -1;
                }
            }
        }
        return -1;
    }

    private static void writeUvarint(ByteArrayOutputStream out, long v) {
        while ((v & ~0x7fL) != 0) {
            out.write((int) ((v & 0x7f) | 0x80));
            v >>>= 7;
        }
        out.write((int) v);
    }

    private static long readUvarint(ByteBuffer b, String what) {
        long v = 0;
        for (int shift = 0; shift < 35; shift += 7) {
            if (!b.hasRemaining()) {
                throw new IllegalArgumentException(what + ": truncated varint");
            }
            int x = b.get() & 0xff;
            v |= (long) (x & 0x7f) << shift;
            if ((x & 0x80) == 0) {
                return v;
            }
        }
        throw new IllegalArgumentException(what + ": varint longer than 5 bytes");
    }
}
