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
    /** The node's raft client: on the active controller its high watermark covers every committed write. */
    private static volatile KafkaRaftClient<?> raft;

    /** Request contexts ControllerApis handled: their answers are stamped with at least HWM-1. */
    private static final IdentityWeakMap<RequestContext> CONTROLLER_CONTEXTS = new IdentityWeakMap<>();
    /** Forwarded requests' headers, with the token of the controller's answer. */
    private static final IdentityWeakMap<RequestHeader> FORWARDED = new IdentityWeakMap<>();
    /** The least token of the response being built on this thread. */
    private static final ThreadLocal<long[]> FLOOR = ThreadLocal.withInitial(() -> new long[] {-1});
    /** The token of an INCONSISTENT_METADATA answer being built on this thread: the offset it was judged at. */
    private static final ThreadLocal<long[]> PINNED = ThreadLocal.withInitial(() -> new long[] {-1});

    // Held requests: parked (out of every queue) until the broker applies
    // their token or their bound passes, then put back into the request
    // channel; no request-handler thread ever waits for one.
    private static final Object LOCK = new Object();
    private static final Map<Request, Held> HELD = new IdentityHashMap<>();
    private static final PriorityQueue<Held> BY_TOKEN = new PriorityQueue<>(Comparator.comparingLong(h -> h.token));
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
    private static final AtomicLong STALE_SERVED = new AtomicLong();
    private static final AtomicLong PARKS = new AtomicLong();
    private static final AtomicBoolean FIRST_STAMP = new AtomicBoolean();
    private static final int LOG_FIRST = 20;

    private static final class Held {
        final Request request;
        final RequestChannel channel;
        final long token;
        final long start;
        long deadline;
        boolean parked, expired, errorTried;
        ScheduledFuture<?> timer;

        Held(Request request, RequestChannel channel, long token, long start, long deadline) {
            this.request = request;
            this.channel = channel;
            this.token = token;
            this.start = start;
            this.deadline = deadline;
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
        long token = pinned >= 0 ? pinned : Math.max(APPLIED.get(), FLOOR.get()[0]);
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

    /** RequestContext.buildResponseSend / buildResponseEnvelopePayload enter. */
    public static void beginResponse(RequestContext ctx, AbstractResponse resp) {
        long floor = ctx.header == null ? -1 : FORWARDED.remove(ctx.header);
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
     * offset) becomes the least token of this broker's answer to the client,
     * which its own applied offset may not reach yet.
     */
    public static void forwarded(ByteBuffer inner, RequestHeader clientHeader) {
        if (inner == null || clientHeader == null) {
            return;
        }
        if (clientHeader.apiKey().responseHeaderVersion(clientHeader.apiVersion()) < 1) {
            return;
        }
        long token = State.responseToken(inner.duplicate());
        if (token >= 0) {
            FORWARDED.put(clientHeader, token);
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
     * (parked it, or answered it): KafkaApis.handle is then skipped.
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
        if (h.headerVersion() < 2 || h.apiKey() == ApiKeys.API_VERSIONS) {
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
        long applied = APPLIED.get(); // the offset this decision is made at
        if (st.token < 0 || st.token <= applied) {
            if (held != null) {
                forget(held);
            }
            return false;
        }
        long now = System.nanoTime();
        if (held == null) {
            held = new Held(request, apis.requestChannel(), st.token, now, now + TimeUnit.MILLISECONDS.toNanos(cfg.holdMs));
        }
        if (held.expired || now - held.deadline >= 0) {
            held.expired = false;
            if (!held.errorTried) {
                held.errorTried = true;
                if (answerInconsistent(held.channel, request, st.token, applied)) {
                    forget(held);
                    return true;
                }
                // This answer has no field for an error (an all-topics
                // Metadata, an acks=0 Produce): hold it longer, then serve
                // it as it is.
                held.deadline = held.start + TimeUnit.MILLISECONDS.toNanos(Math.max(cfg.staleHoldMs, cfg.holdMs));
            }
            if (now - held.deadline >= 0) {
                forget(held);
                long n = STALE_SERVED.incrementAndGet();
                if (n <= LOG_FIRST) {
                    Log.line("served " + h.apiKey() + " v" + h.apiVersion() + " of " + h.clientId()
                        + " at offset " + APPLIED.get() + " below its token " + st.token
                        + ": its answer cannot carry INCONSISTENT_METADATA (" + n + " so far)");
                }
                return false;
            }
        }
        if (!held.expired && held.timer == null) {
            long n = PARKS.incrementAndGet();
            if (n <= 10 * LOG_FIRST) {
                Log.line("parked " + h.apiKey() + " v" + h.apiVersion() + " of " + h.clientId() + ": token " + st.token
                    + ", applied " + APPLIED.get() + ", bound " + cfg.holdMs + " ms (" + n + " so far)");
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

    /** Answers INCONSISTENT_METADATA, or returns false when the answer has no place for it. */
    private static boolean answerInconsistent(RequestChannel channel, Request request, long token, long applied) {
        try {
            AbstractRequest body = request.body();
            if (noAnswer(body)) {
                return false;
            }
            AbstractResponse resp = errorAnswer(request, body, Settings.cfg.errorCode);
            if (resp == null) {
                return false;
            }
            // The answer's header names the offset the broker judged at,
            // below the request's token, even if the broker applies more
            // while the answer is built: a client tells this answer from
            // a caught-up one by that.
            PINNED.get()[0] = applied;
            try {
                channel.sendResponse(request, resp);
            } finally {
                PINNED.get()[0] = -1;
            }
            long c = INCONSISTENT.incrementAndGet();
            if (c <= LOG_FIRST) {
                RequestHeader h = request.header();
                Log.line("answered INCONSISTENT_METADATA (" + Settings.cfg.errorCode + ") to " + h.apiKey() + " v"
                    + h.apiVersion() + " of " + h.clientId() + ": token " + token + ", applied " + applied
                    + " (" + c + " so far)");
            }
            return true;
        } catch (Throwable t) {
            Log.line("could not build INCONSISTENT_METADATA for " + request.header().apiKey() + ": " + t);
            return false;
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

    private static void park(Held held) {
        long delay = Math.max(0, held.deadline - System.nanoTime());
        synchronized (LOCK) {
            if (HELD.put(held.request, held) == null) {
                HELD_COUNT.incrementAndGet();
            }
            BY_TOKEN.add(held);
            held.parked = true;
            PARKED.incrementAndGet();
            held.timer = REQUEUE.schedule(() -> expire(held), delay, TimeUnit.NANOSECONDS);
        }
        if (APPLIED.get() >= held.token) { // applied while we parked it
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

    private static void expire(Held held) {
        synchronized (LOCK) {
            if (!held.parked) {
                return;
            }
            BY_TOKEN.remove(held);
            held.parked = false;
            held.expired = true;
            PARKED.decrementAndGet();
        }
        requeue(held);
    }

    /** Puts every parked request whose token the broker has applied back into its request channel. */
    private static void drain() {
        List<Held> ready = new ArrayList<>();
        long applied = APPLIED.get();
        synchronized (LOCK) {
            while (!BY_TOKEN.isEmpty() && BY_TOKEN.peek().token <= applied) {
                Held h = BY_TOKEN.poll();
                h.parked = false;
                PARKED.decrementAndGet();
                if (h.timer != null) {
                    h.timer.cancel(false);
                }
                ready.add(h);
            }
        }
        for (Held h : ready) {
            requeue(h);
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
