package observability_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kotel"
	"github.com/twmb/franz-go/plugin/kprom"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/producer"
)

// observed is a factory with kprom and kotel installed, and what they
// report to.
type observed struct {
	f       *factory.Factory
	reg     *prometheus.Registry
	spans   *tracetest.SpanRecorder
	tracer  trace.Tracer
	metrics *sdkmetric.ManualReader
}

func newObserved(addrs []string) (*observed, error) {
	o := &observed{
		reg:     prometheus.NewRegistry(),
		spans:   tracetest.NewSpanRecorder(),
		metrics: sdkmetric.NewManualReader(),
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	o.tracer = tp.Tracer("app")
	// One kotel for every client: its hooks keep no per-client state.
	otel := kotel.NewKotel(
		kotel.WithTracer(kotel.NewTracer(kotel.TracerProvider(tp), kotel.TracerPropagator(propagation.TraceContext{}))),
		kotel.WithMeter(kotel.NewMeter(kotel.MeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.metrics))))),
	)
	f, err := factory.New(factory.BootstrapServers(addrs...),
		factory.AutoOffsetReset(factory.ResetEarliest),
		factory.Hooks(factory.AllRoles, otel.Hooks()...),
		// kprom registers its metrics when installed on a client and
		// panics if one instance is installed twice (franz-go issue
		// #1068): one per client, told apart by labels.
		factory.HooksPerClient(func(c factory.ClientInfo) []kgo.Hook {
			return []kgo.Hook{kprom.NewMetrics("kafka",
				kprom.Registry(o.reg),
				kprom.FetchAndProduceDetail(kprom.ByTopic, kprom.Records),
				kprom.WithStaticLabel(prometheus.Labels{"role": c.Role.String(), "client": strconv.FormatUint(c.ID, 10)}))}
		}),
	)
	if err != nil {
		return nil, err
	}
	o.f = f
	return o, nil
}

// counter sums the Prometheus counter name over the clients of role.
func (o *observed) counter(name, role string) (float64, error) {
	families, err := o.reg.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
		for _, m := range fam.GetMetric() {
			if label(m, "role") == role {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum, nil
}

// counterReaches returns counter name of role once it reaches want, or
// what it holds when ctx ends: kprom counts a produce in franz-go's
// OnProduceBatchWritten hook, which runs on a goroutine of its own after
// the answer, so the count may trail the Produce calls for a moment.
func (o *observed) counterReaches(ctx context.Context, name, role string, want float64) (float64, error) {
	for {
		n, err := o.counter(name, role)
		if err != nil || n >= want {
			return n, err
		}
		select {
		case <-ctx.Done():
			return n, nil
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// roundTrip produces n records from two producers under a span of the
// application's and reads them back. It returns the span, the records and
// a function that closes the clients: kprom unregisters a client's metrics
// when it closes.
func (o *observed) roundTrip(ctx context.Context, topic string, n int) (trace.SpanContext, []consumer.Record[string, string], func(), error) {
	ctx, span := o.tracer.Start(ctx, "handle request")
	defer span.End()
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	fail := func(err error) (trace.SpanContext, []consumer.Record[string, string], func(), error) {
		closeAll()
		return span.SpanContext(), nil, nil, err
	}
	for i := range 2 {
		p, err := factory.NewProducer(o.f, producer.String(), producer.String())
		if err != nil {
			return fail(err)
		}
		closers = append(closers, func() { _ = p.Close(context.Background()) })
		for j := range n / 2 {
			if _, err := p.Produce(ctx, producer.Record[string, string]{Topic: topic, Value: fmt.Sprint(i, j)}); err != nil {
				return fail(err)
			}
		}
	}
	c, err := factory.NewConsumer(o.f, consumer.String(), consumer.String(), factory.ConsumeTopics(topic))
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { _ = c.Close(context.Background()) })
	var got []consumer.Record[string, string]
	for len(got) < n {
		recs, err := c.Poll(ctx, 0)
		if err != nil {
			return fail(err)
		}
		got = append(got, recs...)
	}
	return span.SpanContext(), got, closeAll, nil
}

// Example: kprom and kotel on every client of a factory. Each franz-go
// client gets its own kprom instance (a shared one would panic): the two
// producers share one client, the consumer has another; the trace the
// application started goes through the records to the consumer.
func Example() {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		panic(err)
	}
	defer kc.Close()
	o, err := newObserved(kc.ListenAddrs())
	if err != nil {
		panic(err)
	}
	defer o.f.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, recs, closeClients, err := o.roundTrip(ctx, "orders", 4)
	if err != nil {
		panic(err)
	}
	defer closeClients()
	produced, _ := o.counterReaches(ctx, "kafka_produce_records_total", "producer", 4)
	fetched, _ := o.counterReaches(ctx, "kafka_fetch_records_total", "consumer", 4)
	fmt.Println("kprom: produced", produced, "fetched", fetched)
	sameTrace := 0
	for _, r := range recs {
		if trace.SpanContextFromContext(r.Context).TraceID() == parent.TraceID() {
			sameTrace++
		}
	}
	fmt.Println("kotel: consumed records in the application's trace:", sameTrace, "of", len(recs))
	// Output:
	// kprom: produced 4 fetched 4
	// kotel: consumed records in the application's trace: 4 of 4
}

// TestObservability: kprom counts per role, kotel makes publish and receive
// spans in the caller's trace and records metrics, and no kprom instance
// is installed twice.
func TestObservability(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	o, err := newObserved(kc.ListenAddrs())
	require.NoError(t, err)
	t.Cleanup(func() { _ = o.f.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)

	adm, err := o.f.Admin()
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "created")
	require.NoError(t, err)
	adm.Close(context.Background())

	parent, recs, closeClients, err := o.roundTrip(ctx, "t", 6)
	require.NoError(t, err)
	require.Len(t, recs, 6)

	for role, name := range map[string]string{
		"producer": "kafka_produce_records_total",
		"consumer": "kafka_fetch_records_total",
	} {
		n, err := o.counterReaches(ctx, name, role, 6)
		require.NoError(t, err)
		require.Equal(t, 6.0, n, "%s of %s clients", name, role)
	}
	families, err := o.reg.Gather()
	require.NoError(t, err)
	clients := map[string]bool{}
	for _, fam := range families {
		if fam.GetName() == "kafka_produce_records_total" {
			for _, m := range fam.GetMetric() {
				clients[label(m, "client")] = true
			}
		}
	}
	require.Len(t, clients, 1, "the two producers share one client, hence one kprom instance")
	// Closed clients unregister their kprom metrics.
	closeClients()
	n, err := o.counter("kafka_produce_records_total", "producer")
	require.NoError(t, err)
	require.Zero(t, n)

	var publish, receive int
	for _, s := range o.spans.Ended() {
		switch s.Name() {
		case "t publish":
			publish++
			require.Equal(t, parent.SpanID(), s.Parent().SpanID(), "publish spans are children of the caller's")
		case "t receive":
			receive++
			require.Equal(t, parent.TraceID(), s.SpanContext().TraceID(), "receive spans continue the producer's trace")
		}
	}
	require.Equal(t, 6, publish)
	for _, r := range recs {
		require.Equal(t, parent.TraceID(), trace.SpanContextFromContext(r.Context).TraceID())
	}
	require.Equal(t, 6, receive)

	var rm metricdata.ResourceMetrics
	require.NoError(t, o.metrics.Collect(ctx, &rm))
	names := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names[m.Name] = true
		}
	}
	require.True(t, names["messaging.kafka.produce_records.count"], "kotel metrics: %v", names)
}
