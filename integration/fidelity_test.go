package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// The SDK against every answer KIP-1243 allows a broker that is behind:
// INCONSISTENT_METADATA whatever header token comes with it, a closed
// connection instead, a hold; and broker tokens that go back down.

// resumeOnFirstInconsistent resumes every broker of lc once one of them has
// answered INCONSISTENT_METADATA (or closed a connection for being behind).
func resumeOnFirstInconsistent(t *testing.T, ctx context.Context, lc *localcluster.Cluster, brokers int32) {
	t.Helper()
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		defer func() {
			for node := range brokers {
				_ = lc.ResumeApply(node)
			}
		}()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			if s := lc.Stats(); s.Inconsistent+s.ClosedBehind > 0 {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
}

// TestInconsistentWithNewestTokenIsRetried: brokers that answer
// INCONSISTENT_METADATA with a header token at or above the request's (the
// newest offset they know, TokenFetched) make a Produce, a Metadata and a
// CreateTopics call each get the code once; each call succeeds once the
// brokers catch up, and code 1243 never reaches the application. Before
// the fix each call returned UNKNOWN_SERVER_ERROR.
func TestInconsistentWithNewestTokenIsRetried(t *testing.T) {
	for _, call := range []string{"produce", "metadata", "create"} {
		t.Run(call, func(t *testing.T) {
			lc := newCluster(t, localcluster.Lag(0), localcluster.ErrorMode(true),
				localcluster.InconsistentTokenIs(localcluster.TokenFetched), localcluster.WriteAnswers(localcluster.WritesAfterOwnApply))
			ctx := testkit.CtxFor(t, 60*time.Second)
			store := consistency.NewMemoryStore()
			events := &staleEvents{}
			f, err := factory.New(factory.BootstrapServers(lc.Addrs()...), factory.WithStore(store),
				factory.WithObserver(events), factory.KgoOpts(kgo.MetadataMinAge(50*time.Millisecond)))
			require.NoError(t, err)
			adm, err := f.Admin()
			require.NoError(t, err)
			defer adm.Close(context.Background())
			created, err := adm.CreateTopic(ctx, 1, 1, nil, "orders")
			require.NoError(t, err)
			require.NoError(t, created.Err)
			for node := range int32(3) {
				require.NoError(t, lc.WaitApplied(ctx, node, lc.LogEnd()))
			}
			p, err := factory.NewProducer(f, producer.String(), producer.String())
			require.NoError(t, err)
			defer p.Close(context.Background())
			_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "orders", Value: "warm"})
			require.NoError(t, err)

			// Every broker behind a committed offset the store holds.
			for node := range int32(3) {
				require.NoError(t, lc.PauseApply(node))
			}
			ahead, err := lc.MovePartition(ctx, "orders", 0, 0)
			require.NoError(t, err)
			_, err = store.Advance(consistency.MustOf(lc.ClusterID(), ahead))
			require.NoError(t, err)
			resumeOnFirstInconsistent(t, ctx, lc, 3)

			switch call {
			case "produce":
				_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "orders", Value: "v"})
				require.NoError(t, err)
			case "metadata":
				topics, err := adm.ListTopics(ctx, "orders")
				require.NoError(t, err)
				require.NoError(t, topics["orders"].Err)
			case "create":
				created, err := adm.CreateTopic(ctx, 1, 1, nil, "more")
				require.NoError(t, err)
				require.NoError(t, created.Err)
			}
			require.Positive(t, lc.Stats().Inconsistent, "a broker answered INCONSISTENT_METADATA")
			require.Positive(t, f.Stats().InconsistentMetadata, "the SDK saw it")
		})
	}
}

// variant is a local cluster setting KIP-1243 allows a broker.
type variant struct {
	name string
	opts []localcluster.Opt
}

var variants = []variant{
	{"hold", nil},
	{"hold-then-error", []localcluster.Opt{localcluster.WaitMax(50 * time.Millisecond)}},
	{"error-applied", []localcluster.Opt{localcluster.ErrorMode(true)}},
	{"error-judged", []localcluster.Opt{localcluster.ErrorMode(true), localcluster.InconsistentTokenIs(localcluster.TokenJudged)}},
	{"error-fetched", []localcluster.Opt{localcluster.ErrorMode(true), localcluster.InconsistentTokenIs(localcluster.TokenFetched)}},
	{"error-close", []localcluster.Opt{localcluster.ErrorMode(true), localcluster.BehindAnswer(localcluster.BehindClose)}},
	// Writes answered with the commit offset: a broker's next token is
	// lower than its last (the SDK must not need them to rise).
	{"error-writes-at-commit", []localcluster.Opt{localcluster.ErrorMode(true), localcluster.WriteAnswers(localcluster.WritesAtCommit)}},
	{"hold-then-close", []localcluster.Opt{localcluster.WaitMax(50 * time.Millisecond), localcluster.BehindAnswer(localcluster.BehindClose)}},
}

