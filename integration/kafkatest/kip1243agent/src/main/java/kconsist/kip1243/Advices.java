package kconsist.kip1243;

import java.nio.ByteBuffer;

import net.bytebuddy.asm.Advice;
import org.apache.kafka.common.requests.AbstractResponse;
import org.apache.kafka.common.requests.RequestContext;
import org.apache.kafka.common.requests.RequestHeader;
import org.apache.kafka.common.requests.ResponseHeader;
import org.apache.kafka.image.MetadataProvenance;
import org.apache.kafka.network.Request;

/**
 * The advice ByteBuddy inlines into Kafka's methods. Each one only calls
 * into {@link Kip1243} and suppresses any Throwable, so a bug here can cost
 * a token, never a request.
 */
final class Advices {
    private Advices() {}

    /** RequestHeader#toResponseHeader(): stamp tag 0 on the response header. */
    static final class StampResponse {
        @Advice.OnMethodExit(suppress = Throwable.class)
        static void exit(@Advice.Return ResponseHeader rh) {
            Kip1243.stamp(rh);
        }
    }

    /** MetadataLoaderMetrics#updateLastAppliedImageProvenance(MetadataProvenance). */
    static final class Applied {
        @Advice.OnMethodExit(suppress = Throwable.class)
        static void exit(@Advice.Argument(0) MetadataProvenance p) {
            Kip1243.applied(p.lastContainedOffset());
        }
    }

    /** KRaftMetadataCache#setImage(MetadataImage), on enter: the image about to be shown. */
    static final class Visible {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(0) org.apache.kafka.image.MetadataImage image) {
            Kip1243.visible(image.provenance().lastContainedOffset());
        }
    }

    /** KafkaApis#handle(Request, RequestLocal): read tag 0; park or answer. */
    static final class BrokerHandle {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class, suppress = Throwable.class)
        static boolean enter(@Advice.This kafka.server.KafkaApis apis, @Advice.Argument(0) Request request) {
            return Kip1243.onRequest(apis, request);
        }
    }

    /** ControllerApis#handle(Request, RequestLocal): remember the request context. */
    static final class ControllerHandle {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This Object apis, @Advice.Argument(0) Request request) {
            Kip1243.controllerRequest(apis, request);
        }
    }

    /** RequestContext#buildResponseSend / #buildResponseEnvelopePayload(AbstractResponse). */
    static final class BuildResponse {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.This RequestContext ctx, @Advice.Argument(0) AbstractResponse resp) {
            Kip1243.beginResponse(ctx, resp);
        }

        @Advice.OnMethodExit(suppress = Throwable.class, onThrowable = Throwable.class)
        static void exit() {
            Kip1243.endResponse();
        }
    }

    /** ForwardingManagerImpl#parseResponse(ByteBuffer, AbstractRequest, RequestHeader). */
    static final class ForwardedResponse {
        @Advice.OnMethodEnter(suppress = Throwable.class)
        static void enter(@Advice.Argument(0) ByteBuffer inner, @Advice.Argument(2) RequestHeader clientHeader) {
            Kip1243.forwarded(inner, clientHeader);
        }
    }

    /**
     * RequestChannel#sendResponse(Request, AbstractResponse), which every
     * answer KafkaApis builds goes through (sendForwardedResponse, and the
     * merged answers of IncrementalAlterConfigs and the like): skipped while
     * this broker has not applied the forwarded write the answer reports;
     * the agent sends it later.
     */
    static final class ForwardedAnswer {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class, suppress = Throwable.class)
        static boolean enter(@Advice.This kafka.network.RequestChannel channel, @Advice.Argument(0) Request request,
                @Advice.Argument(1) AbstractResponse resp) {
            return Kip1243.forwardedAnswer(channel, request, resp);
        }
    }

    /**
     * Request#releaseBuffer(): skipped while the request is parked. The
     * handler thread releases a request's buffer when KafkaApis.handle
     * returns, and a parked request still needs it: a forwarded write is
     * sent to the controller from that buffer (without this, held
     * CreateTopics came back UNKNOWN_SERVER_ERROR).
     */
    static final class KeepBuffer {
        @Advice.OnMethodEnter(skipOn = Advice.OnNonDefaultValue.class, suppress = Throwable.class)
        static boolean enter(@Advice.This Request request) {
            return Kip1243.isHeld(request);
        }
    }

    /** KafkaRaftClient constructors: keep the instance for its high watermark. */
    static final class RaftClient {
        @Advice.OnMethodExit(suppress = Throwable.class)
        static void exit(@Advice.This Object client) {
            Kip1243.raftClient(client);
        }
    }
}
