package realkafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// TestFaults runs the SDK on three Kafka 4.4 nodes through a crash and two
// consumer group rebalances:
//
//   - an idempotent factory producer (acks=all, the default) sends 50,000
//     records asynchronously, at most 1,000 in flight, to a topic with
//     replication factor 3 and min.insync.replicas=2; the leader of
//     partition 0 is killed with SIGKILL mid-way, and every client
//     connection is cut ten times on the way. Every record must be
//     acknowledged exactly once, and the log must hold each exactly once:
//     requests whose answer a cut or the crash lost are sent again, and
//     only idempotence lets the brokers drop the copies (with
//     factory.Idempotence(false) this test finds duplicates in the log);
//   - the node is restarted and rejoins every ISR;
//   - two factory consumers share a group: the second joins mid-way
//     (rebalance), the first leaves (rebalance), and together they see
//     every record.
func TestFaults(t *testing.T) {
	t0 := time.Now()
	// Each node advertises a forwarder to clients, so that the test can
	// also cut every client connection at once (SetTarget to the same
	// target), losing the answers of requests the brokers already served.
	var fwds []*kafkatest.Forwarder
	opts := []kafkatest.Opt{kafkatest.Nodes(3)}
	for id := int32(1); id <= 3; id++ {
		fw, err := kafkatest.NewForwarder("")
		require.NoError(t, err)
		t.Cleanup(func() { fw.Close() })
		fwds = append(fwds, fw)
		opts = append(opts, kafkatest.AdvertisedAddr(id, fw.Addr()))
	}
	c := kafkatest.Start(t, opts...)
	for i, fw := range fwds {
		addr, err := c.ListenerAddr(int32(i + 1))
		require.NoError(t, err)
		fw.SetTarget(addr)
	}
	cutAll := func() {
		for _, fw := range fwds {
			fw.SetTarget(fw.Target())
		}
	}
	t.Logf("3 nodes ready in %v", time.Since(t0).Round(time.Millisecond))
	ctx := testkit.CtxFor(t, 4*time.Minute)
	const (
		topic      = "faults"
		partitions = 6
		n          = 50_000
		inflight   = 1_000
		killAfter  = 15_000 // records handed to the producer before the kill
		cutEvery   = 5_000  // records between two cuts of every connection
	)
	keyOf := func(i int) string { return fmt.Sprintf("k%05d", i) }
	infra := kadm.NewClient(plainClient(t, c))

	notes := &kgoNotes{}
	f, err := factory.New(factory.BootstrapServers(c.BootstrapAddrs()...), factory.ClientID("faults"),
		factory.AutoOffsetReset(factory.ResetEarliest), factory.Logger(slog.New(notes)))
	require.NoError(t, err)
	defer f.Close(context.Background())
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	created, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": ptr("2")}, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
	all := []int32{1, 2, 3}
	kafkatest.RequireISR(ctx, t, infra, topic, all)
	m, err := infra.Metadata(ctx, topic)
	require.NoError(t, err)
	victim := m.Topics[topic].Partitions[0].Leader
	led := 0
	for _, p := range m.Topics[topic].Partitions {
		if p.Leader == victim {
			led++
		}
	}
	require.Positive(t, led)

	t.Run("KillDuringProduce", func(t *testing.T) {
		p, err := factory.NewProducer(f, producer.String(), producer.String())
		require.NoError(t, err)
		defer closeProducer(p)
		defer func() {
			// What franz-go said about sequence numbers and producer ids
			// (e.g. an OUT_OF_ORDER_SEQUENCE_NUMBER that made it reset
			// them) explains a failure below.
			lines := notes.snapshot()
			seq := slices.ContainsFunc(lines, func(l string) bool {
				return strings.Contains(l, "sequence") || strings.Contains(l, "data loss")
			})
			t.Logf("franz-go errors and producer-id/sequence notes: %d", len(lines))
			if t.Failed() || seq {
				for _, l := range lines[:min(len(lines), 30)] {
					t.Log("  " + l)
				}
			}
		}()
		acks := make([]atomic.Int32, n) // callbacks per record
		var failed, acked atomic.Int64
		var firstErr firstError
		sem := make(chan struct{}, inflight)
		var killedAt time.Time
		var ackedAtKill int64
		cuts := 0
		t0 := time.Now()
		for i := range n {
			if i == killAfter {
				ackedAtKill = acked.Load()
				killedAt = time.Now()
				require.NoError(t, c.Kill(victim))
				t.Logf("node %d (leader of %d of %d partitions) killed after %v, with %d records acknowledged and %d in flight",
					victim, led, partitions, killedAt.Sub(t0).Round(time.Millisecond), ackedAtKill, int64(i)-ackedAtKill-failed.Load())
			}
			if i%cutEvery == cutEvery/2 {
				cutAll()
				cuts++
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				t.Fatalf("record %d: %v (%d acknowledged)", i, ctx.Err(), acked.Load())
			}
			err := p.ProduceAsync(ctx, producer.Record[string, string]{Topic: topic, Key: keyOf(i), Value: fmt.Sprint(i)},
				func(_ producer.Result, err error) {
					acks[i].Add(1)
					if err != nil {
						failed.Add(1)
						firstErr.set(err)
					} else {
						acked.Add(1)
					}
					select { // never block franz-go, even if called twice
					case <-sem:
					default:
					}
				})
			require.NoError(t, err)
		}
		require.NoError(t, p.Flush(ctx))
		t.Logf("all %d records answered %v after the kill (%v in all); every client connection was cut %d times", n,
			time.Since(killedAt).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond), cuts)
		require.False(t, c.Running(victim))
		require.Zero(t, failed.Load(), "no record failed (first error: %v)", firstErr.get())
		require.Equal(t, int64(n), acked.Load())
		for i := range n {
			require.Equal(t, int32(1), acks[i].Load(), "record %d answered exactly once", i)
		}
		require.Less(t, ackedAtKill, int64(n), "the kill happened while records were being sent")
		survivors := slices.DeleteFunc(slices.Clone(all), func(id int32) bool { return id == victim })
		kafkatest.RequireISR(ctx, t, infra, topic, survivors)
	})
	if t.Failed() {
		return
	}

	t.Run("Restart", func(t *testing.T) {
		t0 := time.Now()
		require.NoError(t, c.Restart(victim))
		kafkatest.RequireISR(ctx, t, infra, topic, all)
		t.Logf("node %d restarted and back in every ISR in %v", victim, time.Since(t0).Round(time.Millisecond))
	})
	if t.Failed() {
		return
	}

	t.Run("ExactlyOnceInTheLog", func(t *testing.T) {
		ends, err := adm.ListEndOffsets(ctx, topic)
		require.NoError(t, err)
		require.NoError(t, ends.Error())
		var total int64
		ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
		require.Equal(t, int64(n), total, "the log holds %d records, no duplicate", n)
		// Read everything back (no group): every key exactly once.
		cons, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(topic))
		require.NoError(t, err)
		defer cons.Close(context.Background())
		seen := make(map[string]int, n)
		read := 0
		for read < n {
			recs, err := cons.Poll(ctx, 0)
			require.NoError(t, err, "read %d of %d", read, n)
			for _, r := range recs {
				seen[r.Key]++
				require.Equal(t, 1, seen[r.Key], "key %s is in the log twice", r.Key)
				require.Equal(t, r.Key, keyOf(atoi(t, r.Value)), "key and value belong together")
			}
			read += len(recs)
		}
		for i := range n {
			require.Equal(t, 1, seen[keyOf(i)], "key %s", keyOf(i))
		}
	})
	if t.Failed() {
		return
	}

	t.Run("GroupRebalance", func(t *testing.T) {
		testGroupRebalance(ctx, t, f, topic, partitions, n, keyOf)
	})
}

