package factory

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

// txnCluster is a local KIP-1243 cluster whose brokers apply metadata
// changes late, and a factory on it.
func txnCluster(t *testing.T) (*localcluster.Cluster, *Factory) {
	t.Helper()
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(100*time.Millisecond), localcluster.ClusterID("txn-cluster"))
	require.NoError(t, err)
	t.Cleanup(lc.Close)
	f, err := New(BootstrapServers(lc.Addrs()...), AutoOffsetReset(ResetEarliest))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	return lc, f
}

// committedValues reads topic (of one partition) from the start with a
// read_committed consumer of f, up to an end marker it first writes after
// everything there (a plain record, visible once every transaction before
// it ended), so that a value that should not be there has had its chance
// without an observation window.
func committedValues(ctx context.Context, t *testing.T, f *Factory, topic string) []string {
	t.Helper()
	const end = "\x00end of committedValues"
	plain, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer plain.Close(context.Background())
	_, err = plain.Produce(ctx, producer.Record[string, string]{Topic: topic, Value: end})
	require.NoError(t, err)

	c, err := NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics(topic), IsolationLevel(ReadCommitted))
	require.NoError(t, err)
	defer c.Close(context.Background())
	var got []string
	for {
		rs, err := c.Poll(ctx, 0)
		require.NoError(t, err)
		for _, r := range rs {
			if r.Value == end {
				return got
			}
			got = append(got, r.Value)
		}
	}
}

// TestTransactionCommitAbort: a transaction's records are visible to a
// read_committed consumer once it commits and never when it aborts; the
// transactional producer sees the topic the admin client just created
// (its requests carry the token), and its client stamps like any other.
func TestTransactionCommitAbort(t *testing.T) {
	_, f := txnCluster(t)
	ctx := testkit.Ctx(t)
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "txn")
	require.NoError(t, err)

	p, err := NewProducer(f, producer.String(), producer.String(), TransactionalID("txn-1"))
	require.NoError(t, err)
	defer p.Close(context.Background())
	stamped := f.Stats()
	for _, tc := range []struct {
		value string
		end   producer.TransactionEnd
	}{{"a", producer.TryCommit}, {"b", producer.TryAbort}, {"c", producer.TryCommit}} {
		require.NoError(t, p.BeginTransaction())
		_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "txn", Value: tc.value})
		require.NoError(t, err)
		require.NoError(t, p.EndTransaction(ctx, tc.end), tc.value)
	}
	require.Greater(t, f.Stats().RequestsStamped, stamped.RequestsStamped, "the transactional client goes through the interceptor")
	require.Equal(t, []string{"a", "c"}, committedValues(ctx, t, f, "txn"))
	require.NoError(t, p.EndTransaction(ctx, producer.TryCommit), "no transaction open: nothing to do, as with franz-go")
	require.Equal(t, "txn-cluster", f.Token().ClusterID())

	plain, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer plain.Close(context.Background())
	require.ErrorIs(t, plain.BeginTransaction(), producer.ErrNotTransactional)
	require.ErrorIs(t, plain.EndTransaction(ctx, producer.TryCommit), producer.ErrNotTransactional)
}

// TestTransactionalSharing: producers with one transactional id share a
// client (one transaction); none shares with a non-transactional producer
// or one of another id.
func TestTransactionalSharing(t *testing.T) {
	kc := newKfake(t, kfake.SeedTopics(1, "t"))
	f, err := New(BootstrapServers(kc.ListenAddrs()...))
	require.NoError(t, err)
	defer f.Close(context.Background())
	ctx := testkit.Ctx(t)
	mk := func(opts ...ProducerOpt) *producer.Producer[string, string] {
		p, err := NewProducer(f, producer.String(), producer.String(), opts...)
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close(context.Background()) })
		return p
	}
	a1, plain, b := mk(TransactionalID("a")), mk(), mk(TransactionalID("b"))
	a2, err := NewProducer(f, producer.Bytes(), producer.Bytes(), TransactionalID("a"))
	require.NoError(t, err)
	defer a2.Close(ctx)
	require.Same(t, a1.Kgo(), a2.Kgo(), "one transactional id, one client")
	require.NotSame(t, a1.Kgo(), plain.Kgo())
	require.NotSame(t, a1.Kgo(), b.Kgo())

	require.NoError(t, a1.BeginTransaction())
	_, err = a2.Produce(ctx, producer.Record[[]byte, []byte]{Topic: "t", Value: []byte("x")})
	require.NoError(t, err, "a view of the producer writes in its transaction")
	require.NoError(t, a2.EndTransaction(ctx, producer.TryCommit))
}

