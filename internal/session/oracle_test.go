package session

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/cluster"
)

// TestCommittedIsOfOneCluster: behind the bootstrap address, the cluster
// changes at every DescribeQuorum it answers (cluster-a with high
// watermark 11, cluster-b with 501, in turn: a cluster moving behind its
// address, as fast as can be). Every committed offset the oracle reports is
// of the cluster it names, or none is reported: never one cluster's offset
// under the other's id, which would let a heal lower a store of cluster-b
// to cluster-a's offset.
func TestCommittedIsOfOneCluster(t *testing.T) {
	k := newKraftFake(t)
	ids := []string{"cluster-a", "cluster-b"}
	hwms := []int64{11, 501}
	var turn atomic.Int64
	answerMetadataAs(t, k, func() string { return ids[turn.Load()%2] })
	answer := func() int64 { return hwms[turn.Add(1)%2] } // answered, then the cluster changes
	k.quorumHWM.Store(&answer)
	want := map[string]int64{"cluster-a": 10, "cluster-b": 500}
	s, err := New(Config{Store: consistency.NewMemoryStore(), Base: k.build(), ErrClosed: errClosed, ErrConfig: errConfig})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	refused := 0
	for range 20 {
		c, err := s.Committed(ctx)
		if err != nil {
			refused++ // the two Metadata answers named two clusters
			continue
		}
		require.Equal(t, want[c.ClusterID()], c.Offset(), "committed offset %v mixes two clusters", c)
	}
	t.Logf("%d of 20 answers refused as mixed", refused)

	// The cluster stays put: the answer comes, of that cluster.
	stable := func() int64 { return hwms[turn.Load()%2] }
	k.quorumHWM.Store(&stable)
	c, err := s.Committed(ctx)
	require.NoError(t, err)
	require.Equal(t, want[c.ClusterID()], c.Offset())
}

// TestOracleKeepsClusterCheck: the oracle's clients may send ApiVersions
// v5, which names the cluster and node they expect (KIP-1242): a broker of
// another cluster at a known address refuses them rather than answer.
func TestOracleKeepsClusterCheck(t *testing.T) {
	k := newKraftFake(t)
	s, err := New(Config{Store: consistency.NewMemoryStore(), Base: k.build(), ErrClosed: errClosed, ErrConfig: errConfig})
	require.NoError(t, err)
	defer s.Close()
	q, p, err := s.oracle.clients()
	require.NoError(t, err)
	for _, cl := range []*kgo.Client{q, p} {
		if mv, ok := cl.OptValue(kgo.MaxVersions).(interface {
			LookupMaxKeyVersion(int16) (int16, bool)
		}); ok && mv != nil {
			v, ok := mv.LookupMaxKeyVersion(apiVersionsKey)
			require.True(t, !ok || v >= 5, "ApiVersions capped at v%d", v)
		}
	}
}

// churnRequestor answers Metadata with kgo's broker 0 and two brokers that
// change at every answer: one at a new address, one with a new node id
// at a reused address.
type churnRequestor struct{ n int32 }

func (c *churnRequestor) Request(_ context.Context, req kmsg.Request) (kmsg.Response, error) {
	c.n++
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.ClusterID = kmsg.StringPtr("c")
	churn := kmsg.NewMetadataResponseBroker()
	churn.NodeID, churn.Host, churn.Port = c.n, "127.0.0.2", 10000+c.n
	reused := kmsg.NewMetadataResponseBroker()
	reused.NodeID, reused.Host, reused.Port = 1000+c.n, "127.0.0.3", 9092
	resp.Brokers = append(resp.Brokers, churn, reused)
	return resp, nil
}

