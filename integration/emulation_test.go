package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
)

// modeEvents collects EventConsistencyOff.
type modeEvents struct {
	mu  sync.Mutex
	off []error
}

func (m *modeEvents) OnEvent(ev factory.Event) {
	if ev.Kind == factory.EventConsistencyOff {
		m.mu.Lock()
		m.off = append(m.off, ev.Err)
		m.mu.Unlock()
	}
}

func (m *modeEvents) offs() []error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]error(nil), m.off...)
}

// knownOn asks broker id directly whether it knows topic.
func knownOn(ctx context.Context, cl *kgo.Client, id int32, topic string) (bool, error) {
	partitions, err := partitionsOn(ctx, cl, id, topic)
	return partitions >= 0, err
}

// partitionsOn asks broker id directly how many partitions topic has: -1
// when it does not know the topic.
func partitionsOn(ctx context.Context, cl *kgo.Client, id int32, topic string) (int, error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return -1, err
	}
	for _, t := range resp.Topics {
		if t.Topic != nil && *t.Topic == topic && t.ErrorCode == 0 {
			return len(t.Partitions), nil
		}
	}
	return -1, nil
}

// staleAfterCreates creates topics through cl and counts the answers of
// every broker, asked at once, that did not know the new topic yet.
func staleAfterCreates(ctx context.Context, t *testing.T, cl *kgo.Client, prefix string, rounds int) (stale, reads int) {
	t.Helper()
	adm := kadm.NewClient(cl)
	for i := range rounds {
		topic := fmt.Sprintf("%s-%d", prefix, i)
		created, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, created.Err)
		for id := int32(0); id < 3; id++ {
			known, err := knownOn(ctx, cl, id, topic)
			require.NoError(t, err, "broker %d", id)
			reads++
			if !known {
				stale++
			}
		}
	}
	return stale, reads
}

// TestModes runs the same writes and reads through factories of every
// consistency mode, on a local cluster with KIP-1243 brokers and on one
// that behaves like Kafka 4.4 (Native(false): no header tokens, the offsets
// in ApiVersions and DescribeQuorum only). Broker 2 applies metadata 300ms
// late, so an answer from it right after a write is stale unless the
// client waits for it.
func TestModes(t *testing.T) {
	cases := []struct {
		mode      factory.ConsistencyMode
		native    bool
		wantStale bool
	}{
		{factory.ModeAuto, false, false},
		{factory.ModeAuto, true, false},
		{factory.ModeEmulated, false, false},
		{factory.ModeEmulated, true, false},
		{factory.ModeNative, true, false},
		{factory.ModeNative, false, true},
		{factory.ModeOff, true, true},
		{factory.ModeOff, false, true},
	}
	for _, tc := range cases {
		name := fmt.Sprintf("%s/native=%v", tc.mode, tc.native)
		t.Run(name, func(t *testing.T) {
			c, err := localcluster.New(localcluster.Brokers(3), localcluster.BrokerLag(2, 300*time.Millisecond), localcluster.Native(tc.native),
				localcluster.WriteAnswers(localcluster.WritesAtCommit)) // broker 2 answers writes: at commit
			require.NoError(t, err)
			t.Cleanup(c.Close)
			ctx := testkit.CtxFor(t, 30*time.Second)
			events := &modeEvents{}
			f, err := factory.New(factory.BootstrapServers(c.Addrs()...), factory.Consistency(tc.mode), factory.WithObserver(events))
			require.NoError(t, err)
			defer f.Close(context.Background())
			cl, err := f.KgoClient()
			require.NoError(t, err)
			defer cl.Close()
			stale, reads := staleAfterCreates(ctx, t, cl, "t", 4)
			t.Logf("%s: %d stale of %d answers; token %v", name, stale, reads, f.Token())
			if tc.wantStale {
				require.Positive(t, stale, "this mode cannot prevent stale reads here")
			} else {
				require.Zero(t, stale)
			}
			cl.Close()
			require.NoError(t, f.Close(context.Background())) // delivers every event queued
			require.Empty(t, events.offs())
		})
	}
}

// TestPlainKgoStaleWithoutNativeTokens is the control of TestModes: plain
// franz-go on the Kafka-4.4-like cluster reads stale answers.
func TestPlainKgoStaleWithoutNativeTokens(t *testing.T) {
	c, err := localcluster.New(localcluster.Brokers(3), localcluster.BrokerLag(2, 300*time.Millisecond), localcluster.Native(false))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	stale, reads := staleAfterCreates(testkit.CtxFor(t, 30*time.Second), t, cl, "plain", 4)
	t.Logf("plain kgo: %d stale of %d answers", stale, reads)
	require.Positive(t, stale)
}

// TestEmulationOffWhereUnsupported: a cluster that does not tell its
// offsets makes ModeAuto fall back to plain behaviour with one event that
// says why, and every call still works. (A principal refused
// DescribeQuorum keeps what needs no cluster ACL:
// TestLimitedWithoutDescribeCluster.)
func TestEmulationOffWhereUnsupported(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  localcluster.Opt
		want error
	}{
		{"no FinalizedFeaturesEpoch", localcluster.FeaturesEpoch(false), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := localcluster.New(localcluster.Brokers(3), localcluster.BrokerLag(2, 300*time.Millisecond), localcluster.Native(false), tc.opt)
			require.NoError(t, err)
			t.Cleanup(c.Close)
			events := &modeEvents{}
			f, err := factory.New(factory.BootstrapServers(c.Addrs()...), factory.WithObserver(events))
			require.NoError(t, err)
			defer f.Close(context.Background())
			cl, err := f.KgoClient()
			require.NoError(t, err)
			defer cl.Close()
			staleAfterCreates(testkit.CtxFor(t, 30*time.Second), t, cl, "t", 3)
			// Events reach the observer on the factory's event goroutine;
			// Close delivers every one queued before it returns.
			cl.Close()
			require.NoError(t, f.Close(context.Background()))
			offs := events.offs()
			require.Len(t, offs, 1, "one event")
			if tc.want != nil {
				require.ErrorIs(t, offs[0], tc.want)
			}
			t.Logf("event: %v", offs[0])
		})
	}
}
