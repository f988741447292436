package realkafka

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/internal/wire"
	"github.com/kconsist/kconsist/producer"
)

// oldKafka is the release TestAddressSwitchBefore44 switches addresses on:
// one that answers ApiVersions up to v4, so that the KIP-1242 check cannot
// run.
const oldKafka = "4.0.0"

// TestAddressSwitchBefore44 switches, for real, the address of a Kafka 4.0
// node to another Kafka 4.0 cluster under a factory producer with the
// default options (cluster check on), as testKIP1242 does on 4.4: two
// single-node clusters A and B, A advertises node 1 at a forwarder, the
// factory's seed is A's own listener, both clusters have the topic. While
// records are produced every 100 ms, the forwarder is switched to B for
// 3 s, then back to A, and 5 more records are produced. Records are
// counted on each cluster with plain franz-go clients, past the forwarder.
// It does so twice, on new topics and factories: B-behind, with A's
// metadata log 50 offsets beyond B's, and B-ahead, the other way round
// (topics are created to get there).
//
// What is asserted, because the SDK promises it on 4.0: the factory says
// once that the check is off, one EventClusterCheckOff (Err names A's
// broker and "ApiVersions up to v4; KIP-1242 needs v5") and one warning
// with the same reason. No record is lost: every acknowledged record is
// in A or B, none is twice in one cluster; and only the records of a
// Produce to B still in flight at the switch back may be in both.
//
// What happens (measured, logged, not asserted; 2 cores under load): on
// each new connection franz-go first sends ApiVersions v5 naming A's
// cluster and node 1; Kafka 4.0 answers UNSUPPORTED_VERSION, A and B
// alike, and the v4 retry names no cluster, so B serves the connection.
// Produce v12 names topics by name and B's partition takes the producer
// id's next sequence though it never saw the id, so records produced
// during the switch are written to B and acknowledged. How many depends
// on the metadata offsets, not on a check:
//
//   - B-ahead: 30 of the 30 records produced during the switch land on B
//     (6 runs of 6).
//   - B-behind: the emulated token (A's metadata offset) is beyond what B
//     has applied, so the emulation holds each Produce to B about 1 s, as
//     to a broker behind the token ("broker stayed behind the consistency
//     token"), then sends it anyway: one record a second lands on B, 2 or
//     3 of 30 (a 10 s switch, tried by hand: 40 of 99). The rest wait in
//     franz-go's buffer and reach A after the switch back.
//   - After the switch back A answers OUT_OF_ORDER_SEQUENCE_NUMBER, and
//     franz-go bumps the producer epoch and sends again. A Produce that B
//     wrote but whose answer the switch back cut off is sent again to A:
//     its record is in both clusters (B-behind, 2 runs of 6: "during-2",
//     the held request going out just as the switch back comes).
//
// Before each switch the test waits until the factory's token is A's
// (reading metadata through the factory's admin client). Without that
// wait, on a busy machine the switch once came before the first token: a
// Metadata answer from B then gave the empty store a token of cluster B
// (B@149; an EventTokenAdvanced, nothing else), which it kept after the
// switch back, and requests to A waited as behind it ("broker stayed
// behind", Metadata and Produce) until A's metadata log passed B's
// offset: 28 s instead of 4.
//
// Nothing else is reported (6 runs of 6): no EventClusterChanged (the
// seed still answers as A), no EventMisroute, no rebootstrap, though in
// B-behind B answers 2 Metadata requests. The control on 4.4 (testKIP1242
// with the check on, as in TestSingleNodeClusters, on two new 4.4
// clusters) puts 0 records on B.
//
// It takes 15 to 25 s with the control (up to 50 s on a busy machine), so
// it runs by default. Where KCONSIST_KAFKA_VERSIONS is set it runs where
// that includes 4.0.0 or is "all", and the control where it includes
// 4.4.0 or is "all":
//
//	KCONSIST_KAFKA_VERSIONS=all go test -race -count=1 -run TestAddressSwitchBefore44 -v ./integration/realkafka/
func TestAddressSwitchBefore44(t *testing.T) {
	old, control := addressSwitchVersions(t)
	if !old {
		t.Skipf("%s=%q does not include %s", kafkatest.VersionsEnv, os.Getenv(kafkatest.VersionsEnv), oldKafka)
	}
	t0 := time.Now()
	fwd, err := kafkatest.NewForwarder("")
	require.NoError(t, err)
	t.Cleanup(func() { fwd.Close() })
	a := kafkatest.Start(t, kafkatest.Version(oldKafka), kafkatest.AdvertisedAddr(1, fwd.Addr()))
	b := kafkatest.Start(t, kafkatest.Version(oldKafka))
	require.NotEqual(t, a.ClusterID(), b.ClusterID())
	aAddr, err := a.ListenerAddr(1)
	require.NoError(t, err)
	bAddr, err := b.ListenerAddr(1)
	require.NoError(t, err)
	fwd.SetTarget(aAddr)
	t.Logf("Kafka %s clusters A (%s) and B (%s) ready in %v", oldKafka, a.ClusterID(), b.ClusterID(), time.Since(t0).Round(time.Millisecond))

	// From the outside: ApiVersions v4 cannot carry KIP-1242's cluster id.
	ctx := testkit.CtxFor(t, 5*time.Minute)
	maxV := maxVersions(ctx, t, a)
	t.Logf("Kafka %s serves ApiVersions up to v%d, Produce up to v%d, Fetch up to v%d", oldKafka, maxV[18], maxV[0], maxV[1])
	require.Equal(t, int16(4), maxV[18], "Kafka %s answers ApiVersions up to v4", oldKafka)

	env := &switchEnv{a: a, b: b, fwd: fwd, aAddr: aAddr, bAddr: bAddr}
	onB := map[string]int{}
	for _, bAhead := range []bool{false, true} {
		name := map[bool]string{false: "B-behind", true: "B-ahead"}[bAhead]
		t.Run(name, func(t *testing.T) {
			t0 := time.Now()
			fwd.SetTarget(aAddr)
			onB[name] = env.run(t, name, bAhead)
			t.Logf("%s: %v", name, time.Since(t0).Round(time.Millisecond))
		})
	}
	t.Logf("Kafka %s: records produced during the switch that landed on B: %v", oldKafka, onB)

	if !control {
		return
	}
	t.Run("control-"+kafkatest.KafkaVersion, func(t *testing.T) {
		t0 := time.Now()
		fwd, err := kafkatest.NewForwarder("")
		require.NoError(t, err)
		t.Cleanup(func() { fwd.Close() })
		a := kafkatest.Start(t, kafkatest.AdvertisedAddr(1, fwd.Addr()))
		b := kafkatest.Start(t)
		aAddr, err := a.ListenerAddr(1)
		require.NoError(t, err)
		bAddr, err := b.ListenerAddr(1)
		require.NoError(t, err)
		fwd.SetTarget(aAddr)
		testKIP1242(t, a, b, fwd, aAddr, bAddr, true) // asserts that no record reaches B
		t.Logf("Kafka %s: 0 records on B; %v", kafkatest.KafkaVersion, time.Since(t0).Round(time.Millisecond))
	})
}

