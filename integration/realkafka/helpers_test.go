package realkafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
)

func ptr[T any](v T) *T { return &v }

// matrixVersions returns the Apache Kafka releases the tests meant for
// several run on: kafkatest.MatrixVersions, from KCONSIST_KAFKA_VERSIONS.
func matrixVersions(t *testing.T) []string {
	t.Helper()
	vs, err := kafkatest.MatrixVersions()
	require.NoError(t, err)
	return vs
}

// stamp is the KIP-1243 ConsistencyState (header tag 0) of one frame.
type stamp struct {
	clusterID string
	token     int64
}

// wireLog decodes, independently of the SDK's own codec, the frames a
// kafkatest.Forwarder sees for one client id: request header tag 0 (the
// consistency stamp), response header tag 0 (a token from the broker),
// the KIP-1242 ApiVersions exchange, and where Produce requests went.
type wireLog struct {
	clientID string

	mu         sync.Mutex
	conns      map[uint64]bool // forwarder connections of clientID
	requests   map[int16]int   // by API key
	stamped    map[int16]int   // requests carrying tag 0, by API key
	stamps     map[stamp]int   // what the stamps said
	respTokens int             // responses carrying tag 0
	apiV       []apiVersions   // ApiVersions requests, with the answer when seen
	pendingAV  map[[2]uint64]int
	produceTo  map[string]int // Produce requests by forwarder target
	decodeErrs []error
}

type apiVersions struct {
	target    string
	version   int16
	clusterID *string
	nodeID    int32
	answered  bool
	errorCode int16
}

func newWireLog(clientID string) *wireLog {
	return &wireLog{
		clientID: clientID, conns: map[uint64]bool{},
		requests: map[int16]int{}, stamped: map[int16]int{}, stamps: map[stamp]int{},
		pendingAV: map[[2]uint64]int{}, produceTo: map[string]int{},
	}
}

func (l *wireLog) observe(fr kafkatest.Frame) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if fr.Request {
		if fr.ClientID != l.clientID {
			return
		}
		l.conns[fr.Conn] = true
		l.request(fr)
		return
	}
	if l.conns[fr.Conn] {
		l.response(fr)
	}
}

func (l *wireLog) fail(err error) { l.decodeErrs = append(l.decodeErrs, err) }

func (l *wireLog) request(fr kafkatest.Frame) {
	l.requests[fr.Key]++
	if fr.Key == 0 {
		l.produceTo[fr.Target]++
	}
	req := kmsg.RequestForKey(fr.Key)
	if req == nil {
		l.fail(fmt.Errorf("request with unknown key %d", fr.Key))
		return
	}
	req.SetVersion(fr.Version)
	// Request header: key, version, correlation id, client id, then
	// tagged fields when the request is flexible (header v2).
	b := kbin.Reader{Src: fr.Body}
	b.Int16()
	b.Int16()
	b.Int32()
	b.NullableString()
	if req.IsFlexible() {
		if st, ok, err := headerTag0(&b); err != nil {
			l.fail(fmt.Errorf("request key %d v%d: %w", fr.Key, fr.Version, err))
		} else if ok {
			l.stamped[fr.Key]++
			l.stamps[st]++
		}
	}
	if fr.Key == 18 {
		r, err := fr.ApiVersionsRequest()
		if err != nil {
			l.fail(err)
			return
		}
		l.apiV = append(l.apiV, apiVersions{target: fr.Target, version: fr.Version, clusterID: r.ClusterID, nodeID: r.NodeID})
		l.pendingAV[[2]uint64{fr.Conn, uint64(uint32(fr.CorrelationID))}] = len(l.apiV) - 1
	}
}

func (l *wireLog) response(fr kafkatest.Frame) {
	if fr.Key < 0 {
		return
	}
	if fr.Key == 18 {
		// ApiVersions answers with response header v0 (no tags).
		k := [2]uint64{fr.Conn, uint64(uint32(fr.CorrelationID))}
		i, ok := l.pendingAV[k]
		if !ok {
			return
		}
		delete(l.pendingAV, k)
		r, err := fr.ApiVersionsResponse()
		if err != nil {
			l.fail(err)
			return
		}
		l.apiV[i].answered, l.apiV[i].errorCode = true, r.ErrorCode
		return
	}
	req := kmsg.RequestForKey(fr.Key)
	req.SetVersion(fr.Version)
	if !req.IsFlexible() {
		return
	}
	b := kbin.Reader{Src: fr.Body}
	b.Int32() // correlation id; then the tags of response header v1
	if _, ok, err := headerTag0(&b); err != nil {
		l.fail(fmt.Errorf("response key %d v%d: %w", fr.Key, fr.Version, err))
	} else if ok {
		l.respTokens++
	}
}