// TestTransactionalOptions: transactional.id needs idempotence, belongs to
// producers, and is a property.
func TestTransactionalOptions(t *testing.T) {
	f, err := New(BootstrapServers("127.0.0.1:1"))
	require.NoError(t, err)
	defer f.Close(context.Background())
	_, err = NewProducer(f, producer.String(), producer.String(), TransactionalID("x"), Idempotence(false))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "transactional.id")
	_, err = NewProducer(f, producer.String(), producer.String(), TransactionalID("x"), RequiredAcks(LeaderAck))
	require.ErrorContains(t, err, "transactional.id")
	_, err = NewProducer(f, producer.String(), producer.String(), TransactionTimeout(time.Second))
	require.ErrorContains(t, err, "transaction.timeout.ms")
	_, err = NewGroupTransactSession(f, producer.String(), producer.String(), GroupID("g"), TransactionalID("x"))
	require.ErrorContains(t, err, "ConsumeTopics: required")
	_, err = NewGroupTransactSession(f, producer.String(), producer.String(), ConsumeTopics("t"), GroupID("g"))
	require.ErrorContains(t, err, "transactional.id: required")
	_, err = NewGroupTransactSession(f, producer.String(), producer.String(), ConsumeTopics("t"), TransactionalID("x"))
	require.ErrorContains(t, err, "group.id: required")

	opts, err := FromProperties(map[string]string{"transactional.id": "etl-1", "transaction.timeout.ms": "5000"})
	require.NoError(t, err)
	cfg := defaultConfig()
	cfg.role = RoleProducer
	for _, o := range opts {
		o.apply(&cfg)
	}
	require.Equal(t, txnConfig{id: "etl-1", timeout: 5 * time.Second}, cfg.txn)
	_, err = FromProperties(map[string]string{"transactional.id": " "})
	require.ErrorContains(t, err, "transactional.id")
}