// addressSwitchVersions reports whether TestAddressSwitchBefore44 runs on
// oldKafka, and its control on kafkatest.KafkaVersion: both without
// KCONSIST_KAFKA_VERSIONS (the test is cheap); with it, each where the
// releases it names include it.
func addressSwitchVersions(t *testing.T) (old, control bool) {
	t.Helper()
	vs := matrixVersions(t)
	if strings.TrimSpace(os.Getenv(kafkatest.VersionsEnv)) == "" {
		return true, true
	}
	return slices.Contains(vs, oldKafka), slices.Contains(vs, kafkatest.KafkaVersion)
}

// switchEnv is the two clusters of TestAddressSwitchBefore44 and the
// forwarder A's node is advertised at.
type switchEnv struct {
	a, b         *kafkatest.Cluster
	fwd          *kafkatest.Forwarder
	aAddr, bAddr string
}

// run puts one cluster's metadata log ahead of the other's (B's when
// bAhead), then produces through a new factory before, during and after
// a 3 s switch of the forwarder to B. It returns how many records landed
// on B.
func (e *switchEnv) run(t *testing.T, name string, bAhead bool) int {
	ctx := testkit.CtxFor(t, 3*time.Minute)
	topic, clientID := "kip1242-old-"+name, "kip1242-old-"+name
	const before, after, margin = 5, 5, 50
	const switchFor, every = 3 * time.Second, 100 * time.Millisecond

	for _, c := range []*kafkatest.Cluster{e.a, e.b} {
		resp, err := kadm.NewClient(plainClient(t, c)).CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
	}
	ahead, behind := e.a, e.b
	if bAhead {
		ahead, behind = e.b, e.a
	}
	aheadAt, behindAt, pads := lead(ctx, t, ahead, behind, margin, name)
	t.Logf("metadata offsets: %s applied %d (%d topics created to get there), the other committed %d",
		map[bool]string{false: "A", true: "B"}[bAhead], aheadAt, pads, behindAt)

	wl := newWireLog(clientID)
	sl := newSwitchLog(clientID, e)
	e.fwd.Observe(func(fr kafkatest.Frame) {
		wl.observe(fr)
		sl.observe(fr)
	})
	defer e.fwd.Observe(nil)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("timeline of Produce through the forwarder:\n%s", strings.Join(sl.timeline(), "\n"))
		}
	})
	ev := &events{}
	logs := &logLines{}
	f, err := factory.New(factory.BootstrapServers(e.aAddr), factory.ClientID(clientID),
		factory.RetryBackoff(50*time.Millisecond), factory.WithObserver(ev), factory.Logger(slog.New(logs)))
	require.NoError(t, err)
	defer f.Close(context.Background())
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer closeProducer(p)

	var mu sync.Mutex
	outcome := map[string]error{}
	completed := make(chan struct{}, 1024)
	produce := func(v string) {
		require.NoError(t, p.ProduceAsync(ctx, producer.Record[string, string]{Topic: topic, Value: v},
			func(_ producer.Result, err error) {
				mu.Lock()
				outcome[v] = err
				mu.Unlock()
				completed <- struct{}{}
			}))
	}

	for i := range before {
		v := fmt.Sprintf("before-%d", i)
		_, err := p.Produce(ctx, producer.Record[string, string]{Topic: topic, Value: v})
		require.NoError(t, err)
		mu.Lock()
		outcome[v] = nil
		mu.Unlock()
	}
	require.Positive(t, wl.snapshot().produceTo[e.aAddr], "produce went to A's node through the forwarder")
	// The emulation learns its first token from a metadata read after it
	// verified the cluster, in the background: on a busy machine that can
	// come after the records above. Read metadata until the token is A's,
	// so that what the switch meets is a factory that has one.
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	testkit.WaitFor(ctx, t, "the factory's token names A", func() bool {
		if f.Token().ClusterID() == e.a.ClusterID() {
			return true
		}
		_, err := adm.ListTopics(ctx, topic)
		require.NoError(t, err)
		return f.Token().ClusterID() == e.a.ClusterID()
	})
	token := f.Token()

	sl.mark("switch to B")
	e.fwd.SetTarget(e.bAddr) // the address of A's node 1 now reaches B's node 1
	during := 0
	for start := time.Now(); time.Since(start) < switchFor; during++ {
		produce(fmt.Sprintf("during-%d", during))
		time.Sleep(every)
	}
	sl.mark("switch back to A")
	back := time.Now()
	e.fwd.SetTarget(e.aAddr) // routing repaired
	for i := range after {
		produce(fmt.Sprintf("after-%d", i))
	}
	await(t, completed, during+after, 2*time.Minute, "every record produced during and after the switch completes")
	require.NoError(t, p.Flush(ctx))

	onA, onB := readValues(ctx, t, e.a, topic), readValues(ctx, t, e.b, topic)
	mu.Lock()
	defer mu.Unlock()
	var acked, failed []string
	for v, err := range outcome {
		if err == nil {
			acked = append(acked, v)
		} else {
			failed = append(failed, fmt.Sprintf("%s (on A %d, on B %d): %v", v, onA[v], onB[v], err))
		}
	}
	slices.Sort(failed)
	duringOnB := 0
	for v := range onB {
		if strings.HasPrefix(v, "during-") {
			duringOnB += onB[v]
		}
	}
	var onBoth []string
	for v := range onB {
		if onA[v] > 0 {
			onBoth = append(onBoth, v)
		}
	}
	slices.Sort(onBoth)
	ws := wl.snapshot()
	cut, cutRecords := sl.inFlight(e.bAddr, back)
	st := f.Stats()
	t.Logf("%d before, %d during, %d after the switch: %d acknowledged, %d failed %v", before, during, after, len(acked), len(failed), failed)
	t.Logf("on A %d records, on B %d (%d of the %d produced during the switch): %v", total(onA), total(onB), duringOnB, during, sortedKeys(onB))
	t.Logf("on both A and B: %v; Produce requests to B in flight at the switch back: %d (%d records)", onBoth, cut, cutRecords)
	t.Logf("requests through the forwarder: Produce %s, Metadata %s; ApiVersions %s",
		maps2str(ws.produceTo, e), maps2str(sl.metadataTargets(), e), apiVersionsSummary(ws.apiV, e))
	t.Logf("token before the switch %v, after %v (cluster %s); events %v; stats %+v", token, f.Token(), e.clusterName(f.Token().ClusterID()), ev.kinds(), st)
	for _, l := range logs.snapshot() {
		if l.level >= slog.LevelWarn {
			t.Logf("log %s", l)
		}
	}

	// Guaranteed: no loss. Every acknowledged record is in A or B; the
	// records acknowledged before the switch are in A; nothing else is
	// there. Within one cluster the idempotent producer writes no record
	// twice. Across the two it cannot tell: a Produce that B took and
	// whose answer the switch back cut off is retried on A (A answers
	// OUT_OF_ORDER_SEQUENCE_NUMBER, franz-go bumps the epoch and sends it
	// again), so the records of such requests may be on both; no other.
	require.Empty(t, ws.decodeErrs)
	for _, v := range acked {
		require.GreaterOrEqual(t, onA[v]+onB[v], 1, "acknowledged record %s is on A or B", v)
	}
	for _, m := range []map[string]int{onA, onB} {
		for v := range m {
			_, ok := outcome[v]
			require.True(t, ok, "record %s was produced by this test", v)
			require.LessOrEqual(t, onA[v], 1, "record %s is not twice on A", v)
			require.LessOrEqual(t, onB[v], 1, "record %s is not twice on B", v)
		}
	}
	require.LessOrEqual(t, len(onBoth), cutRecords,
		"only records of a Produce to B in flight at the switch back are on both clusters: %v", onBoth)
	for i := range before {
		require.Equal(t, 1, onA[fmt.Sprintf("before-%d", i)], "before-%d is on A", i)
	}

	// Guaranteed: the check is off, and the factory says so once, naming
	// the broker and its ApiVersions, as an event and a warning.
	testkit.WaitFor(ctx, t, "EventClusterCheckOff", func() bool { return ev.kinds()[factory.EventClusterCheckOff] > 0 })
	var off []factory.Event
	for _, x := range ev.list() {
		if x.Kind == factory.EventClusterCheckOff {
			off = append(off, x)
		}
	}
	require.Len(t, off, 1, "EventClusterCheckOff is sent once")
	reason := off[0].Err
	require.ErrorIs(t, reason, wire.ErrClusterCheckUnsupported)
	require.ErrorContains(t, reason, "ApiVersions up to v4")
	require.ErrorContains(t, reason, "KIP-1242 needs v5")
	require.True(t, strings.Contains(reason.Error(), e.aAddr) || strings.Contains(reason.Error(), e.fwd.Addr()),
		"the reason names a broker of A: %v", reason)
	var warned []logLine
	for _, l := range logs.snapshot() {
		if strings.Contains(l.text, "KIP-1242 cluster check is off") {
			warned = append(warned, l)
		}
	}
	require.Len(t, warned, 1, "one log line says the check is off")
	require.Equal(t, slog.LevelWarn, warned[0].level)
	require.Contains(t, warned[0].text, reason.Error(), "the warning gives the event's reason")
	t.Logf("EventClusterCheckOff: %v", reason)
	return duringOnB
}

