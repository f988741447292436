package localcluster

import (
	"testing"
	"time"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func apiVersionsReq(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(version)
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	return req
}

// featuresEpoch asks the gateway of node for its ApiVersions at version.
func featuresEpoch(t *testing.T, c *Cluster, node int32, version int16) *kmsg.ApiVersionsResponse {
	t.Helper()
	resp, st := dialRaw(t, c.Addrs()[node]).do(apiVersionsReq(version), nil)
	require.Nil(t, st, "ApiVersions keeps its v0 response header")
	av := resp.(*kmsg.ApiVersionsResponse)
	require.Zero(t, av.ErrorCode)
	return av
}

// FinalizedFeaturesEpoch is the offset each broker has applied, as on a
// KRaft broker: a lagging broker's stays behind the log until it catches up.
func TestApiVersionsFeaturesEpochIsAppliedOffset(t *testing.T) {
	c := newCluster(t, Brokers(3), BrokerLag(1, time.Hour))
	require.NoError(t, c.PauseApply(0))
	for node := range int32(3) {
		for _, v := range []int16{3, 4, 5} {
			av := featuresEpoch(t, c, node, v)
			require.Equal(t, int64(0), av.FinalizedFeaturesEpoch, "node %d v%d: only the cluster id record is applied", node, v)
		}
	}

	// Through kfake's controller (the last broker), which applies at once:
	// a write is answered once the answering broker applied it.
	_, st := dialRaw(t, c.Addrs()[2]).do(createTopicsReq(2, nil, "fe"), nil)
	commit := st.Token
	require.Equal(t, c.LogEnd(), commit)

	require.Equal(t, commit, featuresEpoch(t, c, 2, 4).FinalizedFeaturesEpoch)
	for _, node := range []int32{0, 1} { // one is paused, one lags
		applied, err := c.AppliedOffset(node)
		require.NoError(t, err)
		require.Less(t, applied, commit)
		require.Equal(t, applied, featuresEpoch(t, c, node, 4).FinalizedFeaturesEpoch, "node %d", node)
	}

	require.NoError(t, c.SetLag(1, 0))
	require.NoError(t, c.ResumeApply(0))
	for _, node := range []int32{0, 1} {
		require.NoError(t, c.WaitApplied(testkit.Ctx(t), node, commit))
		require.Equal(t, commit, featuresEpoch(t, c, node, 5).FinalizedFeaturesEpoch, "node %d caught up", node)
	}
}

// The rest of the answer is kfake's, with metadata.version finalized and
// DescribeQuorum advertised; kfake's KIP-1242 check still answers.
func TestApiVersionsKeepsKfakeAnswer(t *testing.T) {
	c := newCluster(t, Brokers(2), ClusterID("av"))
	av := featuresEpoch(t, c, 0, 5)
	var mv *kmsg.ApiVersionsResponseFinalizedFeature
	for i, f := range av.FinalizedFeatures {
		if f.Name == "metadata.version" {
			mv = &av.FinalizedFeatures[i]
		}
	}
	require.NotNil(t, mv, "KRaft always finalizes metadata.version")
	require.Positive(t, mv.MaxVersionLevel)
	require.Equal(t, mv.MinVersionLevel, mv.MaxVersionLevel)

	keys := make(map[int16]kmsg.ApiVersionsResponseApiKey)
	for i, k := range av.ApiKeys {
		keys[k.ApiKey] = k
		if i > 0 {
			require.Less(t, av.ApiKeys[i-1].ApiKey, k.ApiKey, "keys stay sorted")
		}
	}
	require.Equal(t, int16(2), keys[55].MaxVersion, "DescribeQuorum v0-2, answered by the gateway")
	require.Contains(t, keys, int16(3), "kfake's keys are kept")

	// Before v3 there are no features: kfake's answer as is.
	old := featuresEpoch(t, c, 0, 2)
	require.Equal(t, int64(-1), old.FinalizedFeaturesEpoch)
	for _, k := range old.ApiKeys {
		require.NotEqual(t, int16(55), k.ApiKey, "v2 answers are not rewritten")
	}

	// KIP-1242: a v5 request naming another cluster is refused by kfake,
	// and the refusal is passed on untouched.
	req := apiVersionsReq(5)
	req.ClusterID, req.NodeID = kmsg.StringPtr("other"), 0
	resp, _ := dialRaw(t, c.Addrs()[0]).do(req, nil)
	require.Equal(t, kerr.RebootstrapRequired.Code, resp.(*kmsg.ApiVersionsResponse).ErrorCode)
	req.ClusterID, req.NodeID = kmsg.StringPtr("av"), 1
	resp, _ = dialRaw(t, c.Addrs()[0]).do(req, nil)
	require.Equal(t, kerr.RebootstrapRequired.Code, resp.(*kmsg.ApiVersionsResponse).ErrorCode, "node 1 asked of node 0")
	req.NodeID = 0
	resp, _ = dialRaw(t, c.Addrs()[0]).do(req, nil)
	require.Zero(t, resp.(*kmsg.ApiVersionsResponse).ErrorCode)
	require.Equal(t, int64(0), resp.(*kmsg.ApiVersionsResponse).FinalizedFeaturesEpoch)
}

// A kfake that serves only old ApiVersions answers a newer request with a
// v0-form UNSUPPORTED_VERSION (KIP-511); the gateway passes it on, so the
// client retries lower and connects.
func TestApiVersionsDowngradePassesThrough(t *testing.T) {
	vs := kversion.Stable()
	vs.SetMaxKeyVersion(18, 2)
	c := newCluster(t, Brokers(1), KfakeOpts(kfake.MaxVersions(vs)))
	cl := newClient(t, c.Addrs(), kgo.RetryTimeout(5*time.Second))
	resp, err := metadataReq().RequestWith(testkit.Ctx(t), cl)
	require.NoError(t, err)
	require.Len(t, resp.Brokers, 1)
	require.Zero(t, c.Stats().ClosedMalformed)
}
