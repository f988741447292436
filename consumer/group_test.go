package consumer_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
)

// groupEnv is a local cluster whose brokers apply metadata 100ms late, a
// factory on it and topic "t" with two partitions, created by the
// factory's admin client: consumers made right after it see the topic only
// through the token.
type groupEnv struct {
	f   *factory.Factory
	ctx context.Context
	pr  *kgo.Client // produces to the partition a record names
}

func newGroupEnv(t *testing.T) *groupEnv {
	t.Helper()
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(100*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(func() { lc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(context.Background()) })
	adm, err := f.Admin()
	require.NoError(t, err)
	defer closeOK(t, adm)
	_, err = adm.CreateTopic(ctx, 2, 1, nil, "t")
	require.NoError(t, err)
	pr, err := f.KgoClient(factory.KgoOpts(kgo.RecordPartitioner(kgo.ManualPartitioner())))
	require.NoError(t, err)
	t.Cleanup(pr.Close)
	return &groupEnv{f: f, ctx: ctx, pr: pr}
}

// produce writes n records to partition p of "t".
func (e *groupEnv) produce(t *testing.T, p int32, n int) {
	t.Helper()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: "t", Partition: p, Value: []byte("v")}
	}
	require.NoError(t, e.pr.ProduceSync(e.ctx, rs...).FirstErr())
}

// committed returns the group's committed offsets of "t".
func (e *groupEnv) committed(t *testing.T, group string) map[int32]int64 {
	t.Helper()
	adm, err := e.f.Admin()
	require.NoError(t, err)
	defer closeOK(t, adm)
	os, err := adm.FetchOffsets(e.ctx, group)
	require.NoError(t, err)
	out := map[int32]int64{}
	for p, o := range os["t"] {
		require.NoError(t, o.Err)
		out[p] = o.At
	}
	return out
}

// pollN polls c until it has n records, failing at the first error.
func pollN(t *testing.T, ctx context.Context, c *consumer.Consumer[string, string], n int) []consumer.Record[string, string] {
	t.Helper()
	var got []consumer.Record[string, string]
	for len(got) < n {
		recs, err := c.Poll(ctx, 0)
		require.NoError(t, err)
		got = append(got, recs...)
	}
	return got
}

// closeOK closes a client and checks that Close reports no failure.
func closeOK(t *testing.T, c interface{ Close(context.Context) error }) {
	t.Helper()
	require.NoError(t, c.Close(context.Background()))
}

// fast makes a group member notice a rebalance within 100ms rather than
// franz-go's 3s heartbeat.
var fast = factory.KgoOpts(kgo.HeartbeatInterval(100 * time.Millisecond))

// TestRevokedCommits: a member whose partition moves to a second member
// commits in OnPartitionsRevoked, through the Group it is given; the second
// member starts from that commit. Autocommit is off, so the commit in the
// callback is the only one. The callbacks see the assignment of a topic
// the factory created a moment before, on brokers that lag.
func TestRevokedCommits(t *testing.T) {
	e := newGroupEnv(t)
	e.produce(t, 0, 5)
	e.produce(t, 1, 5)

	type call struct {
		kind string
		ps   map[string][]int32
		err  error
	}
	calls := make(chan call, 16)
	a, err := factory.NewConsumer(e.f, consumer.String(), consumer.String(), factory.ConsumeTopics("t"),
		factory.GroupID("g"), factory.AutoOffsetReset(factory.ResetEarliest), fast,
		factory.KgoOpts(kgo.DisableAutoCommit()),
		factory.OnPartitionsAssigned(func(_ context.Context, _ *consumer.Group, ps map[string][]int32) {
			if len(ps) > 0 {
				calls <- call{kind: "assigned", ps: ps}
			}
		}),
		factory.OnPartitionsRevoked(func(ctx context.Context, g *consumer.Group, ps map[string][]int32) {
			if len(ps) > 0 {
				calls <- call{kind: "revoked", ps: ps, err: g.Commit(ctx)}
			}
		}),
		factory.OnPartitionsLost(func(_ context.Context, _ *consumer.Group, ps map[string][]int32) {
			calls <- call{kind: "lost", ps: ps}
		}))
	require.NoError(t, err)
	defer closeOK(t, a)
	first := <-calls
	require.Equal(t, "assigned", first.kind)
	require.ElementsMatch(t, []int32{0, 1}, first.ps["t"])
	require.Len(t, pollN(t, e.ctx, a, 10), 10)
	require.Empty(t, e.committed(t, "g"), "autocommit is off")

	// A second member: the cooperative balancer moves one partition.
	b, err := factory.NewConsumer(e.f, consumer.String(), consumer.String(), factory.ConsumeTopics("t"),
		factory.GroupID("g"), factory.AutoOffsetReset(factory.ResetEarliest), fast)
	require.NoError(t, err)
	defer closeOK(t, b)
	var revoked call
	select {
	case revoked = <-calls:
	case <-e.ctx.Done():
		t.Fatal("no revoke")
	}
	require.Equal(t, "revoked", revoked.kind)
	require.NoError(t, revoked.err, "commit in OnPartitionsRevoked")
	require.Len(t, revoked.ps["t"], 1)
	moved := revoked.ps["t"][0]
	require.Equal(t, map[int32]int64{0: 5, 1: 5}, e.committed(t, "g"))

	// b starts the moved partition at the commit, not at the earliest
	// offset: its first record is the one produced now.
	e.produce(t, moved, 1)
	recs := pollN(t, e.ctx, b, 1)
	require.Equal(t, moved, recs[0].Partition)
	require.Equal(t, int64(5), recs[0].Offset)
}

