package kafkatest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// apiVersionsLog keeps what the forwarder saw of ApiVersions and Produce.
type apiVersionsLog struct {
	mu        sync.Mutex
	rejected  []string       // "target clusterID/nodeID" of v5 requests answered REBOOTSTRAP_REQUIRED
	produceTo map[string]int // produce requests by target
	checked   map[int32]string
	decodeErr error
}

func (l *apiVersionsLog) observe(fr kafkatest.Frame) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case fr.Key == 0 && fr.Request:
		l.produceTo[fr.ClientID+" "+fr.Target]++
	case fr.Key == 18 && fr.Request:
		req, err := fr.ApiVersionsRequest()
		if err != nil {
			l.decodeErr = err
			return
		}
		if req.ClusterID != nil {
			l.checked[fr.CorrelationID] = fmt.Sprintf("%s %s/%d", fr.Target, *req.ClusterID, req.NodeID)
		}
	case fr.Key == 18:
		resp, err := fr.ApiVersionsResponse()
		if err != nil {
			l.decodeErr = err
			return
		}
		if what, ok := l.checked[fr.CorrelationID]; ok && resp.ErrorCode == kerr.RebootstrapRequired.Code {
			l.rejected = append(l.rejected, what)
		}
		delete(l.checked, fr.CorrelationID)
	}
}

func (l *apiVersionsLog) snapshot() (rejected []string, produceTo map[string]int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	produceTo = make(map[string]int)
	for k, v := range l.produceTo {
		produceTo[k] = v
	}
	return append([]string(nil), l.rejected...), produceTo, l.decodeErr
}

// warnLogger counts kgo's log lines that mention REBOOTSTRAP_REQUIRED.
type warnLogger struct{ rebootstraps atomic.Int64 }

func (*warnLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }
func (l *warnLogger) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if strings.Contains(msg, "REBOOTSTRAP_REQUIRED") {
		l.rebootstraps.Add(1)
	}
}