// lead creates topics in ahead until the metadata offset its broker has
// applied (ApiVersions FinalizedFeaturesEpoch, what the emulation compares
// a token with) is at least margin beyond behind's committed offset (which
// bounds the token of a factory on behind, and what behind's broker has
// applied). A KRaft broker applies its log some way behind the committed
// end, so it waits for that too. It returns ahead's applied offset,
// behind's committed offset and how many topics it created.
func lead(ctx context.Context, t *testing.T, ahead, behind *kafkatest.Cluster, margin int64, prefix string) (aheadAt, behindAt int64, created int) {
	t.Helper()
	aheadCl, behindCl := plainClient(t, ahead), plainClient(t, behind)
	adm := kadm.NewClient(aheadCl)
	for {
		behindAt = committedOn(ctx, t, behindCl, behind.NodeIDs())
		resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, aheadCl)
		require.NoError(t, err)
		aheadAt = resp.FinalizedFeaturesEpoch
		if aheadAt >= behindAt+margin {
			return aheadAt, behindAt, created
		}
		if committedOn(ctx, t, aheadCl, ahead.NodeIDs()) >= behindAt+margin {
			time.Sleep(100 * time.Millisecond) // written; wait for the broker to apply it
			continue
		}
		var names []string
		for range 10 {
			names = append(names, fmt.Sprintf("pad-%s-%d", prefix, created))
			created++
		}
		res, err := adm.CreateTopics(ctx, 1, 1, nil, names...)
		require.NoError(t, err)
		require.NoError(t, res.Error())
	}
}