// TestGroupTransactSessionExactlyOnce: consume-transform-produce through a
// session. A transaction aborted mid-way re-polls the same records and
// its output is never seen; a member that dies with a transaction open is
// replaced by another (same group, same transactional id), which takes
// over from the last commit. Every input record is in the output exactly
// once, and the group's committed offset is the end of the input.
func TestGroupTransactSessionExactlyOnce(t *testing.T) {
	_, f := txnCluster(t)
	ctx := testkit.Ctx(t)
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	for _, topic := range []string{"in", "out"} {
		_, err = adm.CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
	}
	in, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer in.Close(ctx)
	produceIn := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := in.Produce(ctx, producer.Record[string, string]{Topic: "in", Value: fmt.Sprint("v", i)})
			require.NoError(t, err)
		}
	}
	newSession := func() *producer.GroupTransactSession[string, string] {
		s, err := NewGroupTransactSession(f, producer.String(), producer.String(), ConsumeTopics("in"),
			GroupID("etl"), TransactionalID("etl-1"))
		require.NoError(t, err)
		return s
	}
	// poll returns the values of the next n input records.
	poll := func(s *producer.GroupTransactSession[string, string], n int) []string {
		var vs []string
		for len(vs) < n {
			fs := s.PollFetches(ctx)
			require.NoError(t, fs.Err0())
			fs.EachRecord(func(r *kgo.Record) { vs = append(vs, string(r.Value)) })
		}
		require.Len(t, vs, n)
		return vs
	}
	// transform produces vs, upper case; their outcomes matter only in
	// a transaction that commits.
	transform := func(s *producer.GroupTransactSession[string, string], vs []string, commits bool) {
		for _, v := range vs {
			require.NoError(t, s.ProduceAsync(ctx, producer.Record[string, string]{Topic: "out", Value: strings.ToUpper(v)}, func(_ producer.Result, err error) {
				if commits {
					assert.NoError(t, err)
				}
			}))
		}
	}

	produceIn(0, 10)
	s := newSession()
	first := poll(s, 10)
	require.NoError(t, s.Begin())
	transform(s, first[:5], false)
	committed, err := s.End(ctx, producer.TryAbort) // fails mid-way
	require.NoError(t, err)
	require.False(t, committed)
	again := poll(s, 10)
	require.Equal(t, first, again, "an aborted transaction's records are polled again")
	require.NoError(t, s.Begin())
	transform(s, again, true)
	committed, err = s.End(ctx, producer.TryCommit)
	require.NoError(t, err)
	require.True(t, committed)

	produceIn(10, 15)
	more := poll(s, 5)
	require.NoError(t, s.Begin())
	transform(s, more, false)
	require.NoError(t, s.Close(ctx)) // dies with the transaction open

	s2 := newSession() // fences the first, aborting its transaction
	defer s2.Close(ctx)
	redo := poll(s2, 5)
	require.Equal(t, more, redo, "the new member resumes at the last commit")
	require.NoError(t, s2.Begin())
	transform(s2, redo, true)
	committed, err = s2.End(ctx, producer.TryCommit)
	require.NoError(t, err)
	require.True(t, committed)

	var want []string
	for i := range 15 {
		want = append(want, fmt.Sprint("V", i))
	}
	require.Equal(t, want, committedValues(ctx, t, f, "out"), "every input exactly once")
	kc, err := f.KgoClient()
	require.NoError(t, err)
	defer kc.Close()
	offs, err := kadm.NewClient(kc).FetchOffsets(ctx, "etl")
	require.NoError(t, err)
	o, ok := offs.Lookup("in", 0)
	require.True(t, ok)
	require.Equal(t, int64(15), o.At)
}

// TestTransactionClusterChange: a transaction cannot span clusters. A
// record produced in it after the cluster behind the bootstrap address
// changed fails with ErrClusterChanged, EndTransaction refuses to commit
// and says so, and the next transaction runs on the new cluster, which
// holds only its record.
func TestTransactionClusterChange(t *testing.T) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	a := startOnPort(t, "cluster-a", port)
	f, err := New(BootstrapServers(a.ListenAddrs()[0]), RetryBackoff(20*time.Millisecond))
	require.NoError(t, err)
	defer f.Close(context.Background())
	p, err := NewProducer(f, producer.String(), producer.String(), TransactionalID("move"))
	require.NoError(t, err)
	defer p.Close(context.Background())

	require.NoError(t, p.BeginTransaction())
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "a"})
	require.NoError(t, err)
	testkit.WaitFor(ctx, t, "the cluster id", func() bool { return f.s.Watcher().Cluster() == "cluster-a" })
	a.Close()
	b := startOnPort(t, "cluster-b", port)
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "lost"})
	require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)
	err = p.EndTransaction(ctx, producer.TryCommit)
	require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)
	require.ErrorContains(t, err, `from "cluster-a" to "cluster-b"`)

	require.NoError(t, p.BeginTransaction())
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "b"})
	require.NoError(t, err)
	require.NoError(t, p.EndTransaction(ctx, producer.TryCommit))
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	require.NoError(t, err)
	defer cl.Close()
	fs := cl.PollFetches(ctx)
	require.NoError(t, fs.Err0())
	var got []string
	fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	require.Equal(t, []string{"b"}, got)
}