// headerTag0 reads the tagged fields of a header and returns tag 0 decoded
// as KIP-1243's ConsistencyState {ClusterId: compact nullable string,
// ConsistencyToken: int64, tagged fields}.
func headerTag0(b *kbin.Reader) (stamp, bool, error) {
	var (
		st    stamp
		found bool
	)
	n := b.Uvarint()
	for range n {
		tag, size := b.Uvarint(), b.Uvarint()
		data := b.Span(int(size))
		if tag != 0 {
			continue
		}
		r := kbin.Reader{Src: data}
		if id := r.CompactNullableString(); id != nil {
			st.clusterID = *id
		}
		st.token = r.Int64()
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return st, false, fmt.Errorf("tag 0: %w", err)
		}
		found = true
	}
	if !b.Ok() {
		return st, false, fmt.Errorf("header tags: %w", kbin.ErrNotEnoughData)
	}
	return st, found, nil
}

type wireSnapshot struct {
	requests, stamped map[int16]int
	stamps            map[stamp]int
	respTokens        int
	apiV              []apiVersions
	produceTo         map[string]int
	decodeErrs        []error
}

func (l *wireLog) snapshot() wireSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	clone := func(m map[int16]int) map[int16]int {
		c := make(map[int16]int, len(m))
		for k, v := range m {
			c[k] = v
		}
		return c
	}
	s := wireSnapshot{
		requests: clone(l.requests), stamped: clone(l.stamped), stamps: map[stamp]int{},
		respTokens: l.respTokens, apiV: slices.Clone(l.apiV), produceTo: map[string]int{},
		decodeErrs: slices.Clone(l.decodeErrs),
	}
	for k, v := range l.stamps {
		s.stamps[k] = v
	}
	for k, v := range l.produceTo {
		s.produceTo[k] = v
	}
	return s
}

func sum(m map[int16]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// rejected returns the ApiVersions v5 requests that named a cluster and
// were answered REBOOTSTRAP_REQUIRED, as "target cluster/node".
func (s wireSnapshot) rejected() []string {
	var out []string
	for _, av := range s.apiV {
		if av.answered && av.errorCode == kerr.RebootstrapRequired.Code && av.clusterID != nil {
			out = append(out, fmt.Sprintf("%s %s/%d", av.target, *av.clusterID, av.nodeID))
		}
	}
	return out
}

// events records the factory's events.
type events struct {
	mu  sync.Mutex
	all []factory.Event
}

func (e *events) OnEvent(ev factory.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) kinds() map[factory.EventKind]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[factory.EventKind]int{}
	for _, ev := range e.all {
		m[ev.Kind]++
	}
	return m
}

func (e *events) list() []factory.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.all)
}

// plainClient is a franz-go client (no SDK) that reaches c's nodes directly.
func plainClient(t *testing.T, c *kafkatest.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.BootstrapAddrs()...), c.DirectDial()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// readValues reads every record of topic in c with a plain client, past
// any forwarder, and counts each value.
func readValues(ctx context.Context, t *testing.T, c *kafkatest.Cluster, topic string) map[string]int {
	t.Helper()
	adm := kadm.NewClient(plainClient(t, c))
	ends, err := adm.ListEndOffsets(ctx, topic)
	require.NoError(t, err)
	require.NoError(t, ends.Error())
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	got := map[string]int{}
	if want == 0 {
		return got
	}
	cl := plainClient(t, c, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var n int64
	for n < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records of %s", n, want, topic)
		fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			n++
		})
	}
	return got
}

// await waits for ch to deliver n values (or fails after d) and returns them.
func await[T any](t *testing.T, ch <-chan T, n int, d time.Duration, what string) []T {
	t.Helper()
	out := make([]T, 0, n)
	deadline := time.After(d)
	for len(out) < n {
		select {
		case v := <-ch:
			out = append(out, v)
		case <-deadline:
			t.Fatalf("timed out after %v: %s (%d of %d)", d, what, len(out), n)
		}
	}
	return out
}

// kgoNotes is a slog handler for factory.Logger that keeps what franz-go
// says about producer ids, sequence numbers and data loss (and every
// error), to explain a failure of the producer checks.
type kgoNotes struct {
	mu    sync.Mutex
	lines []string
}

func (n *kgoNotes) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (n *kgoNotes) WithAttrs([]slog.Attr) slog.Handler           { return n }
func (n *kgoNotes) WithGroup(string) slog.Handler                { return n }
func (n *kgoNotes) Handle(_ context.Context, r slog.Record) error {
	msg := strings.ToLower(r.Message)
	if r.Level < slog.LevelError && !strings.Contains(msg, "producer id") && !strings.Contains(msg, "sequence") &&
		!strings.Contains(msg, "data loss") && !strings.Contains(msg, "duplicate") {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	n.mu.Lock()
	n.lines = append(n.lines, b.String())
	n.mu.Unlock()
	return nil
}

func (n *kgoNotes) snapshot() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.lines)
}

// firstError keeps the first of the errors reported to it.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
