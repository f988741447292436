package kconsist.kip1243;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.PriorityQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import kafka.network.RequestChannel;
import org.apache.kafka.common.errors.UnknownServerException;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.protocol.types.RawTaggedField;
import org.apache.kafka.common.requests.AbstractRequest;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.ProduceRequest;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.ResponseHeader;
import org.apache.kafka.network.Request;
import org.apache.kafka.raft.KafkaRaftClient;

/**
 * What the hooks do: the server side of KIP-1243 on an Apache Kafka 4.4
 * broker. Every method here is called from inlined advice and must never
 * throw into Kafka (the advice suppresses Throwable as a last resort).
 */
public final class Kip1243 {
    private Kip1243() {}

    /** This cluster's id, learnt from KafkaApis / ControllerApis. */
    private static volatile String clusterId;
    /** The last metadata offset this broker applied (MetadataLoader, after every publisher). */
    private static final AtomicLong APPLIED = new AtomicLong(-1);
    /**
     * The offset of the newest metadata image this broker's cache shows
     * (KRaftMetadataCache.setImage, before the image is visible). The
     * metadata cache publishes an image before the loader counts it
     * applied, so a Metadata answer built from the new image and stamped
     * with APPLIED would carry a token below what it shows, and a client
     * could read the topic here and miss it on a broker at that token
     * (monotonic reads broken). Answers are stamped with at least this;
     * requests still wait for APPLIED, which the replica manager has
     * reached too.
     */
    private static final AtomicLong VISIBLE = new AtomicLong(-1);
    /** The node's raft client: on the active controller its high watermark covers every committed write. */
    private static volatile KafkaRaftClient<?> raft;

    /** Request contexts ControllerApis handled: their answers are stamped with at least HWM-1. */
    private static final IdentityWeakMap<RequestContext> CONTROLLER_CONTEXTS = new IdentityWeakMap<>();
    /** Forwarded requests' headers, with the token of the controller's answer. */
    private static final IdentityWeakMap<RequestHeader> FORWARDED = new IdentityWeakMap<>();
    /** The least token of the response being built on this thread (the controller's answers). */
    private static final ThreadLocal<long[]> FLOOR = ThreadLocal.withInitial(() -> new long[] {-1});
    /** The token of an INCONSISTENT_METADATA answer being built on this thread (errorToken=judged). */
    private static final ThreadLocal<long[]> PINNED = ThreadLocal.withInitial(() -> new long[] {-1});
    /** Set while the agent itself sends an answer it held: the hook lets it through. */
    private static final ThreadLocal<boolean[]> RELEASING = ThreadLocal.withInitial(() -> new boolean[1]);

