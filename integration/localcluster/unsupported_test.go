package localcluster

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A request kfake does not serve (an API it lacks, a version below its
// minimum) is answered UNSUPPORTED_VERSION in the API's error fields, and
// the connection stays open; kfake alone closes it.
func TestUnsupportedRequestsAnswered(t *testing.T) {
	c := newCluster(t, Brokers(1), SeedTopics(1, "t"))
	r := dialRaw(t, c.Addrs()[0])

	token := kmsg.NewPtrDescribeDelegationTokenRequest()
	token.SetVersion(3)
	resp, _ := r.do(token, nil)
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.(*kmsg.DescribeDelegationTokenResponse).ErrorCode, "an API kfake lacks")

	streams := kmsg.NewPtrStreamsGroupDescribeRequest()
	streams.Groups = []string{"g1", "g2"}
	resp, _ = r.do(streams, nil)
	groups := resp.(*kmsg.StreamsGroupDescribeResponse).Groups
	require.Len(t, groups, 2, "one answer per group")
	for _, g := range groups {
		require.Equal(t, kerr.UnsupportedVersion.Code, g.ErrorCode, g.Group)
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(3) // kfake serves Fetch from v4
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fetch.Topics = append(fetch.Topics, ft)
	resp, _ = r.do(fetch, nil)
	topics := resp.(*kmsg.FetchResponse).Topics
	require.Len(t, topics, 1)
	require.Equal(t, kerr.UnsupportedVersion.Code, topics[0].Partitions[0].ErrorCode, "a version below kfake's minimum")

	// Still open: the next request is served.
	resp, _ = r.do(metadataReq("t"), nil)
	require.Equal(t, map[string]int{"t": 1}, topicNames(resp.(*kmsg.MetadataResponse)))
	require.Zero(t, c.Stats().ClosedMalformed)
}

// Acks=0 produce at a version kfake does not serve gets no answer (none is
// expected) and the connection goes on.
func TestUnsupportedAcksZeroProduceDropped(t *testing.T) {
	c := newCluster(t, Brokers(1), SeedTopics(1, "t"))
	r := dialRaw(t, c.Addrs()[0])
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(2) // kfake serves Produce from v3
	p.Acks = 0
	r.send(p, nil)
	resp, _ := r.do(metadataReq("t"), nil)
	require.Equal(t, map[string]int{"t": 1}, topicNames(resp.(*kmsg.MetadataResponse)))
}