// maxVersions asks c's first node, with a plain client, the highest
// version of each request it serves.
func maxVersions(ctx context.Context, t *testing.T, c *kafkatest.Cluster) map[int16]int16 {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, plainClient(t, c))
	require.NoError(t, err)
	require.Zero(t, resp.ErrorCode)
	out := map[int16]int16{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = k.MaxVersion
	}
	return out
}

// switchLog follows, through the forwarder, the Produce requests of one
// client id (how many records each carried and whether its answer came
// back) and where its Metadata requests went, with a timeline.
type switchLog struct {
	clientID string
	env      *switchEnv
	t0       time.Time

	mu         sync.Mutex
	conns      map[uint64]bool
	produce    map[[2]uint64]*produceReq // by forwarder connection and correlation id
	metadataTo map[string]int
	lines      []string
}

type produceReq struct {
	target     string
	records    int
	answered   bool
	answeredAt time.Time
}

func newSwitchLog(clientID string, e *switchEnv) *switchLog {
	return &switchLog{clientID: clientID, env: e, t0: time.Now(), conns: map[uint64]bool{},
		produce: map[[2]uint64]*produceReq{}, metadataTo: map[string]int{}}
}

func (l *switchLog) line(format string, args ...any) {
	l.lines = append(l.lines, fmt.Sprintf("%8.3fs ", time.Since(l.t0).Seconds())+fmt.Sprintf(format, args...))
}