// TestOracleNodesFollowAnswers: the oracle's address → node map is the
// last Metadata answer's (and the seeds'), not every answer's: address
// churn does not grow it, and a reused address maps to its new node.
func TestOracleNodesFollowAnswers(t *testing.T) {
	k := newKraftFake(t)
	s, err := New(Config{Store: consistency.NewMemoryStore(), Base: k.build(), ErrClosed: errClosed, ErrConfig: errConfig})
	require.NoError(t, err)
	defer s.Close()
	_, _, err = s.oracle.clients()
	require.NoError(t, err)
	r := &churnRequestor{}
	for range 50 {
		_, err := s.oracle.metadata(t.Context(), r)
		require.NoError(t, err)
	}
	s.oracle.mu.Lock()
	defer s.oracle.mu.Unlock()
	require.LessOrEqual(t, len(s.oracle.nodes), len(k.seeds)+2)
	require.Equal(t, 1000+r.n, s.oracle.nodes["127.0.0.3:9092"], "the reused address maps to its new node")
}

// TestCommittedAsksAnotherBroker: Metadata names as controller a broker
// that no longer answers (KRaft lists a crashed broker until it is fenced,
// seconds later); the committed offset comes from another broker of the
// answer, of the same cluster. On the code before, the one DescribeQuorum
// to the dead broker failed and Committed with it.
func TestCommittedAsksAnotherBroker(t *testing.T) {
	k := newKraftFake(t)
	host, port, err := net.SplitHostPort(k.seeds[0])
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	deadAddr := dead.Addr().(*net.TCPAddr)
	require.NoError(t, dead.Close()) // nothing listens there any more
	id := "cluster-a"
	k.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.ClusterID = &id
		gone := kmsg.NewMetadataResponseBroker()
		gone.NodeID, gone.Host, gone.Port = 7, "127.0.0.1", int32(deadAddr.Port)
		live := kmsg.NewMetadataResponseBroker()
		live.NodeID, live.Host, live.Port = 0, host, int32(p)
		resp.Brokers = append(resp.Brokers, gone, live)
		resp.ControllerID = 7
		return resp, nil, true
	})
	k.hwm.Store(42)
	s, err := New(Config{Store: consistency.NewMemoryStore(), Base: k.build(), ErrClosed: errClosed, ErrConfig: errConfig})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	c, err := s.oracle.Committed(ctx)
	require.NoError(t, err)
	require.Equal(t, consistency.MustOf(id, 41), c)

	// No broker answers: the error names each one asked.
	none := func() int64 { return 0 } // no committed offset: a quorum electing
	k.quorumHWM.Store(&none)
	_, err = s.oracle.Committed(ctx)
	require.ErrorContains(t, err, "no broker answered DescribeQuorum")
	require.ErrorContains(t, err, "broker 7:")
	require.ErrorContains(t, err, "broker 0:")
}

func TestAskOrder(t *testing.T) {
	m := kmsg.NewPtrMetadataResponse()
	for _, id := range []int32{1, 2, 3} {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID = id
		m.Brokers = append(m.Brokers, b)
	}
	m.ControllerID = 2
	require.Equal(t, []int32{2, 1, 3}, askOrder(m))
	m.ControllerID = 9 // not listed
	require.Equal(t, []int32{1, 2, 3}, askOrder(m))
}

// TestWriteUnlearntReported: a metadata write answered while no broker
// answers DescribeQuorum reaches its caller after the 1 s hold, and the
// session's OnWriteUnlearnt hears of it once.
func TestWriteUnlearntReported(t *testing.T) {
	k := newKraftFake(t)
	k.applied.Store(10)
	k.hwm.Store(11)
	var unlearnt atomic.Int64
	s, err := New(Config{Store: consistency.NewMemoryStore(), Base: k.build(), Emulate: true, ErrClosed: errClosed, ErrConfig: errConfig,
		OnWriteUnlearnt: func() { unlearnt.Add(1) }})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	admin, err := s.Client(k.build())
	require.NoError(t, err)
	defer admin.Close()
	require.NoError(t, createTopic(ctx, admin, "t0"))
	require.Zero(t, unlearnt.Load())
	k.hung.Store(true)
	require.NoError(t, createTopic(ctx, admin, "t1"))
	require.EqualValues(t, 1, unlearnt.Load())
}