    // Waiters: held requests and held answers to forwarded writes, each out
    // of every Kafka queue until the broker applies their token or their
    // bound passes; the kip1243-requeue thread then hands them back. No
    // request-handler thread ever waits for one.
    private static final Object LOCK = new Object();
    private static final Map<Request, Held> HELD = new IdentityHashMap<>();
    private static final PriorityQueue<Waiter> BY_TOKEN = new PriorityQueue<>(Comparator.comparingLong(w -> w.token));
    private static final AtomicInteger PARKED = new AtomicInteger();
    private static final AtomicInteger HELD_COUNT = new AtomicInteger(); // size of HELD, read without the lock
    private static final ScheduledExecutorService REQUEUE = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "kip1243-requeue");
        t.setDaemon(true);
        return t;
    });

    private static final AtomicBoolean MALFORMED_LOGGED = new AtomicBoolean();
    private static final AtomicLong MISMATCHES = new AtomicLong();
    private static final AtomicLong INCONSISTENT = new AtomicLong();
    private static final AtomicLong CLOSED = new AtomicLong();
    private static final AtomicLong PARKS = new AtomicLong();
    private static final AtomicLong WRITES_HELD = new AtomicLong();
    private static final AtomicLong WRITES_TIMED_OUT = new AtomicLong();
    private static final AtomicBoolean FIRST_STAMP = new AtomicBoolean();
    private static final int LOG_FIRST = 20;

    /** Something waiting for the applied offset to reach token, or for its deadline. */
    private abstract static class Waiter {
        final long token;
        final long deadline; // System.nanoTime
        boolean parked;
        ScheduledFuture<?> timer;

        Waiter(long token, long deadline) {
            this.token = token;
            this.deadline = deadline;
        }

        /** The broker applied token: hand it back. Runs on kip1243-requeue. */
        abstract void ready();

        /** The deadline passed first. Runs on kip1243-requeue. */
        abstract void expired();
    }

    /** A request whose token the broker has not applied, out of the queue. */
    private static final class Held extends Waiter {
        final Request request;
        final RequestChannel channel;
        boolean expired;

        Held(Request request, RequestChannel channel, long token, long deadline) {
            super(token, deadline);
            this.request = request;
            this.channel = channel;
        }

        @Override
        void ready() {
            requeue(this);
        }

        @Override
        void expired() {
            expired = true;
            requeue(this);
        }
    }

    /** The controller's answer to a forwarded write, held until this broker applied the write. */
    private static final class HeldAnswer extends Waiter {
        final RequestChannel channel;
        final Request request;
        final AbstractResponse answer;

        HeldAnswer(RequestChannel channel, Request request, AbstractResponse answer, long token, long deadline) {
            super(token, deadline);
            this.channel = channel;
            this.request = request;
            this.answer = answer;
        }

        @Override
        void ready() {
            release(channel, request, answer);
        }

        @Override
        void expired() {
            answerTimedOut(this);
        }
    }

    // ---- applied offset -------------------------------------------------

    /** MetadataLoaderMetrics.updateLastAppliedImageProvenance: the broker applied offset. */
    public static void applied(long offset) {
        long prev;
        do {
            prev = APPLIED.get();
            if (offset <= prev) {
                return;
            }
        } while (!APPLIED.compareAndSet(prev, offset));
        if (PARKED.get() > 0) {
            REQUEUE.execute(Kip1243::drain);
        }
    }

    /** KRaftMetadataCache.setImage enter: the offset of the image about to be shown. */
    public static void visible(long offset) {
        long prev;
        do {
            prev = VISIBLE.get();
            if (offset <= prev) {
                return;
            }
        } while (!VISIBLE.compareAndSet(prev, offset));
    }

    public static void raftClient(Object client) {
        if (client instanceof KafkaRaftClient) {
            raft = (KafkaRaftClient<?>) client;
        }
    }

    // ---- responses --------------------------------------------------------

    /** RequestHeader.toResponseHeader exit: adds tag 0 to a flexible response header. */
    public static void stamp(ResponseHeader rh) {
        Config cfg = Settings.cfg;
        String id = clusterId;
        if (Settings.off || !cfg.tokens || id == null || rh == null || rh.headerVersion() < 1) {
            return;
        }
        long pinned = PINNED.get()[0];
        long token = pinned >= 0 ? pinned : Math.max(Math.max(APPLIED.get(), VISIBLE.get()), FLOOR.get()[0]);
        if (token < 0) {
            return;
        }
        List<RawTaggedField> tags = rh.data().unknownTaggedFields();
        tags.removeIf(f -> f.tag() == 0);
        tags.add(0, new RawTaggedField(0, State.encode(id, token)));
        if (FIRST_STAMP.compareAndSet(false, true)) {
            Log.line("ACTIVE: first response header stamped (cluster " + id + ", token " + token + ")");
        }
    }

    /**
     * RequestContext.buildResponseSend / buildResponseEnvelopePayload enter:
     * an answer the controller builds (to the controller listener, or the
     * inner answer of a forwarded request's envelope) carries at least the
     * raft high watermark - 1, which covers every write the controller
     * answers, since it answers only after the commit. A broker's own
     * answers carry only the offset it applied.
     */
    public static void beginResponse(RequestContext ctx, AbstractResponse resp) {
        long floor = -1;
        if (CONTROLLER_CONTEXTS.remove(ctx) >= 0) {
            KafkaRaftClient<?> r = raft;
            if (r != null) {
                OptionalLong hw = r.highWatermark();
                if (hw.isPresent()) {
                    floor = Math.max(floor, hw.getAsLong() - 1);
                }
            }
        }
        FLOOR.get()[0] = floor;
    }

    public static void endResponse() {
        FLOOR.get()[0] = -1;
    }

    /**
     * ForwardingManagerImpl.parseResponse enter: the controller's answer to a
     * forwarded request, with its response header. Its tag 0 (stamped by the
     * agent on the controller with at least the controller's committed
     * offset) is the offset this broker must apply before it answers.
     */
    public static void forwarded(ByteBuffer inner, RequestHeader clientHeader) {
        if (inner == null || clientHeader == null) {
            return;
        }
        long token = State.responseToken(inner.duplicate());
        if (token >= 0) {
            FORWARDED.put(clientHeader, token);
        }
    }

    /**
     * RequestChannel.sendResponse(Request, AbstractResponse) enter. Returns true when
     * the agent holds the answer (the method is then skipped): the write it
     * reports is at an offset this broker has not applied. It is sent once
     * the broker has, stamped with the broker's own offset, so that no
     * answer of this broker carries a token it has not applied and a read
     * carrying that token, sent to this broker, never waits for the write
     * the client already saw answered. If the broker has not applied it
     * within min(writeHoldMs, the request's own timeout), the answer is
     * the API's timeout error instead.
     */
    public static boolean forwardedAnswer(RequestChannel channel, Request request, AbstractResponse resp) {
        if (RELEASING.get()[0]) {
            return false;
        }
        long token = FORWARDED.remove(request.header());
        Config cfg = Settings.cfg;
        if (Settings.off || !cfg.tokens || token < 0 || token <= APPLIED.get()) {
            return false;
        }
        long deadline = request.startTimeNanos() + TimeUnit.MILLISECONDS.toNanos(bound(request, cfg.writeHoldMs));
        HeldAnswer w = new HeldAnswer(channel, request, resp, token, deadline);
        long n = WRITES_HELD.incrementAndGet();
        if (n <= LOG_FIRST) {
            RequestHeader h = request.header();
            Log.line("held the answer to " + h.apiKey() + " v" + h.apiVersion() + " of " + h.clientId() + ": write at token "
                + token + ", applied " + APPLIED.get() + " (" + n + " so far)");
        }
        park(w);
        return true;
    }

    private static void release(RequestChannel channel, Request request, AbstractResponse resp) {
        boolean[] r = RELEASING.get();
        r[0] = true;
        try {
            channel.sendResponse(request, resp);
        } catch (Throwable t) {
            Log.line("could not send a held answer to " + request.header().apiKey() + ": " + t);
        } finally {
            r[0] = false;
        }
    }

    private static void answerTimedOut(HeldAnswer w) {
        RequestHeader h = w.request.header();
        AbstractResponse resp;
        try {
            resp = w.request.body().getErrorResponse(0, Errors.REQUEST_TIMED_OUT.exception());
        } catch (Throwable t) {
            Log.line("could not build REQUEST_TIMED_OUT for " + h.apiKey() + ": " + t + "; closed the connection");
            w.channel.closeConnection(w.request, Collections.emptyMap());
            return;
        }
        long n = WRITES_TIMED_OUT.incrementAndGet();
        if (n <= LOG_FIRST) {
            Log.line("answered REQUEST_TIMED_OUT to " + h.apiKey() + " v" + h.apiVersion() + " of " + h.clientId()
                + ": the write at token " + w.token + " not applied (applied " + APPLIED.get() + ") within its bound ("
                + n + " so far)");
        }
        release(w.channel, w.request, resp);
    }

    /**
     * The bound of request in ms: agentBound, or the request's own timeout
     * (its {@code timeoutMs} field: Produce, CreateTopics, DeleteTopics,
     * CreatePartitions, DeleteRecords, ListOffsets v10+, ...) when smaller.
     */
    static long bound(Request request, long agentBound) {
        try {
            Object data = request.body().data();
            java.lang.reflect.Method m = TIMEOUT.computeIfAbsent(data.getClass(), Kip1243::timeoutMethod).orElse(null);
            if (m != null) {
                int own = (int) m.invoke(data);
                if (own >= 0 && own < agentBound) {
                    return own;
                }
            }
        } catch (Throwable t) {
            // no own timeout we can read: the agent's bound
        }
        return agentBound;
    }

    private static final java.util.concurrent.ConcurrentHashMap<Class<?>, java.util.Optional<java.lang.reflect.Method>> TIMEOUT =
        new java.util.concurrent.ConcurrentHashMap<>();

    private static java.util.Optional<java.lang.reflect.Method> timeoutMethod(Class<?> c) {
        try {
            java.lang.reflect.Method m = c.getMethod("timeoutMs");
            return m.getReturnType() == int.class ? java.util.Optional.of(m) : java.util.Optional.empty();
        } catch (NoSuchMethodException e) {
            return java.util.Optional.empty();
        }
    }

    public static void controllerRequest(Object apis, Request request) {
        if (clusterId == null && apis instanceof kafka.server.ControllerApis) {
            clusterId = ((kafka.server.ControllerApis) apis).clusterId();
        }
        CONTROLLER_CONTEXTS.put(request.context(), 1);
    }

    // ---- requests ---------------------------------------------------------

    /**
     * KafkaApis.handle enter. Returns true when the agent took the request
     * (parked it, answered it or closed its connection): KafkaApis.handle
     * is then skipped. Every request with header v2 is judged, ApiVersions
     * v3+ included: KIP-1243 exempts no API, and ApiVersions v3+ answers
     * carry the finalized features, which come from the metadata log.
     */
    public static boolean onRequest(kafka.server.KafkaApis apis, Request request) {
        Config cfg = Settings.cfg;
        if (clusterId == null) {
            clusterId = apis.clusterId();
        }
        if (Settings.off || !cfg.tokens) {
            return false;
        }
        RequestHeader h = request.header();
        if (h.headerVersion() < 2) {
            return false;
        }
        State st = readState(h);
        if (st == null) {
            return false;
        }
        if (st.clusterId != null && !st.clusterId.equals(clusterId)) {
            mismatch(apis.requestChannel(), request, st.clusterId);
            return true;
        }
        Held held;
        synchronized (LOCK) {
            held = HELD.get(request);
        }
        long applied = APPLIED.get(); // the offset this request is judged at
        if (st.token < 0 || st.token <= applied) {
            if (held != null) {
                forget(held);
            }
            return false;
        }
        if (held == null) {
            long deadline = request.startTimeNanos() + TimeUnit.MILLISECONDS.toNanos(bound(request, cfg.holdMs));
            held = new Held(request, apis.requestChannel(), st.token, deadline);
        }
        if (held.expired || System.nanoTime() - held.deadline >= 0) {
            forget(held);
            refuse(held.channel, request, st.token, applied);
            return true;
        }
        if (held.timer == null) {
            long n = PARKS.incrementAndGet();
            if (n <= 10 * LOG_FIRST) {
                Log.line("parked " + h.apiKey() + " v" + h.apiVersion() + " of " + h.clientId() + ": token " + st.token
                    + ", applied " + applied + ", bound " + TimeUnit.NANOSECONDS.toMillis(held.deadline - request.startTimeNanos())
                    + " ms (" + n + " so far)");
            }
        }
        park(held);
        return true;
    }

    private static State readState(RequestHeader h) {
        List<RawTaggedField> tags = h.data().unknownTaggedFields();
        for (RawTaggedField f : tags) {
            if (f.tag() != 0) {
                continue;
            }
            try {
                return State.decode(f.data());
            } catch (IllegalArgumentException e) {
                if (MALFORMED_LOGGED.compareAndSet(false, true)) {
                    Log.line("ignored a malformed header tag 0 (logged once): " + h.apiKey() + " v" + h.apiVersion()
                        + " from " + h.clientId() + ": " + e.getMessage());
                }
                return null;
            }
        }
        return null;
    }

    private static boolean noAnswer(AbstractRequest body) {
        return body instanceof ProduceRequest && ((ProduceRequest) body).acks() == 0;
    }

    /**
     * The API's own error answer to request with code in every place its
     * getErrorResponse puts an error, or null when none of them reaches
     * the client at the request's version.
     */
    private static AbstractResponse errorAnswer(Request request, AbstractRequest body, short code) throws IllegalAccessException {
        AbstractResponse resp = body.getErrorResponse(0, new UnknownServerException("kip1243 placeholder"));
        if (!ErrorCodes.setCarried(resp.data(), request.header().apiVersion(), Errors.UNKNOWN_SERVER_ERROR.code(), code)) {
            return null;
        }
        return resp;
    }

    /**
     * Refuses a request the broker is still behind on at the end of its
     * bound: nothing is executed or served from older metadata. It is
     * answered INCONSISTENT_METADATA, or its connection is closed where
     * the answer has no place for that error (an all-topics Metadata, an
     * acks=0 Produce) or with inconsistent=close.
     */
    private static void refuse(RequestChannel channel, Request request, long token, long applied) {
        RequestHeader h = request.header();
        Config cfg = Settings.cfg;
        String why = "inconsistent=close";
        if (!cfg.inconsistentClose) {
            try {
                AbstractRequest body = request.body();
                AbstractResponse resp = noAnswer(body) ? null : errorAnswer(request, body, cfg.errorCode);
                if (resp != null) {
                    // errorToken=judged: the header names the offset the
                    // request was judged at; newest: the broker's latest, as
                    // any answer's.
                    PINNED.get()[0] = cfg.errorTokenJudged ? applied : -1;
                    try {
                        channel.sendResponse(request, resp);
                    } finally {
                        PINNED.get()[0] = -1;
                    }
                    long c = INCONSISTENT.incrementAndGet();
                    if (c <= LOG_FIRST) {
                        Log.line("answered INCONSISTENT_METADATA (" + cfg.errorCode + ") to " + h.apiKey() + " v"
                            + h.apiVersion() + " of " + h.clientId() + ": token " + token + ", applied " + applied
                            + " (" + c + " so far)");
                    }
                    return;
                }
                why = noAnswer(body) ? "an acks=0 Produce has no answer" : "its answer has no place for an error at v" + h.apiVersion();
            } catch (Throwable t) {
                why = "could not build INCONSISTENT_METADATA: " + t;
            }
        }
        channel.closeConnection(request, Collections.emptyMap());
        long c = CLOSED.incrementAndGet();
        if (c <= LOG_FIRST) {
            Log.line("closed the connection of " + h.apiKey() + " v" + h.apiVersion() + " of " + h.clientId() + ": token "
                + token + ", applied " + applied + "; " + why + " (" + c + " so far)");
        }
    }

    /**
     * A request naming another cluster is never processed: answered
     * REBOOTSTRAP_REQUIRED where the API has a place for an error (the code
     * KIP-1242 gives a client that reached the wrong cluster), else (and
     * with mismatch=close) its connection is closed.
     */
    private static void mismatch(RequestChannel channel, Request request, String named) {
        RequestHeader h = request.header();
        long n = MISMATCHES.incrementAndGet();
        boolean answered = false;
        if (!Settings.cfg.mismatchClose) {
            try {
                AbstractRequest body = request.body();
                if (!noAnswer(body)) {
                    AbstractResponse resp = errorAnswer(request, body, Errors.REBOOTSTRAP_REQUIRED.code());
                    if (resp != null) {
                        channel.sendResponse(request, resp);
                        answered = true;
                    }
                }
            } catch (Throwable t) {
                Log.line("could not build REBOOTSTRAP_REQUIRED for " + h.apiKey() + ": " + t);
            }
        }
        if (!answered) {
            channel.closeConnection(request, Collections.emptyMap());
        }
        if (n <= LOG_FIRST) {
            Log.line("refused " + h.apiKey() + " v" + h.apiVersion() + " of " + h.clientId() + ": its header names cluster "
                + named + ", this is " + clusterId + "; " + (answered ? "answered REBOOTSTRAP_REQUIRED" : "closed the connection")
                + " (" + n + " so far)");
        }
    }

    // ---- parking ----------------------------------------------------------

    /** Whether request is parked or on its way back: its buffer must stay. */
    public static boolean isHeld(Request request) {
        if (PARKED.get() == 0 && HELD_COUNT.get() == 0) {
            return false;
        }
        synchronized (LOCK) {
            return HELD.containsKey(request);
        }
    }

    private static void park(Waiter w) {
        long delay = Math.max(0, w.deadline - System.nanoTime());
        synchronized (LOCK) {
            if (w instanceof Held && HELD.put(((Held) w).request, (Held) w) == null) {
                HELD_COUNT.incrementAndGet();
            }
            BY_TOKEN.add(w);
            w.parked = true;
            PARKED.incrementAndGet();
            w.timer = REQUEUE.schedule(() -> expire(w), delay, TimeUnit.NANOSECONDS);
        }
        if (APPLIED.get() >= w.token) { // applied while we parked it
            REQUEUE.execute(Kip1243::drain);
        }
    }

    private static void forget(Held held) {
        synchronized (LOCK) {
            if (HELD.remove(held.request) != null) {
                HELD_COUNT.decrementAndGet();
            }
            if (held.parked) {
                BY_TOKEN.remove(held);
                held.parked = false;
                PARKED.decrementAndGet();
            }
            if (held.timer != null) {
                held.timer.cancel(false);
            }
        }
    }

    private static void expire(Waiter w) {
        synchronized (LOCK) {
            if (!w.parked) {
                return;
            }
            BY_TOKEN.remove(w);
            w.parked = false;
            PARKED.decrementAndGet();
        }
        w.expired();
    }

    /** Hands back every waiter whose token the broker has applied. */
    private static void drain() {
        List<Waiter> ready = new ArrayList<>();
        long applied = APPLIED.get();
        synchronized (LOCK) {
            while (!BY_TOKEN.isEmpty() && BY_TOKEN.peek().token <= applied) {
                Waiter w = BY_TOKEN.poll();
                w.parked = false;
                PARKED.decrementAndGet();
                if (w.timer != null) {
                    w.timer.cancel(false);
                }
                ready.add(w);
            }
        }
        for (Waiter w : ready) {
            w.ready();
        }
    }

    private static void requeue(Held held) {
        try {
            held.channel.sendRequest(held.request); // blocks this thread only, if the queue is full
        } catch (Throwable t) {
            Log.line("could not re-queue a held " + held.request.header().apiKey() + ": " + t);
        }
    }
}
