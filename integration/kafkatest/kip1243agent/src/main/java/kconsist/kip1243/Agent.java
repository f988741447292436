package kconsist.kip1243;

import java.lang.instrument.Instrumentation;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import net.bytebuddy.agent.builder.AgentBuilder;
import net.bytebuddy.asm.Advice;
import net.bytebuddy.description.method.MethodDescription;
import net.bytebuddy.description.type.TypeDescription;
import net.bytebuddy.dynamic.ClassFileLocator;
import net.bytebuddy.dynamic.DynamicType;
import net.bytebuddy.matcher.ElementMatcher;
import net.bytebuddy.pool.TypePool;
import net.bytebuddy.utility.JavaModule;

import static net.bytebuddy.matcher.ElementMatchers.isConstructor;
import static net.bytebuddy.matcher.ElementMatchers.named;
import static net.bytebuddy.matcher.ElementMatchers.takesArgument;
import static net.bytebuddy.matcher.ElementMatchers.takesArguments;

/**
 * premain of the KIP-1243 agent. It first checks, without loading them,
 * that Kafka's classes have every method it hooks (names and signatures as
 * in Apache Kafka 4.4.0); if one is missing it logs FAILED and installs
 * nothing, so the broker runs as plain Kafka and a test harness can see
 * why. Otherwise it inlines the advice of {@link Advices} and logs READY,
 * then "instrumented CLASS" for each class as the JVM loads it.
 */
public final class Agent {
    private Agent() {}

    /** One hook point: a method of a Kafka class, by name and parameter types. */
    static final class Hook {
        final String type, method;
        final String[] params;
        final String advice;

        Hook(String type, String method, String advice, String... params) {
            this.type = type;
            this.method = method;
            this.params = params;
            this.advice = advice;
        }

        ElementMatcher.Junction<MethodDescription> matcher() {
            ElementMatcher.Junction<MethodDescription> m = method.equals("<init>") ? isConstructor() : named(method);
            if (params == null) {
                return m;
            }
            m = m.and(takesArguments(params.length));
            for (int i = 0; i < params.length; i++) {
                m = m.and(takesArgument(i, named(params[i])));
            }
            return m;
        }

        boolean present(TypePool pool) {
            TypePool.Resolution r = pool.describe(type);
            if (!r.isResolved()) {
                return false;
            }
            try {
                return !r.resolve().getDeclaredMethods().filter(matcher()).isEmpty();
            } catch (RuntimeException e) {
                return false;
            }
        }

        @Override
        public String toString() {
            return type + "#" + method + (params == null ? "" : "(" + String.join(", ", params) + ")");
        }
    }

    private static final String A = "kconsist.kip1243.Advices$";

    static List<Hook> hooks() {
        List<Hook> h = new ArrayList<>();
        h.add(new Hook("org.apache.kafka.common.requests.RequestHeader", "toResponseHeader", A + "StampResponse"));
        h.add(new Hook("org.apache.kafka.image.loader.metrics.MetadataLoaderMetrics", "updateLastAppliedImageProvenance",
            A + "Applied", "org.apache.kafka.image.MetadataProvenance"));
        h.add(new Hook("org.apache.kafka.metadata.KRaftMetadataCache", "setImage", A + "Visible",
            "org.apache.kafka.image.MetadataImage"));
        h.add(new Hook("kafka.server.KafkaApis", "handle", A + "BrokerHandle",
            "org.apache.kafka.network.Request", "org.apache.kafka.server.common.RequestLocal"));
        h.add(new Hook("kafka.server.ControllerApis", "handle", A + "ControllerHandle",
            "org.apache.kafka.network.Request", "org.apache.kafka.server.common.RequestLocal"));
        h.add(new Hook("org.apache.kafka.common.requests.RequestContext", "buildResponseSend", A + "BuildResponse",
            "org.apache.kafka.common.requests.AbstractResponse"));
        h.add(new Hook("org.apache.kafka.common.requests.RequestContext", "buildResponseEnvelopePayload", A + "BuildResponse",
            "org.apache.kafka.common.requests.AbstractResponse"));
        h.add(new Hook("org.apache.kafka.server.ForwardingManagerImpl", "parseResponse", A + "ForwardedResponse",
            "java.nio.ByteBuffer", "org.apache.kafka.common.requests.AbstractRequest", "org.apache.kafka.common.requests.RequestHeader"));
        h.add(new Hook("kafka.network.RequestChannel", "sendResponse", A + "ForwardedAnswer",
            "org.apache.kafka.network.Request", "org.apache.kafka.common.requests.AbstractResponse"));
        h.add(new Hook("org.apache.kafka.raft.KafkaRaftClient", "<init>", A + "RaftClient", (String[]) null));
        h.add(new Hook("org.apache.kafka.network.Request", "releaseBuffer", A + "KeepBuffer", new String[0]));
        return h;
    }

