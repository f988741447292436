package localcluster

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// describeQuorumReq asks about the given topic partitions; with none, about
// __cluster_metadata-0.
func describeQuorumReq(version int16, tps ...string) *kmsg.DescribeQuorumRequest {
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.SetVersion(version)
	if len(tps) == 0 {
		tps = []string{"__cluster_metadata", "0"}
	}
	for i := 0; i+1 < len(tps); i += 2 {
		rt := kmsg.NewDescribeQuorumRequestTopic()
		rt.Topic = tps[i]
		p, err := strconv.Atoi(tps[i+1])
		if err != nil {
			panic(err)
		}
		rp := kmsg.NewDescribeQuorumRequestTopicPartition()
		rp.Partition = int32(p)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// quorumPartition returns the single partition of a DescribeQuorum answer.
func quorumPartition(t *testing.T, resp kmsg.Response) kmsg.DescribeQuorumResponseTopicPartition {
	t.Helper()
	dq := resp.(*kmsg.DescribeQuorumResponse)
	require.Zero(t, dq.ErrorCode)
	require.Len(t, dq.Topics, 1)
	require.Equal(t, "__cluster_metadata", dq.Topics[0].Topic)
	require.Len(t, dq.Topics[0].Partitions, 1)
	p := dq.Topics[0].Partitions[0]
	require.Zero(t, p.ErrorCode)
	return p
}

// Every broker, lagging or not, answers with the log's high watermark (the
// next offset to be written) and all brokers as caught-up voters.
func TestDescribeQuorumHighWatermark(t *testing.T) {
	c := newCluster(t, Brokers(3), BrokerLag(0, time.Hour))
	_, st := dialRaw(t, c.Addrs()[2]).do(createTopicsReq(3, nil, "dq"), nil)
	commit := st.Token
	applied, err := c.AppliedOffset(0)
	require.NoError(t, err)
	require.Less(t, applied, commit, "broker 0 lags")

	for node := range int32(3) {
		r := dialRaw(t, c.Addrs()[node])
		for v := int16(0); v <= 2; v++ {
			t.Run(fmt.Sprintf("node %d v%d", node, v), func(t *testing.T) {
				resp, st := r.do(describeQuorumReq(v), nil)
				require.NotNil(t, st, "a native broker's header carries its token")
				require.Equal(t, mustApplied(t, c, node), st.Token)
				p := quorumPartition(t, resp)
				require.Equal(t, commit+1, p.HighWatermark, "HWM is exclusive")
				require.Equal(t, c.LogEnd()+1, p.HighWatermark)
				require.Equal(t, int32(0), p.LeaderID)
				require.Equal(t, int32(1), p.LeaderEpoch)
				require.Empty(t, p.Observers)
				require.Len(t, p.CurrentVoters, 3)
				dirs := make(map[[16]byte]bool)
				for i, voter := range p.CurrentVoters {
					require.Equal(t, int32(i), voter.ReplicaID)
					require.Equal(t, p.HighWatermark, voter.LogEndOffset)
					if v >= 1 {
						require.Positive(t, voter.LastFetchTimestamp)
						require.Positive(t, voter.LastCaughtUpTimestamp)
					}
					if v >= 2 {
						require.NotEqual(t, [16]byte{}, voter.ReplicaDirectoryID)
						dirs[voter.ReplicaDirectoryID] = true
					}
				}
				dq := resp.(*kmsg.DescribeQuorumResponse)
				if v < 2 {
					require.Empty(t, dq.Nodes)
					return
				}
				require.Len(t, dirs, 3, "directory ids are distinct")
				require.Len(t, dq.Nodes, 3)
				for i, n := range dq.Nodes {
					require.Equal(t, int32(i), n.NodeID)
					require.Len(t, n.Listeners, 1)
					require.Equal(t, "CONTROLLER", n.Listeners[0].Name)
					require.Equal(t, c.Addrs()[i], fmt.Sprintf("%s:%d", n.Listeners[0].Host, n.Listeners[0].Port))
				}
			})
		}
	}
}

func mustApplied(t *testing.T, c *Cluster, node int32) int64 {
	t.Helper()
	o, err := c.AppliedOffset(node)
	require.NoError(t, err)
	return o
}

// Anything but exactly __cluster_metadata-0 is answered, as by Kafka, with
// UNKNOWN_TOPIC_OR_PARTITION in each partition asked, and the connection
// stays open.
func TestDescribeQuorumUnknownPartition(t *testing.T) {
	c := newCluster(t, Brokers(1))
	r := dialRaw(t, c.Addrs()[0])
	for _, tc := range []struct {
		name string
		tps  []string
	}{
		{"other topic", []string{"orders", "0"}},
		{"other partition", []string{"__cluster_metadata", "1"}},
		{"two partitions", []string{"__cluster_metadata", "0", "__cluster_metadata", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for v := int16(0); v <= 2; v++ {
				resp, _ := r.do(describeQuorumReq(v, tc.tps...), nil)
				dq := resp.(*kmsg.DescribeQuorumResponse)
				require.Zero(t, dq.ErrorCode)
				require.Len(t, dq.Topics, len(tc.tps)/2)
				for i, rt := range dq.Topics {
					require.Equal(t, tc.tps[2*i], rt.Topic)
					require.Len(t, rt.Partitions, 1)
					require.Equal(t, kerr.UnknownTopicOrPartition.Code, rt.Partitions[0].ErrorCode)
					require.Equal(t, tc.tps[2*i+1], strconv.Itoa(int(rt.Partitions[0].Partition)))
					require.Equal(t, v >= 2, rt.Partitions[0].ErrorMessage != nil, "ErrorMessage is v2+")
				}
			}
		})
	}
	// Still served on the same connection.
	resp, _ := r.do(describeQuorumReq(2), nil)
	require.Equal(t, c.LogEnd()+1, quorumPartition(t, resp).HighWatermark)
	require.Zero(t, c.Stats().ClosedMalformed)
}

// The timing property emulated tokens rely on: a mutation is answered only
// once its records are committed, so a DescribeQuorum sent after the answer,
// to any broker, returns a high watermark above the mutation's offset.
// Through kgo and kadm, as a client of the SDK does it (kadm has no
// DescribeQuorum helper; kgo routes the raw request to the controller, or to
// a broker of our choosing).
func TestDescribeQuorumAfterMutation(t *testing.T) {
	c := newCluster(t, Brokers(3), BrokerLag(1, time.Hour))
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	ctx := testkit.Ctx(t)

	for i := range 10 {
		topic := fmt.Sprintf("hwm-%d", i)
		created, err := adm.CreateTopics(ctx, 2, 1, nil, topic)
		require.NoError(t, err)
		require.NoError(t, created.Error())
		written := lastOffsetOf(t, c, topic)

		for node := range int32(3) {
			resp, err := describeQuorumReq(2).RequestWith(ctx, cl.Broker(int(node)))
			require.NoError(t, err)
			p := quorumPartition(t, resp)
			require.Greater(t, p.HighWatermark, written, "node %d after %s", node, topic)
			require.Equal(t, c.LogEnd()+1, p.HighWatermark, "nothing else was written")
		}
		// kgo sends admin requests to the controller.
		resp, err := describeQuorumReq(1).RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Greater(t, quorumPartition(t, resp).HighWatermark, written)

		_, err = adm.DeleteTopics(ctx, topic)
		require.NoError(t, err)
		end := c.LogEnd()
		resp, err = describeQuorumReq(0).RequestWith(ctx, cl.Broker(1))
		require.NoError(t, err)
		require.Equal(t, end+1, quorumPartition(t, resp).HighWatermark, "after the delete")
	}
	lagging := mustApplied(t, c, 1)
	require.Less(t, lagging, c.LogEnd(), "broker 1 never applied any of it, yet answered the HWM")
}

// lastOffsetOf returns the offset of the last record of the batch that
// created topic.
func lastOffsetOf(t *testing.T, c *Cluster, topic string) int64 {
	t.Helper()
	for _, r := range c.MetadataLog() {
		if tr, ok := r.Value.(*TopicRecord); ok && tr.Name == topic {
			return r.BatchEnd
		}
	}
	t.Fatalf("no TopicRecord for %q in the log", topic)
	return -1
}
