package localcluster

import (
	"testing"
	"time"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Native(false): no response header carries tag 0, whether kfake answered
// (Metadata), the gateway rewrote kfake's answer (CreateTopics) or answered
// itself (DescribeQuorum); offsets are still reported the Kafka 4.4 way.
func TestNotNativeSendsNoHeaderTokens(t *testing.T) {
	c := newCluster(t, Brokers(2), Native(false), SeedTopics(1, "seed"))
	r := dialRaw(t, c.Addrs()[1])

	resp, st := r.do(metadataReq(), nil)
	require.Nil(t, st, "Metadata")
	require.Equal(t, map[string]int{"seed": 1}, topicNames(resp.(*kmsg.MetadataResponse)))
	require.Len(t, resp.(*kmsg.MetadataResponse).Brokers, 2)

	resp, st = r.do(createTopicsReq(1, nil, "nn"), nil)
	require.Nil(t, st, "CreateTopics")
	require.Zero(t, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	commit := c.LogEnd()

	resp, st = r.do(describeQuorumReq(2), nil)
	require.Nil(t, st, "DescribeQuorum")
	require.Equal(t, commit+1, quorumPartition(t, resp).HighWatermark)

	require.NoError(t, c.WaitApplied(testkit.Ctx(t), 1, commit))
	require.Equal(t, commit, featuresEpoch(t, c, 1, 4).FinalizedFeaturesEpoch)

	// A plain kgo/kadm client works as against Kafka 4.4.
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	created, err := adm.CreateTopic(testkit.Ctx(t), 1, 1, nil, "kadm")
	require.NoError(t, err)
	require.NoError(t, created.Err)
}

// Native(false): a request's tag 0 is skipped like any unknown header tag.
// A token above a lagging broker's applied offset is neither held nor
// answered INCONSISTENT_METADATA: the broker serves its stale image at once.
// A foreign cluster id does not close the connection.
func TestNotNativeIgnoresRequestTokens(t *testing.T) {
	c := newCluster(t, Brokers(2), Native(false), WaitMax(time.Minute))
	require.NoError(t, c.PauseApply(0))
	_, _ = dialRaw(t, c.Addrs()[1]).do(createTopicsReq(1, nil, "stale"), nil)
	commit := c.LogEnd()
	applied := mustApplied(t, c, 0)
	require.Less(t, applied, commit)

	r := dialRaw(t, c.Addrs()[0])
	other := "another-cluster"
	for _, hs := range []*headerState{
		{token: commit},
		{token: commit + 1000},
		{clusterID: &other, token: commit},
	} {
		resp, st := r.do(metadataReq("stale"), hs)
		require.Nil(t, st)
		topics := resp.(*kmsg.MetadataResponse).Topics
		require.Len(t, topics, 1)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, topics[0].ErrorCode, "stale: broker 0 has not applied the topic")

		produce := kmsg.NewPtrProduceRequest()
		produce.SetVersion(9)
		produce.Acks = -1
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "stale"
		pt.Partitions = append(pt.Partitions, kmsg.NewProduceRequestTopicPartition())
		produce.Topics = append(produce.Topics, pt)
		presp, st := r.do(produce, hs)
		require.Nil(t, st)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	}
	s := c.Stats()
	require.Zero(t, s.Waits, "no request was held")
	require.Zero(t, s.Inconsistent)
	require.Zero(t, s.ClusterIDMismatches)
	require.Positive(t, s.StaleAnswers)
	require.Equal(t, applied, mustApplied(t, c, 0), "still paused: the answers above were stale")

	// The offsets a client emulates tokens with still tell the truth.
	require.Equal(t, applied, featuresEpoch(t, c, 0, 3).FinalizedFeaturesEpoch)
	resp, _ := r.do(describeQuorumReq(0), nil)
	require.Equal(t, commit+1, quorumPartition(t, resp).HighWatermark)
}

// FeaturesEpoch(false) and DescribeQuorumAllowed(false) make the brokers a
// client cannot learn offsets from: no FinalizedFeaturesEpoch in
// ApiVersions, DescribeQuorum refused as without DESCRIBE on CLUSTER. The
// KIP-1242 check and everything else still work.
func TestOffsetsWithheld(t *testing.T) {
	c := newCluster(t, Brokers(1), Native(false), FeaturesEpoch(false), DescribeQuorumAllowed(false))
	av := featuresEpoch(t, c, 0, 4)
	require.Equal(t, int64(-1), av.FinalizedFeaturesEpoch)
	require.Empty(t, av.FinalizedFeatures)
	require.NotEmpty(t, av.SupportedFeatures, "kfake's supported features stay")

	r := dialRaw(t, c.Addrs()[0])
	for v := int16(0); v <= 2; v++ {
		resp, _ := r.do(describeQuorumReq(v), nil)
		dq := resp.(*kmsg.DescribeQuorumResponse)
		require.Equal(t, kerr.ClusterAuthorizationFailed.Code, dq.ErrorCode, "v%d", v)
		require.Empty(t, dq.Topics)
		require.Equal(t, v >= 2, dq.ErrorMessage != nil)
	}
	resp, _ := r.do(metadataReq(), nil)
	require.Len(t, resp.(*kmsg.MetadataResponse).Brokers, 1, "the connection is still served")

	// The defaults report both.
	c = newCluster(t, Brokers(1), Native(false))
	require.Equal(t, int64(0), featuresEpoch(t, c, 0, 4).FinalizedFeaturesEpoch)
	resp, _ = dialRaw(t, c.Addrs()[0]).do(describeQuorumReq(2), nil)
	require.Equal(t, int64(1), quorumPartition(t, resp).HighWatermark)
}
