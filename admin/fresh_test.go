package admin_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
)

// freshAdmin returns an admin client on a local cluster whose brokers apply
// metadata late, with franz-go's metadata cache kept for a minute, so any
// read answered from that cache after a change is sure to be stale; and
// another admin client of the same factory to make the changes. (A client
// forgets its cached partitions of topics it adds partitions to itself, but
// not what other clients do.)
func freshAdmin(t *testing.T) (adm, other *admin.Client, ctx context.Context) {
	t.Helper()
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(lc.Close)
	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	adm, err = f.Admin(factory.KgoOpts(kgo.MetadataMinAge(time.Minute), kgo.MetadataMaxAge(time.Minute)))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, adm.Close(context.Background())) })
	other, err = f.Admin()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close(context.Background())) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return adm, other, ctx
}

// TestReadsAfterCreatePartitions: every kadm method that reads a topic's
// partitions reports the partitions another client added a moment ago,
// although the same method read the topic just before (which fills
// franz-go's cache). CreatePartitions, which adds to the count it reads,
// must not undo the other client's addition either.
func TestReadsAfterCreatePartitions(t *testing.T) {
	adm, other, ctx := freshAdmin(t)
	listed := func(lo kadm.ListedOffsets, err error) (int, error) {
		if err != nil {
			return 0, err
		}
		return len(lo[topicOf(lo)]), lo.Error()
	}
	cases := []struct {
		name  string
		count func(ctx context.Context, topic string) (int, error)
	}{
		{"Metadata", func(ctx context.Context, topic string) (int, error) {
			m, err := adm.Metadata(ctx, topic)
			return len(m.Topics[topic].Partitions), err
		}},
		{"ListTopics", func(ctx context.Context, topic string) (int, error) {
			td, err := adm.ListTopics(ctx, topic)
			return len(td[topic].Partitions), err
		}},
		{"ListTopicsWithInternal", func(ctx context.Context, topic string) (int, error) {
			td, err := adm.ListTopicsWithInternal(ctx, topic)
			return len(td[topic].Partitions), err
		}},
		{"ListStartOffsets", func(ctx context.Context, topic string) (int, error) {
			return listed(adm.ListStartOffsets(ctx, topic))
		}},
		{"ListEndOffsets", func(ctx context.Context, topic string) (int, error) {
			return listed(adm.ListEndOffsets(ctx, topic))
		}},
		{"ListCommittedOffsets", func(ctx context.Context, topic string) (int, error) {
			return listed(adm.ListCommittedOffsets(ctx, topic))
		}},
		{"ListMaxTimestampOffsets", func(ctx context.Context, topic string) (int, error) {
			return listed(adm.ListMaxTimestampOffsets(ctx, topic))
		}},
		{"ListOffsetsAfterMilli", func(ctx context.Context, topic string) (int, error) {
			return listed(adm.ListOffsetsAfterMilli(ctx, 0, topic))
		}},
		{"ListLocalLogStartOffsets", func(ctx context.Context, topic string) (int, error) {
			lo, err := adm.ListLocalLogStartOffsets(ctx, topic)
			return len(lo[topic]), err // per-partition errors: kfake has no tiered storage
		}},
		{"ListLatestRemoteOffsets", func(ctx context.Context, topic string) (int, error) {
			lo, err := adm.ListLatestRemoteOffsets(ctx, topic)
			return len(lo[topic]), err
		}},
		{"CreatePartitions", func(ctx context.Context, topic string) (int, error) {
			// Once the other client added partitions, add one more: a
			// stale count asks for fewer than exist, which fails.
			td, err := adm.ListTopics(ctx, topic)
			if err != nil || len(td[topic].Partitions) == 1 {
				return len(td[topic].Partitions), err
			}
			resp, err := adm.CreatePartitions(ctx, 1, topic)
			if err != nil {
				return 0, err
			}
			if err := resp.Error(); err != nil {
				return 0, err
			}
			td, err = adm.ListTopics(ctx, topic)
			return len(td[topic].Partitions) - 1, err
		}},
		{"FetchOffsetsForTopics", func(ctx context.Context, topic string) (int, error) {
			// The group must exist: a commit to partition 0 makes it.
			var commit kadm.Offsets
			commit.AddOffset(topic, 0, 0, -1)
			if err := adm.CommitAllOffsets(ctx, "g-"+topic, commit); err != nil {
				return 0, err
			}
			os, err := adm.FetchOffsetsForTopics(ctx, "g-"+topic, topic)
			return len(os[topic]), err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := "parts-" + c.name
			_, err := other.CreateTopic(ctx, 1, 1, nil, topic)
			require.NoError(t, err)
			n, err := c.count(ctx, topic)
			require.NoError(t, err)
			require.Equal(t, 1, n)
			resp, err := other.CreatePartitions(ctx, 2, topic)
			require.NoError(t, err)
			require.NoError(t, resp.Error())
			n, err = c.count(ctx, topic)
			require.NoError(t, err)
			require.Equal(t, 3, n, "a stale answer lists the partitions from before CreatePartitions")
		})
	}
}

// topicOf returns the one topic of lo.
func topicOf(lo kadm.ListedOffsets) string {
	for t := range lo {
		return t
	}
	return ""
}