// TestKIP1242Misrouted reproduces a misrouted connection against real
// brokers. Cluster A advertises node 1 at a forwarder; the forwarder is then
// switched to cluster B, whose node 1 answers at the address the client
// learnt for A's node 1 (what an IP address reused by another cluster does).
// Kafka 4.4 must reject kgo's ApiVersions v5 with REBOOTSTRAP_REQUIRED, so no
// record meant for A lands in B; once the address is A's again, every record
// reaches A. A control client with the check off (ApiVersions capped at v4)
// shows that the same switch does put records into B.
func TestKIP1242Misrouted(t *testing.T) {
	t.Parallel()
	fwd, err := kafkatest.NewForwarder("")
	require.NoError(t, err)
	t.Cleanup(func() { fwd.Close() })
	log := &apiVersionsLog{produceTo: map[string]int{}, checked: map[int32]string{}}
	fwd.Observe(log.observe)

	a := kafkatest.Start(t, kafkatest.AdvertisedAddr(1, fwd.Addr()))
	b := kafkatest.Start(t)
	require.NotEqual(t, a.ClusterID(), b.ClusterID())
	aAddr, err := a.ListenerAddr(1)
	require.NoError(t, err)
	bAddr, err := b.ListenerAddr(1)
	require.NoError(t, err)
	fwd.SetTarget(aAddr)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, control = "misrouted", "misrouted-control"
	// Both clusters have both topics, so a misrouted produce would succeed.
	for _, c := range []*kafkatest.Cluster{a, b} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...), c.DirectDial())
		require.NoError(t, err)
		resps, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, topic, control)
		cl.Close()
		require.NoError(t, err)
		require.NoError(t, resps.Error())
	}

	// Seeds are A's real listener, so a rebootstrap goes back to A; only the
	// address learnt from Metadata goes through the forwarder.
	logger := &warnLogger{}
	var onRebootstrap atomic.Int64
	checked, err := kgo.NewClient(
		kgo.ClientID("checked"),
		kgo.SeedBrokers(a.BootstrapAddrs()...),
		kgo.WithLogger(logger),
		kgo.OnRebootstrapRequired(func() ([]string, error) {
			onRebootstrap.Add(1)
			return a.BootstrapAddrs(), nil
		}),
	)
	require.NoError(t, err)
	defer checked.Close()
	// The control client is an older client: no KIP-1242 check (ApiVersions
	// below v5) and Produce by topic name (below v13). With Produce v13 the
	// topic id alone makes B refuse with UNKNOWN_TOPIC_ID.
	noCheck := kversion.V4_4_0()
	noCheck.SetMaxKeyVersion(18, 4)
	noCheck.SetMaxKeyVersion(0, 12)
	unchecked, err := kgo.NewClient(kgo.ClientID("unchecked"), kgo.SeedBrokers(a.BootstrapAddrs()...), kgo.MaxVersions(noCheck))
	require.NoError(t, err)
	defer unchecked.Close()

	const before, during = 5, 5
	for i := range before {
		require.NoError(t, checked.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "before-%d", i)}).FirstErr())
	}
	require.NoError(t, unchecked.ProduceSync(ctx, &kgo.Record{Topic: control, Value: []byte("before")}).FirstErr())
	_, produceTo, _ := log.snapshot()
	require.Positive(t, produceTo["checked "+aAddr], "produce went through the forwarder to A")

	fwd.SetTarget(bAddr)

	var wg sync.WaitGroup
	var produceErrs atomic.Int64
	for i := range during {
		wg.Add(1)
		checked.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "during-%d", i)}, func(_ *kgo.Record, err error) {
			if err != nil {
				produceErrs.Add(1)
			}
			wg.Done()
		})
	}
	// Await the broker's answer rather than a guess of how long it takes.
	require.Eventually(t, func() bool {
		rejected, _, _ := log.snapshot()
		return len(rejected) > 0 && onRebootstrap.Load() > 0
	}, time.Minute, 20*time.Millisecond, "B answers REBOOTSTRAP_REQUIRED to kgo's ApiVersions v5")
	rejected, _, decodeErr := log.snapshot()
	require.NoError(t, decodeErr)
	require.Equal(t, fmt.Sprintf("%s %s/1", bAddr, a.ClusterID()), rejected[0], "B rejected a client that named A's cluster id and node 1")
	require.Positive(t, logger.rebootstraps.Load(), "kgo logged the rebootstrap")

	// The control client has the check off: the same switch sends its
	// records to B.
	for i := range during {
		require.NoError(t, unchecked.ProduceSync(ctx, &kgo.Record{Topic: control, Value: fmt.Appendf(nil, "during-%d", i)}).FirstErr())
	}
	bCount, err := b.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Zero(t, bCount, "no checked record reached B while the address pointed at B")
	// DirectDial reaches A past the forwarder, which still points at B.
	aCount, err := a.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, int64(before), aCount, "the records of the switch are not in A yet")

	fwd.SetTarget(aAddr)
	waitGroup(t, &wg, time.Minute, "records produced during the switch are delivered once the address is A's again")
	require.Zero(t, produceErrs.Load(), "no produce failed")

	aCount, err = a.CountRecords(ctx, topic)
	require.NoError(t, err)
	bCount, err = b.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, int64(before+during), aCount, "every record of the checked client is in A")
	require.Zero(t, bCount, "none is in B")
	_, produceTo, _ = log.snapshot()
	require.Zero(t, produceTo["checked "+bAddr], "the checked client never sent a Produce to B")
	require.Positive(t, produceTo["unchecked "+bAddr], "the control client did")

	rejected, produceTo, _ = log.snapshot()
	t.Logf("ApiVersions v5 rejections seen: %d (first: %s); OnRebootstrapRequired calls: %d; produce requests by client and target: %v",
		len(rejected), rejected[0], onRebootstrap.Load(), produceTo)

	aCtl, err := a.CountRecords(ctx, control)
	require.NoError(t, err)
	bCtl, err := b.CountRecords(ctx, control)
	require.NoError(t, err)
	require.Equal(t, int64(1), aCtl, "control: only the record before the switch is in A")
	require.Equal(t, int64(during), bCtl, "control: without the check the records went to B")
}

func waitGroup(t *testing.T, wg *sync.WaitGroup, timeout time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		t.Fatalf("timed out after %v: %s", timeout, what)
	}
}