// TestReadYourWritesEveryVariant runs, through one factory, create →
// produce → consume, create → describe, and delete → list on 3 brokers,
// against each variant: every read reflects the write, and no call fails.
// kfake's controller (node 2), which answers the writes once it applied
// them, applies at once; the two others 500 ms late, so reads that reach
// them right after a write find them behind.
func TestReadYourWritesEveryVariant(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			lc := newCluster(t, append([]localcluster.Opt{localcluster.BrokerLag(2, 0), localcluster.WriteAnswers(localcluster.WritesAfterOwnApply)}, v.opts...)...)
			ctx := testkit.CtxFor(t, 60*time.Second)
			f, err := factory.New(factory.BootstrapServers(lc.Addrs()...), factory.AutoOffsetReset(factory.ResetEarliest),
				factory.KgoOpts(kgo.MetadataMinAge(50*time.Millisecond)))
			require.NoError(t, err)
			adm, err := f.Admin()
			require.NoError(t, err)
			defer adm.Close(context.Background())

			created, err := adm.CreateTopic(ctx, 3, 1, nil, "orders")
			require.NoError(t, err)
			require.NoError(t, created.Err)
			p, err := factory.NewProducer(f, producer.String(), producer.String())
			require.NoError(t, err)
			defer p.Close(context.Background())
			const n = 12
			for i := range n {
				_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "orders", Key: fmt.Sprint(i), Value: "v"})
				require.NoError(t, err, "record %d", i)
			}
			c, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics("orders"), factory.GroupID("ryw"))
			require.NoError(t, err)
			defer c.Close(context.Background())
			got := map[string]bool{}
			for len(got) < n {
				recs, err := c.Poll(ctx, 0)
				require.NoError(t, err)
				for _, r := range recs {
					got[r.Key] = true
				}
			}

			_, err = adm.CreateTopic(ctx, 2, 1, nil, "invoices")
			require.NoError(t, err)
			for range 3 {
				topics, err := adm.ListTopics(ctx, "invoices")
				require.NoError(t, err)
				require.NoError(t, topics["invoices"].Err, "describe sees the new topic")
				require.Len(t, topics["invoices"].Partitions, 2)
				ends, err := adm.ListEndOffsets(ctx, "invoices")
				require.NoError(t, err)
				require.NoError(t, ends.Error(), "list offsets knows the new topic")
			}

			del, err := adm.DeleteTopic(ctx, "invoices")
			require.NoError(t, err)
			require.NoError(t, del.Err)
			for range 3 {
				topics, err := adm.ListTopics(ctx)
				require.NoError(t, err)
				require.False(t, topics.Has("invoices"), "a deleted topic is gone at once")
			}
			st := lc.Stats()
			require.Zero(t, st.WriteTimeouts)
			switch {
			case v.name == "hold":
				require.Positive(t, st.Waits, "requests were held")
				require.Zero(t, st.Inconsistent+st.ClosedBehind)
			case strings.HasSuffix(v.name, "close"):
				require.Positive(t, st.ClosedBehind, "connections were closed for being behind")
				require.Zero(t, st.Inconsistent)
			default:
				require.Positive(t, st.Inconsistent, "INCONSISTENT_METADATA was answered")
			}
			t.Logf("%s: %+v", v.name, st)
		})
	}
}

// factoryAdmin returns the admin client of a new factory of lc, both
// closed when the test ends.
func factoryAdmin(t *testing.T, lc *localcluster.Cluster) *admin.Client {
	t.Helper()
	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...))
	require.NoError(t, err)
	t.Cleanup(func() { f.Close(context.Background()) })
	adm, err := f.Admin()
	require.NoError(t, err)
	t.Cleanup(func() { adm.Close(context.Background()) })
	return adm
}