// TestReadsAfterDelete: a deleted topic is gone at once from every read
// that lists topics, although the read listed it just before.
func TestReadsAfterDelete(t *testing.T) {
	adm, other, ctx := freshAdmin(t)
	cases := []struct {
		name string
		has  func(ctx context.Context, topic string) (bool, error)
	}{
		{"ListTopics", func(ctx context.Context, topic string) (bool, error) {
			td, err := adm.ListTopics(ctx)
			return td.Has(topic), err
		}},
		{"ListTopicsWithInternal", func(ctx context.Context, topic string) (bool, error) {
			td, err := adm.ListTopicsWithInternal(ctx)
			return td.Has(topic), err
		}},
		{"Metadata", func(ctx context.Context, topic string) (bool, error) {
			m, err := adm.Metadata(ctx)
			return m.Topics.Has(topic), err
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topic := "gone-" + c.name
			_, err := other.CreateTopic(ctx, 1, 1, nil, topic)
			require.NoError(t, err)
			has, err := c.has(ctx, topic)
			require.NoError(t, err)
			require.True(t, has)
			_, err = other.DeleteTopic(ctx, topic)
			require.NoError(t, err)
			has, err = c.has(ctx, topic)
			require.NoError(t, err)
			require.False(t, has, "a stale answer still lists the deleted topic")
		})
	}
}

// TestCommitsAfterCreate: the commits that look topics up in metadata
// (for topic ids, or names by id) work on a topic created a moment ago,
// although they looked before it existed. kfake accepts these commits even
// with a stale lookup, so this guards the outcome only; that the lookups
// skip the cache is TestEveryMethodIsFresh's to check.
func TestCommitsAfterCreate(t *testing.T) {
	adm, other, ctx := freshAdmin(t)
	ids := func(topic string) kadm.TopicID {
		td, err := adm.ListTopics(ctx, topic)
		require.NoError(t, err)
		require.NoError(t, td[topic].Err)
		return td[topic].ID
	}
	commit := func(name string, topic string) error {
		switch name {
		case "CommitAllOffsets":
			var os kadm.Offsets
			os.AddOffset(topic, 0, 0, -1)
			return adm.CommitAllOffsets(ctx, "g", os)
		case "CommitOffsets":
			var os kadm.Offsets
			os.AddOffset(topic, 0, 0, -1)
			resp, err := adm.CommitOffsets(ctx, "g", os)
			if err != nil {
				return err
			}
			return resp.Error()
		case "CommitAllOffsetsByID":
			return adm.CommitAllOffsetsByID(ctx, "g", kadm.OffsetsByID{ids(topic): {0: {At: 0, LeaderEpoch: -1}}})
		}
		resp, err := adm.CommitOffsetsByID(ctx, "g", kadm.OffsetsByID{ids(topic): {0: {At: 0, LeaderEpoch: -1}}})
		if err != nil {
			return err
		}
		return resp.Error()
	}
	for _, name := range []string{"CommitAllOffsets", "CommitOffsets", "CommitAllOffsetsByID", "CommitOffsetsByID"} {
		t.Run(name, func(t *testing.T) {
			before, after := "before-"+name, "after-"+name
			_, err := other.CreateTopic(ctx, 1, 1, nil, before)
			require.NoError(t, err)
			require.NoError(t, commit(name, before))
			_, err = other.CreateTopic(ctx, 1, 1, nil, after)
			require.NoError(t, err)
			require.NoError(t, commit(name, after), "a stale lookup misses the topic created a moment ago")
			committed, err := adm.FetchOffsets(ctx, "g")
			require.NoError(t, err)
			o, ok := committed.Lookup(after, 0)
			require.True(t, ok, fmt.Sprintf("%s[0] committed", after))
			require.Equal(t, int64(0), o.At)
		})
	}
}

// TestBrokerReadsReachABroker: ListBrokers, BrokerMetadata and ApiVersions
// ask a broker every time rather than answering from what franz-go knows.
// Brokers do not change here, so this counts Metadata requests instead.
func TestBrokerReadsReachABroker(t *testing.T) {
	lc, err := localcluster.New(localcluster.Brokers(2))
	require.NoError(t, err)
	defer lc.Close()
	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...))
	require.NoError(t, err)
	defer f.Close(context.Background())
	var writes metadataWrites
	adm, err := f.Admin(factory.KgoOpts(kgo.MetadataMinAge(time.Minute), kgo.MetadataMaxAge(time.Minute), kgo.WithHooks(&writes)))
	require.NoError(t, err)
	defer func() { require.NoError(t, adm.Close(context.Background())) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reads := map[string]func() error{
		"ListBrokers":    func() error { _, err := adm.ListBrokers(ctx); return err },
		"BrokerMetadata": func() error { _, err := adm.BrokerMetadata(ctx); return err },
		"ApiVersions":    func() error { _, err := adm.ApiVersions(ctx); return err },
	}
	for name, read := range reads {
		require.NoError(t, read(), name) // the first may load the cache
		before := writes.n.Load()
		require.NoError(t, read(), name)
		require.Greater(t, writes.n.Load(), before, "%s answered without asking a broker", name)
	}
}

// metadataWrites counts Metadata requests written to any broker.
type metadataWrites struct{ n atomic.Int64 }

func (w *metadataWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == 3 && err == nil {
		w.n.Add(1)
	}
}
