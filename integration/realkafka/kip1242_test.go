package realkafka

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// testKIP1242 misroutes a factory producer for real. The factory's seed is
// A's own listener; A advertises its node at the forwarder, so the factory
// reaches node 1 through it. Switching the forwarder to B is what an
// address reused by another cluster does: the address the clients learnt
// for A's node 1 now reaches B's node 1, where a topic of the same name
// exists.
//
// With the check on (the default), franz-go sends ApiVersions v5 naming
// A's cluster and node 1 on every new connection to node 1, B answers
// REBOOTSTRAP_REQUIRED, the factory rebootstraps from its seed (A), and
// nothing is written to B; once the address is A's again the records
// produced meanwhile reach A, exactly once. With the check off nobody asks
// B who it is: see the comments below for what happens then.
func testKIP1242(t *testing.T, a, b *kafkatest.Cluster, fwd *kafkatest.Forwarder, aAddr, bAddr string, check bool) {
	ctx := testkit.CtxFor(t, 2*time.Minute)
	name := map[bool]string{true: "on", false: "off"}[check]
	topic, clientID := "kip1242-"+name, "kip1242-"+name
	const before, during = 5, 5

	// Both clusters have the topic, so a misrouted write could succeed.
	for _, c := range []*kafkatest.Cluster{a, b} {
		resp, err := kadm.NewClient(plainClient(t, c)).CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
	}

	wl := newWireLog(clientID)
	fwd.Observe(wl.observe)
	defer fwd.Observe(nil)
	ev := &events{}
	f, err := factory.New(factory.BootstrapServers(aAddr), factory.ClientID(clientID),
		factory.ClusterCheck(check), factory.RetryBackoff(50*time.Millisecond), factory.WithObserver(ev))
	require.NoError(t, err)
	defer f.Close(context.Background())
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer closeProducer(p)

	for i := range before {
		_, err := p.Produce(ctx, producer.Record[string, string]{Topic: topic, Value: fmt.Sprintf("before-%d", i)})
		require.NoError(t, err)
	}
	require.Positive(t, wl.snapshot().produceTo[aAddr], "produce went to A's node through the forwarder")

	fwd.SetTarget(bAddr) // the address of A's node 1 now reaches B's node 1
	done := make(chan error, during)
	for i := range during {
		require.NoError(t, p.ProduceAsync(ctx, producer.Record[string, string]{Topic: topic, Value: fmt.Sprintf("during-%d", i)},
			func(_ producer.Result, err error) { done <- err }))
	}

	if !check {
		// Nobody asks B who it is. A read through the factory's admin
		// client is silently served by cluster B: ListOffsets names topics
		// by name, B has an (empty) topic of that name, and A's 5 records
		// are not seen.
		adm, err := f.Admin()
		require.NoError(t, err)
		defer adm.Close(context.Background())
		offs, err := adm.ListEndOffsets(ctx, topic)
		require.NoError(t, err)
		o, ok := offs.Lookup(topic, 0)
		require.True(t, ok)
		require.NoError(t, o.Err)
		require.Equal(t, int64(0), o.Offset, "the read is served by cluster B (A holds %d records)", before)

		// The writes do not land in B only because Produce v13 names the
		// topic by id and the ids of the two clusters' topics differ:
		// B answers UNKNOWN_TOPIC_ID (and franz-go, seeing B's metadata
		// give the topic another id, takes it for deleted and recreated),
		// so every record fails with UNKNOWN_TOPIC_ID. The factory probes
		// its seed on that hint, finds A unchanged and reports the error.
		for i, err := range await(t, done, during, time.Minute, "records produced during the misroute fail") {
			require.ErrorIs(t, err, kerr.UnknownTopicID, "record %d", i)
		}
		ws := wl.snapshot()
		require.Empty(t, ws.decodeErrs)
		require.Positive(t, ws.produceTo[bAddr], "Produce requests did reach B")
		require.NotEmpty(t, ws.apiV, "the clients connected through the forwarder")
		for _, av := range ws.apiV {
			require.Nil(t, av.clusterID, "ApiVersions v%d to %s named no cluster: the broker is never asked", av.version, av.target)
			require.LessOrEqual(t, av.version, int16(4), "the check off caps ApiVersions below v5")
		}
		require.Empty(t, ws.rejected(), "no REBOOTSTRAP_REQUIRED")
		st := f.Stats()
		require.Zero(t, st.Rebootstraps, "nothing noticed the misroute")
		require.NotContains(t, ev.kinds(), factory.EventRebootstrap)
		requireCount(ctx, t, a, topic, before, "A holds only the records from before the switch")
		requireCount(ctx, t, b, topic, 0, "B holds none")
		t.Logf("check off: ApiVersions seen %d, produce requests by target %v, stats %+v", len(ws.apiV), ws.produceTo, st)
		return
	}

	// B answers the ApiVersions v5 that names A's cluster with
	// REBOOTSTRAP_REQUIRED, and the factory reports the rebootstrap.
	require.Eventually(t, func() bool {
		return len(wl.snapshot().rejected()) > 0 && f.Stats().Rebootstraps > 0 && ev.kinds()[factory.EventRebootstrap] > 0
	}, time.Minute, 20*time.Millisecond, "B answers REBOOTSTRAP_REQUIRED and the factory rebootstraps")
	ws := wl.snapshot()
	require.Empty(t, ws.decodeErrs)
	require.Equal(t, fmt.Sprintf("%s %s/1", bAddr, a.ClusterID()), ws.rejected()[0],
		"B refused a client that named A's cluster id and node 1")
	requireCount(ctx, t, b, topic, 0, "no record reached B during the misroute")
	requireCount(ctx, t, a, topic, before, "the records of the switch are not in A yet")
	select {
	case err := <-done:
		t.Fatalf("a record produced during the misroute completed before the route was repaired: %v", err)
	default:
	}

	fwd.SetTarget(aAddr) // routing repaired
	for i, err := range await(t, done, during, time.Minute, "records produced during the misroute are delivered") {
		require.NoError(t, err, "record %d", i)
	}
	got := readValues(ctx, t, a, topic)
	want := map[string]int{}
	for i := range before {
		want[fmt.Sprintf("before-%d", i)] = 1
	}
	for i := range during {
		want[fmt.Sprintf("during-%d", i)] = 1
	}
	require.Equal(t, want, got, "every record is in A exactly once")
	requireCount(ctx, t, b, topic, 0, "none is in B")
	ws = wl.snapshot()
	require.Zero(t, ws.produceTo[bAddr], "the factory never sent a Produce to B")
	st := f.Stats()
	require.Zero(t, st.StoreResets, "the seed still names A: nothing to reset")
	var v5 int
	for _, av := range ws.apiV {
		if av.clusterID != nil {
			v5++
		}
	}
	require.True(t, slices.ContainsFunc(ws.apiV, func(av apiVersions) bool {
		return av.target == aAddr && av.clusterID != nil && *av.clusterID == a.ClusterID() && av.answered && av.errorCode == 0
	}), "A accepted ApiVersions v5 naming its own cluster")
	t.Logf("check on: ApiVersions v5 with a cluster id %d, rejected %d (first: %s), produce requests by target %v, stats %+v",
		v5, len(ws.rejected()), ws.rejected()[0], ws.produceTo, st)
}

func requireCount(ctx context.Context, t *testing.T, c *kafkatest.Cluster, topic string, want int64, what string) {
	t.Helper()
	n, err := c.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, want, n, what)
}

// closeProducer closes p with a bounded flush, so that a failed test whose
// records are stuck (say, behind a misrouted address) ends instead of
// hanging: what is still buffered then fails.
func closeProducer[K, V any](p *producer.Producer[K, V]) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.Close(ctx)
}