    public static void premain(String args, Instrumentation inst) {
        Config cfg;
        try {
            cfg = Config.parse(args);
        } catch (IllegalArgumentException e) {
            Log.line("FAILED: bad agent argument: " + e.getMessage() + "; the agent stays out of the way, the broker runs without KIP-1243");
            return;
        }
        try {
            install(cfg, inst);
        } catch (Throwable t) {
            Settings.off = true;
            Log.line("FAILED: could not install: " + t + "; the agent stays out of the way, the broker runs without KIP-1243");
        }
    }

    private static void install(Config cfg, Instrumentation inst) {
        ClassFileLocator locator = ClassFileLocator.ForClassLoader.ofSystemLoader();
        TypePool pool = TypePool.Default.of(locator);
        List<Hook> hooks = hooks();
        List<String> missing = new ArrayList<>();
        for (Hook h : hooks) {
            if (!h.present(pool)) {
                missing.add(h.toString());
            }
        }
        for (String extra : cfg.requiredHooks) {
            int i = extra.indexOf('#');
            Hook h = new Hook(extra.substring(0, i), extra.substring(i + 1), null, (String[]) null);
            if (!h.present(pool)) {
                missing.add(h.toString());
            }
        }
        if (!missing.isEmpty()) {
            Log.line("FAILED: this Kafka lacks the methods the agent hooks: " + String.join("; ", missing)
                + "; the agent stays out of the way, the broker runs without KIP-1243");
            return;
        }
        Settings.cfg = cfg;

        Map<String, List<Hook>> byType = new LinkedHashMap<>();
        for (Hook h : hooks) {
            byType.computeIfAbsent(h.type, k -> new ArrayList<>()).add(h);
        }
        Set<String> done = ConcurrentHashMap.newKeySet();
        AgentBuilder builder = new AgentBuilder.Default()
            .disableClassFormatChanges()
            .with(AgentBuilder.RedefinitionStrategy.RETRANSFORMATION)
            .with(new AgentBuilder.Listener.Adapter() {
                @Override
                public void onTransformation(TypeDescription type, ClassLoader loader, JavaModule module, boolean loaded, DynamicType dynamicType) {
                    if (done.add(type.getName())) {
                        Log.line("instrumented " + type.getName());
                    }
                }

                @Override
                public void onError(String typeName, ClassLoader loader, JavaModule module, boolean loaded, Throwable t) {
                    if (byType.containsKey(typeName)) {
                        Settings.off = true;
                        Log.line("FAILED: could not instrument " + typeName + ": " + t
                            + "; the agent stays out of the way, the broker runs without KIP-1243");
                    }
                }
            });
        for (Map.Entry<String, List<Hook>> e : byType.entrySet()) {
            List<Hook> hs = e.getValue();
            builder = builder.type(named(e.getKey())).transform((b, type, loader, module, pd) -> {
                for (Hook h : hs) {
                    TypeDescription advice = pool.describe(h.advice).resolve();
                    b = b.visit(Advice.to(advice, locator).on(h.matcher()));
                }
                return b;
            });
        }
        builder.installOn(inst);
        List<String> names = new ArrayList<>();
        for (Hook h : hooks) {
            names.add(h.toString());
        }
        Log.line("READY (" + cfg + "); hooks: " + String.join("; ", names));
    }
}