// TestCoordinatorCallsAfterWrite: right after a CreateTopics, the brokers
// behind it answer INCONSISTENT_METADATA (at once, or after a hold of
// 50 ms) to the FindCoordinator franz-go sends to look up a group's
// coordinator, a lookup it makes once per call and never retries. The
// admin calls that need a coordinator still succeed: the admin client
// runs them again (admin/retry.go). Before that, FetchOffsets failed with
// the broker's INCONSISTENT_METADATA within a millisecond.
func TestCoordinatorCallsAfterWrite(t *testing.T) {
	for _, mode := range []string{"error", "wait"} {
		t.Run(mode, func(t *testing.T) {
			lc := newCluster(t, localcluster.ErrorMode(mode == "error"), localcluster.WaitMax(50*time.Millisecond))
			ctx := testkit.CtxFor(t, 30*time.Second)
			adm := factoryAdmin(t, lc)
			// kfake answers a group it does not know GROUP_ID_NOT_FOUND:
			// the call reached the group's coordinator.
			reached := func(err error) error {
				if errors.Is(err, kerr.GroupIDNotFound) {
					return nil
				}
				return err
			}
			for k, call := range []func() error{
				func() error { _, err := adm.FetchOffsets(ctx, "some-group"); return reached(err) },
				func() error { _, err := adm.DescribeGroups(ctx, "some-group"); return reached(err) },
				func() error { return reached(adm.FetchManyOffsets(ctx, "some-group").Error()) },
			} {
				created, err := adm.CreateTopic(ctx, 1, 1, nil, fmt.Sprintf("orders-%d", k))
				require.NoError(t, err)
				require.NoError(t, created.Err)
				before := lc.Stats()
				require.NoError(t, call(), "call %d after the create", k)
				after := lc.Stats()
				require.Positive(t, after.Inconsistent+after.ClosedBehind-before.Inconsistent-before.ClosedBehind,
					"call %d: no broker answered it as behind the token: the test shows nothing", k)
			}
		})
	}
}

// TestWriteAnsweredBelowItsOffset: brokers that answer a metadata write at
// commit with their own applied offset, below the write (the KIP's text,
// "their latest cluster metadata offset", allows it), give a token that
// does not cover the write. The factory learns the write's offset from the
// quorum instead, as on Kafka 4.4, so every read after the create, on any
// broker, shows the topic. Before, 6 of 6 reads missed it.
func TestWriteAnsweredBelowItsOffset(t *testing.T) {
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(lag),
		localcluster.WriteAnswers(localcluster.WritesAtCommitOwnOffset))
	require.NoError(t, err)
	t.Cleanup(lc.Close)
	ctx := testkit.CtxFor(t, 60*time.Second)
	adm := factoryAdmin(t, lc)
	_, err = adm.ListTopics(ctx) // a token of the cluster's before the writes
	require.NoError(t, err)
	for k := range 3 {
		name := fmt.Sprintf("orders-%d", k)
		created, err := adm.CreateTopic(ctx, 3, 1, nil, name)
		require.NoError(t, err)
		require.NoError(t, created.Err)
		for r := range 6 {
			topics, err := adm.ListTopics(ctx, name)
			require.NoError(t, err)
			require.True(t, topics.Has(name) && topics[name].Err == nil, "read %d after creating %s missed it: %+v", r, name, topics[name])
		}
	}
	require.Positive(t, lc.Stats().WritesAnsweredBelow, "no write was answered below its offset: the test shows nothing")
}

// TestAdminKeepsFranzGosBudget: a call that looks up no coordinator (a
// CreateTopics to a broker that stays behind) has had every request of it
// retried by franz-go within its budget by the time it returns; the admin
// client does not run it again, which would spend the budget once more per
// run (18 INCONSISTENT_METADATA answers where kadm alone got 6 with
// RequestRetries(2), before).
func TestAdminKeepsFranzGosBudget(t *testing.T) {
	lc := newCluster(t, localcluster.Brokers(1), localcluster.ErrorMode(true))
	ctx := testkit.CtxFor(t, 30*time.Second)
	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	adm, err := f.Admin(factory.KgoOpts(kgo.RequestRetries(2), kgo.RetryTimeout(0),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond })))
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close(context.Background()) })

	require.NoError(t, lc.PauseApply(0))
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "a") // the token moves past the broker
	require.NoError(t, err)

	// The same call through kadm on the same franz-go client, alone, after
	// one such call, so that both start as the admin call will: with the
	// connection to the broker ended by its last INCONSISTENT_METADATA.
	plain := kadm.NewClient(adm.Kgo())
	_, err = plain.CreateTopic(kadm.WithAuthorizedOps(ctx), 1, 1, nil, "b")
	require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
	before := lc.Stats().Inconsistent
	_, err = plain.CreateTopic(kadm.WithAuthorizedOps(ctx), 1, 1, nil, "b")
	require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
	alone := lc.Stats().Inconsistent - before
	require.Positive(t, alone, "the broker never answered as behind: the test shows nothing")

	before = lc.Stats().Inconsistent
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "b")
	require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
	require.Equal(t, alone, lc.Stats().Inconsistent-before, "INCONSISTENT_METADATA answers to one admin call, against franz-go's own")
}