// TestBlockRebalanceOnPoll: with BlockRebalanceOnPoll a rebalance waits
// from a poll that returned records until AllowRebalance; the revoke runs
// only then.
func TestBlockRebalanceOnPoll(t *testing.T) {
	e := newGroupEnv(t)
	e.produce(t, 0, 2)
	e.produce(t, 1, 2)

	var mu sync.Mutex
	allowed := false
	revokedEarly := make(chan bool, 4)
	blocked := make(chan struct{}, 4)
	a, err := factory.NewConsumer(e.f, consumer.String(), consumer.String(), factory.ConsumeTopics("t"),
		factory.GroupID("g"), factory.AutoOffsetReset(factory.ResetEarliest), fast,
		factory.BlockRebalanceOnPoll(),
		factory.KgoOpts(kgo.OnPartitionsCallbackBlocked(func(context.Context, *kgo.Client) { blocked <- struct{}{} })),
		factory.OnPartitionsRevoked(func(ctx context.Context, g *consumer.Group, ps map[string][]int32) {
			if len(ps) == 0 {
				return
			}
			mu.Lock()
			revokedEarly <- !allowed
			mu.Unlock()
			_ = g.Commit(ctx)
		}))
	require.NoError(t, err)
	defer closeOK(t, a)
	require.Len(t, pollN(t, e.ctx, a, 4), 4) // the poll blocks rebalances

	b, err := factory.NewConsumer(e.f, consumer.String(), consumer.String(), factory.ConsumeTopics("t"),
		factory.GroupID("g"), factory.AutoOffsetReset(factory.ResetEarliest), fast)
	require.NoError(t, err)
	defer closeOK(t, b)
	select {
	case <-blocked: // the rebalance waits for a
	case <-e.ctx.Done():
		t.Fatal("the rebalance was never blocked")
	}
	mu.Lock()
	allowed = true
	mu.Unlock()
	a.AllowRebalance()
	select {
	case early := <-revokedEarly:
		require.False(t, early, "revoked before AllowRebalance")
	case <-e.ctx.Done():
		t.Fatal("no revoke after AllowRebalance")
	}
}

// TestCloseAllowsRebalance: Close of a BlockRebalanceOnPoll consumer that
// polled records and never called AllowRebalance returns: leaving the
// group is a rebalance, which would otherwise wait for AllowRebalance
// forever.
func TestCloseAllowsRebalance(t *testing.T) {
	e := newGroupEnv(t)
	e.produce(t, 0, 1)
	c, err := factory.NewConsumer(e.f, consumer.String(), consumer.String(), factory.ConsumeTopics("t"),
		factory.GroupID("g"), factory.AutoOffsetReset(factory.ResetEarliest), factory.BlockRebalanceOnPoll())
	require.NoError(t, err)
	pollN(t, e.ctx, c, 1) // and no AllowRebalance
	closed := make(chan error, 1)
	go func() { closed <- c.Close(e.ctx) }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("Close waits for AllowRebalance")
	}
}