// mark adds an event of the test's to the timeline.
func (l *switchLog) mark(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.line("%s", what)
}

func (l *switchLog) observe(fr kafkatest.Frame) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]uint64{fr.Conn, uint64(uint32(fr.CorrelationID))}
	if !fr.Request {
		if r := l.produce[k]; r != nil && l.conns[fr.Conn] && fr.Key == 0 {
			r.answered, r.answeredAt = true, time.Now()
			l.line("conn %d %s: Produce %d answered", fr.Conn, l.env.name(r.target), fr.CorrelationID)
		}
		return
	}
	if fr.ClientID != l.clientID {
		return
	}
	l.conns[fr.Conn] = true
	switch fr.Key {
	case 3:
		l.metadataTo[fr.Target]++
	case 0:
		r := &produceReq{target: fr.Target, records: producedRecords(fr)}
		l.produce[k] = r
		l.line("conn %d %s: Produce %d v%d, %d records", fr.Conn, l.env.name(fr.Target), fr.CorrelationID, fr.Version, r.records)
	}
}

// producedRecords counts the records of a Produce request frame from its
// batch headers (-1 if it does not decode).
func producedRecords(fr kafkatest.Frame) int {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(fr.Version)
	b := kbin.Reader{Src: fr.Body}
	b.Int16() // key
	b.Int16() // version
	b.Int32() // correlation id
	b.NullableString()
	if req.IsFlexible() {
		kmsg.SkipTags(&b)
	}
	if !b.Ok() || req.ReadFrom(b.Src) != nil {
		return -1
	}
	n := 0
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			for rest := p.Records; len(rest) > 0; {
				var rb kmsg.RecordBatch
				if err := rb.ReadFrom(rest); err != nil {
					return -1
				}
				n += int(rb.NumRecords)
				rest = rest[min(len(rest), 12+int(rb.Length)):] // base offset and length, then Length bytes
			}
		}
	}
	return n
}