// TestOracleRenewedOnClusterChange: after the bootstrap servers moved to
// another cluster, the oracle's next question goes through new clients
// with a new node map: the old ones name the old cluster in ApiVersions
// v5, which the new cluster refuses (KIP-1242), and a question then waited
// for their paced rebootstrap, holding a metadata answer of a producer's
// new client behind it (issue 38, the DR address switch). The client of
// unstamped questions (WaitApplied's) is replaced too. A pinned factory
// never follows a change and keeps them all.
func TestOracleRenewedOnClusterChange(t *testing.T) {
	for _, pin := range []string{"", "cluster-a"} {
		t.Run("pin="+pin, func(t *testing.T) {
			k := newKraftFake(t)
			b := k.build()
			b.Pin = pin
			s, err := New(Config{Store: consistency.NewMemoryStore(), Base: b, ErrClosed: errClosed, ErrConfig: errConfig})
			require.NoError(t, err)
			defer s.Close()
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			q, p, err := s.oracle.clients()
			require.NoError(t, err)
			_, err = s.oracle.refresh(ctx, q)
			require.NoError(t, err)
			u, release, err := s.UnstampedClient()
			require.NoError(t, err)
			release()

			s.clusterEvent(cluster.Event{Changed: true, From: "cluster-a", To: "cluster-b"})
			q2, p2, err := s.oracle.clients()
			require.NoError(t, err)
			u2, release2, err := s.UnstampedClient()
			require.NoError(t, err)
			defer release2()
			if pin != "" {
				require.Same(t, q, q2)
				require.Same(t, p, p2)
				require.True(t, u == u2, "a pinned session keeps its unstamped client")
				return
			}
			require.False(t, u == u2, "a new unstamped client after the change")
			require.ErrorIs(t, u.Ping(ctx), kgo.ErrClientClosed, "the old one, released, is closed")
			require.False(t, q == q2, "a new quorum client after the change")
			require.False(t, p == p2, "a new probe client after the change")
			require.Equal(t, seedNodes(b.Seeds), s.oracle.nodes, "the node map starts again from the seeds")
			require.ErrorIs(t, q.Ping(ctx), kgo.ErrClientClosed, "the old clients are closed")
			require.ErrorIs(t, p.Ping(ctx), kgo.ErrClientClosed)
			_, err = s.AskCluster(ctx)
			require.NoError(t, err, "the new clients answer")
		})
	}
}

// answerMetadataAs makes k answer every Metadata as the cluster cluster()
// names at that moment, listing its one broker, node 0, as controller.
func answerMetadataAs(t *testing.T, k *kraftFake, cluster func() string) {
	t.Helper()
	host, port, err := net.SplitHostPort(k.seeds[0])
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	k.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		id := cluster()
		resp.ClusterID = &id
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, host, int32(p)
		resp.Brokers = append(resp.Brokers, b)
		resp.ControllerID = 0
		return resp, nil, true
	})
}

// TestMixedAnswerDoesNotRenameCluster: a listed broker that answers for
// another cluster (an address moved under it) makes Committed refuse the
// answer, and leaves the cluster the oracle knows as the bootstrap
// servers named it: a later probe's applied offset is not reported as a
// token of the other cluster. (The check's own Metadata answer was noted
// as the cluster's, and the next probe of that address reported the other
// cluster: a factory whose store was still Unknown then took the other
// cluster's offset as its token, with no event, on Kafka 4.0 behind a
// switched address.)
func TestMixedAnswerDoesNotRenameCluster(t *testing.T) {
	k := newKraftFake(t)
	ids := []string{"cluster-a", "cluster-b"}
	var asked atomic.Int64
	answerMetadataAs(t, k, func() string { return ids[(asked.Add(1)-1)%2] }) // the bootstrap servers' answer, then the broker's
	hwm := func() int64 { return 11 }
	k.quorumHWM.Store(&hwm)
	s, err := New(Config{Store: consistency.NewMemoryStore(), Base: k.build(), ErrClosed: errClosed, ErrConfig: errConfig})
	require.NoError(t, err)
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = s.oracle.Committed(ctx)
	require.ErrorIs(t, err, errMixed)
	cluster, _, err := s.oracle.Applied(ctx, k.seeds[0], -1)
	require.NoError(t, err)
	require.Equal(t, "cluster-a", cluster, "the cluster the bootstrap servers named")
}