// fetchedRecords is a kgo hook that remembers which records the client
// fetched and buffered, by topic, partition and offset.
type fetchedRecords struct {
	mu  sync.Mutex
	got map[string]bool
}

func recordKey(topic string, p int32, o int64) string { return fmt.Sprintf("%s/%d@%d", topic, p, o) }

func (h *fetchedRecords) OnFetchRecordBuffered(r *kgo.Record) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.got == nil {
		h.got = make(map[string]bool)
	}
	h.got[recordKey(r.Topic, r.Partition, r.Offset)] = true
}

func (h *fetchedRecords) has(topic string, p int32, o int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.got[recordKey(topic, p, o)]
}

// TestPauseResumeSeek: paused partitions and topics are not fetched until
// resumed, and nothing is skipped; SetOffsets moves a partition back.
func TestPauseResumeSeek(t *testing.T) {
	e := newGroupEnv(t)
	adm, err := e.f.Admin()
	require.NoError(t, err)
	_, err = adm.CreateTopic(e.ctx, 1, 1, nil, "u")
	require.NoError(t, err)
	closeOK(t, adm)
	fetched := &fetchedRecords{}
	// A short fetch wait: a fetch of u alone, in flight when t is resumed,
	// would hold t's next fetch for kgo's 5 s default.
	c, err := factory.NewConsumer(e.f, consumer.String(), consumer.String(),
		factory.KgoOpts(kgo.WithHooks(fetched), kgo.FetchMaxWait(200*time.Millisecond)))
	require.NoError(t, err)
	defer closeOK(t, c)
	require.NoError(t, c.Assign(map[string]map[int32]kgo.Offset{
		"t": {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()},
		"u": {0: kgo.NewOffset().AtStart()},
	}))

	require.Equal(t, map[string][]int32{"t": {0}}, c.PauseFetchPartitions(map[string][]int32{"t": {0}}))
	e.produce(t, 0, 3)
	e.produce(t, 1, 3)
	for _, r := range pollN(t, e.ctx, c, 3) {
		require.Equal(t, int32(1), r.Partition, "partition 0 is paused")
	}
	c.ResumeFetchPartitions(map[string][]int32{"t": {0}})
	require.Empty(t, c.PauseFetchPartitions(nil))
	got := pollN(t, e.ctx, c, 3)
	for i, r := range got {
		require.Equal(t, int32(0), r.Partition)
		require.Equal(t, int64(i), r.Offset, "resumed where it stopped")
	}

	// No observation window: the record is in the client before the
	// topic is paused, and a record of topic u, produced after the pause,
	// is polled; a Poll that did not honour the pause would have returned
	// the buffered record of t first or with it.
	e.produce(t, 1, 1)
	testkit.WaitFor(e.ctx, t, "t/1@3 in the client", func() bool { return fetched.has("t", 1, 3) })
	require.Equal(t, []string{"t"}, c.PauseFetchTopics("t"))
	require.NoError(t, e.pr.ProduceSync(e.ctx, &kgo.Record{Topic: "u", Partition: 0, Value: []byte("u")}).FirstErr())
	for _, r := range pollN(t, e.ctx, c, 1) {
		require.Equal(t, "u", r.Topic, "a record of the paused topic t was polled")
	}
	c.ResumeFetchTopics("t")
	recs := pollN(t, e.ctx, c, 1)
	require.Equal(t, "t", recs[0].Topic)
	require.Equal(t, int32(1), recs[0].Partition)
	require.Equal(t, int64(3), recs[0].Offset, "the record dropped while paused is fetched again")

	c.SetOffsets(map[string]map[int32]kgo.EpochOffset{"t": {0: {Epoch: -1, Offset: 1}}})
	got = pollN(t, e.ctx, c, 2)
	for i, r := range got {
		require.Equal(t, int32(0), r.Partition)
		require.Equal(t, int64(1+i), r.Offset, "read again from the offset set")
	}
}