// inFlight returns the Produce requests to target that were in flight
// when the forwarder switched away from it at back, and how many records
// they carried: those never answered, and (as the forwarder shows an
// answer just before passing it on, which the switch may cut off) those
// answered less than 100 ms before back.
func (l *switchLog) inFlight(target string, back time.Time) (requests, records int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.produce {
		if r.target == target && (!r.answered || r.answeredAt.After(back.Add(-100*time.Millisecond))) {
			requests++
			records += r.records
		}
	}
	return requests, records
}

func (l *switchLog) metadataTargets() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.metadataTo)
}

func (l *switchLog) timeline() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// clusterName says which of e's clusters id is.
func (e *switchEnv) clusterName(id string) string {
	switch id {
	case e.a.ClusterID():
		return "A"
	case e.b.ClusterID():
		return "B"
	}
	return fmt.Sprintf("%q", id)
}

// name says which of e's addresses addr is.
func (e *switchEnv) name(addr string) string {
	switch addr {
	case e.aAddr:
		return "A"
	case e.bAddr:
		return "B"
	}
	return addr
}

// maps2str shows counts by forwarder target as "A:n B:m".
func maps2str(m map[string]int, e *switchEnv) string {
	var parts []string
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s:%d", e.name(k), n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

// apiVersionsSummary counts ApiVersions exchanges through the forwarder by
// target, version, whether they named a cluster (and which) and the error
// code answered.
func apiVersionsSummary(avs []apiVersions, e *switchEnv) string {
	counts := map[string]int{}
	for _, av := range avs {
		named := "no cluster"
		if av.clusterID != nil {
			named = "naming " + *av.clusterID
			switch *av.clusterID {
			case e.a.ClusterID():
				named = "naming A"
			case e.b.ClusterID():
				named = "naming B"
			}
		}
		code := "unanswered"
		if av.answered {
			code = fmt.Sprintf("code %d", av.errorCode)
		}
		counts[fmt.Sprintf("to %s v%d %s: %s", e.name(av.target), av.version, named, code)]++
	}
	var out []string
	for k, n := range counts {
		out = append(out, fmt.Sprintf("%s ×%d", k, n))
	}
	slices.Sort(out)
	return "[" + strings.Join(out, "; ") + "]"
}

func total(m map[string]int) (n int) {
	for _, k := range m {
		n += k
	}
	return n
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// logLines is a slog handler that keeps every line from info up: level,
// message and attributes.
type logLines struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct {
	level slog.Level
	text  string
}

func (l logLine) String() string { return l.level.String() + " " + l.text }

func (l *logLines) Enabled(_ context.Context, lv slog.Level) bool { return lv >= slog.LevelInfo }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *logLines) WithGroup(string) slog.Handler                 { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	l.mu.Lock()
	l.lines = append(l.lines, logLine{r.Level, b.String()})
	l.mu.Unlock()
	return nil
}

func (l *logLines) snapshot() []logLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}
