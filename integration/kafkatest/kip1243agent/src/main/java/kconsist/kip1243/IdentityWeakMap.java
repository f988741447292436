package kconsist.kip1243;

import java.lang.ref.ReferenceQueue;
import java.lang.ref.WeakReference;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A concurrent map from objects, compared by identity and held weakly, to
 * longs. Kafka's request headers define equals by content, so two requests
 * with equal headers must not share an entry; and an entry must not keep a
 * request alive that Kafka dropped (a closed connection).
 */
final class IdentityWeakMap<K> {
    private final ConcurrentHashMap<Ref<K>, Long> map = new ConcurrentHashMap<>();
    private final ReferenceQueue<K> gone = new ReferenceQueue<>();

    void put(K key, long value) {
        purge();
        map.put(new Ref<>(key, gone), value);
    }

    /** Returns the value of key and removes it, or -1. */
    long remove(K key) {
        Long v = map.remove(new Ref<>(key, null));
        return v == null ? -1 : v;
    }

    /** Returns the value of key, or -1. */
    long get(K key) {
        Long v = map.get(new Ref<>(key, null));
        return v == null ? -1 : v;
    }

    boolean contains(K key) {
        return map.containsKey(new Ref<>(key, null));
    }

    int size() {
        purge();
        return map.size();
    }

    private void purge() {
        for (Object r; (r = gone.poll()) != null; ) {
            map.remove(r);
        }
    }

    private static final class Ref<K> extends WeakReference<K> {
        private final int hash;

        Ref(K key, ReferenceQueue<K> q) {
            super(key, q);
            hash = System.identityHashCode(key);
        }

        @Override
        public int hashCode() {
            return hash;
        }

        @Override
        public boolean equals(Object o) {
            if (o == this) {
                return true;
            }
            if (!(o instanceof Ref)) {
                return false;
            }
            Object k = get();
            return k != null && k == ((Ref<?>) o).get();
        }
    }
}