// member is one group consumer with the partitions the group gave it.
type member struct {
	name string
	c    *consumer.Consumer[string, string]

	mu       sync.Mutex
	assigned map[int32]bool
	consumed int
}

func newMember(t *testing.T, f *factory.Factory, name, topic, group string) *member {
	t.Helper()
	m := &member{name: name, assigned: map[int32]bool{}}
	// Setting OnPartitionsRevoked replaces franz-go's default, a blocking
	// commit of what was polled; revoked does the same commit first.
	track := func(add, commit bool) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			if commit {
				if err := cl.CommitUncommittedOffsets(ctx); err != nil {
					t.Logf("%s: commit on revoke: %v", name, err)
				}
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, p := range ps[topic] {
				if add {
					m.assigned[p] = true
				} else {
					delete(m.assigned, p)
				}
			}
		}
	}
	c, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(topic), factory.GroupID(group),
		factory.ClientID(name), factory.KgoOpts(
			kgo.OnPartitionsAssigned(track(true, false)),
			kgo.OnPartitionsRevoked(track(false, true)),
			kgo.OnPartitionsLost(track(false, false)),
		))
	require.NoError(t, err)
	m.c = c
	return m
}

func (m *member) partitions() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for p := range m.assigned {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// poll polls once for at most d and records what it got.
func (m *member) poll(ctx context.Context, t *testing.T, d time.Duration, seen map[string]int) int {
	t.Helper()
	pctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	recs, err := m.c.Poll(pctx, 500)
	if err != nil && !(errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil) {
		require.NoError(t, err, "%s polls", m.name)
	}
	for _, r := range recs {
		seen[r.Key]++
	}
	m.mu.Lock()
	m.consumed += len(recs)
	m.mu.Unlock()
	return len(recs)
}

// testGroupRebalance consumes topic with a group of two factory consumers:
// the first alone, then both after the second joins (first rebalance), then
// the second alone after the first leaves (second rebalance). Offsets are
// committed by franz-go's autocommit, on revoke and on leave, so the
// consumer that takes a partition over starts where the other stopped.
func testGroupRebalance(ctx context.Context, t *testing.T, f *factory.Factory, topic string, partitions, n int, keyOf func(int) string) {
	const group = "faults-group"
	seen := make(map[string]int, n)
	m1 := newMember(t, f, "member-1", topic, group)
	defer m1.c.Close(context.Background())
	for len(seen) < n/5 {
		m1.poll(ctx, t, time.Second, seen)
		require.NoError(t, ctx.Err())
	}
	require.Len(t, m1.partitions(), partitions, "member-1 alone owns every partition")

	// member-2 joins; member-1 keeps polling (franz-go rebalances in the
	// background) until the group has split the partitions between them.
	m2 := newMember(t, f, "member-2", topic, group)
	defer m2.c.Close(context.Background())
	t0 := time.Now()
	for {
		p1, p2 := m1.partitions(), m2.partitions()
		if len(p2) > 0 && len(p1) > 0 && len(p1)+len(p2) == partitions && !slices.ContainsFunc(p1, func(p int32) bool { return slices.Contains(p2, p) }) {
			t.Logf("first rebalance in %v: member-1 %v, member-2 %v, %d records seen", time.Since(t0).Round(time.Millisecond), p1, p2, len(seen))
			break
		}
		// Slow member-1 down so that records remain for both.
		if len(seen) < n*2/5 {
			m1.poll(ctx, t, 100*time.Millisecond, seen)
		}
		m2.poll(ctx, t, 100*time.Millisecond, seen)
		require.NoError(t, ctx.Err(), "the group never split the partitions: member-1 %v, member-2 %v", p1, p2)
	}
	for len(seen) < n*3/5 {
		m1.poll(ctx, t, 100*time.Millisecond, seen)
		m2.poll(ctx, t, 100*time.Millisecond, seen)
		require.NoError(t, ctx.Err())
	}

	// member-1 leaves: Close commits what it polled and leaves the group;
	// member-2 takes every partition over and finishes.
	m1.c.Close(context.Background())
	t0 = time.Now()
	var rebalanced time.Duration
	for len(seen) < n {
		m2.poll(ctx, t, 200*time.Millisecond, seen)
		if rebalanced == 0 && len(m2.partitions()) == partitions {
			rebalanced = time.Since(t0)
		}
		require.NoError(t, ctx.Err(), "%d of %d keys seen; member-2 owns %v", len(seen), n, m2.partitions())
	}
	require.Eventually(t, func() bool { return len(m2.partitions()) == partitions }, 30*time.Second, 50*time.Millisecond,
		"member-2 owns every partition after member-1 left")
	missing, dups := 0, 0
	for i := range n {
		switch k := seen[keyOf(i)]; {
		case k == 0:
			missing++
		case k > 1:
			dups += k - 1
		}
	}
	t.Logf("second rebalance: member-2 owned every partition %v after member-1 closed; consumed: member-1 %d, member-2 %d; missing %d, redelivered %d",
		rebalanced.Round(time.Millisecond), m1.consumed, m2.consumed, missing, dups)
	require.Zero(t, missing, "no record missing across both rebalances")
	require.Len(t, seen, n)
	require.Positive(t, m1.consumed)
	require.Positive(t, m2.consumed)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var i int
	_, err := fmt.Sscan(s, &i)
	require.NoError(t, err)
	return i
}
