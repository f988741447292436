package localcluster

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// What the Java client (4.4) needs of answers, as Kafka gives them and
// kfake alone does not: issue 23. The Java test (integration/javaclient)
// runs the client itself; these pin each answer down without a JVM.

// CreateTopics v5+ lists every config of a created topic, each with a
// valid source, also when the request set none (kfake: null) and for
// validate-only requests. The Java Admin throws on a null list and on
// source -1.
func TestCreateTopicsAnswersConfigs(t *testing.T) {
	c := newCluster(t, Brokers(1))
	r := dialRaw(t, c.Addrs()[0])
	for _, tc := range []struct {
		name         string
		configs      map[string]string
		validateOnly bool
	}{
		{"plain", nil, false},
		{"configured", map[string]string{"retention.ms": "3600000"}, false},
		{"validated", map[string]string{"retention.ms": "3600000"}, true},
	} {
		req := createTopicsReq(1, tc.configs, tc.name)
		req.ValidateOnly = tc.validateOnly
		resp, _ := r.do(req, nil)
		topics := resp.(*kmsg.CreateTopicsResponse).Topics
		require.Len(t, topics, 1)
		rt := topics[0]
		require.Zero(t, rt.ErrorCode, tc.name)
		require.NotEmpty(t, rt.Configs, "%s: the topic's configs", tc.name)
		sources := map[string]int8{}
		for _, e := range rt.Configs {
			require.NotNil(t, e.Value, "%s: %s", tc.name, e.Name)
			sources[e.Name] = e.Source
		}
		want := int8(kmsg.ConfigSourceDefaultConfig)
		if tc.configs != nil {
			want = int8(kmsg.ConfigSourceDynamicTopicConfig)
		}
		require.Equal(t, want, sources["retention.ms"], "%s: source of retention.ms", tc.name)
		require.Equal(t, int8(kmsg.ConfigSourceDefaultConfig), sources["cleanup.policy"], "%s: source of a default", tc.name)
	}
}

// DescribeTopicPartitions sends empty, not null, eligible-leader-replica
// lists, as Kafka does without ELR; the Java Admin's describeTopics reads
// them unchecked. (kmsg decodes null as nil and an empty list as non-nil.)
func TestDescribeTopicPartitionsELRLists(t *testing.T) {
	c := newCluster(t, Brokers(2), SeedTopics(2, "t"))
	r := dialRaw(t, c.Addrs()[0])
	for _, named := range []bool{true, false} {
		req := kmsg.NewPtrDescribeTopicPartitionsRequest()
		req.ResponsePartitionLimit = 100
		if named {
			rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
			rt.Topic = "t"
			req.Topics = append(req.Topics, rt)
		}
		resp, _ := r.do(req, nil)
		topics := resp.(*kmsg.DescribeTopicPartitionsResponse).Topics
		require.Len(t, topics, 1)
		require.Len(t, topics[0].Partitions, 2)
		for _, p := range topics[0].Partitions {
			require.NotNil(t, p.EligibleLeaderReplicas, "named=%v partition %d", named, p.Partition)
			require.NotNil(t, p.LastKnownELR, "named=%v partition %d", named, p.Partition)
		}
	}
}

// DescribeConfigs synonyms are Kafka's: none unless asked for; when asked,
// the entry itself first, then the default a topic value overrides. kfake
// sends the default alone, asked or not, and the image's values had none.
func TestDescribeConfigsSynonyms(t *testing.T) {
	c := newCluster(t, Brokers(1))
	r := dialRaw(t, c.Addrs()[0])
	resp, _ := r.do(createTopicsReq(1, map[string]string{"retention.ms": "3600000"}, "t"), nil)
	require.Zero(t, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)

	for _, include := range []bool{false, true} {
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(4)
		req.IncludeSynonyms = include
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
		req.Resources = append(req.Resources, rr)
		resp, _ := r.do(req, nil)
		res := resp.(*kmsg.DescribeConfigsResponse).Resources
		require.Len(t, res, 1)
		require.Equal(t, kerr.ErrorForCode(0), kerr.ErrorForCode(res[0].ErrorCode))
		entries := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, e := range res[0].Configs {
			entries[e.Name] = e
		}
		retention, policy := entries["retention.ms"], entries["cleanup.policy"]
		if !include {
			require.Empty(t, retention.ConfigSynonyms, "synonyms not asked for")
			require.Empty(t, policy.ConfigSynonyms, "synonyms not asked for")
			continue
		}
		require.Len(t, retention.ConfigSynonyms, 2, "the dynamic value, then the default")
		require.Equal(t, kmsg.ConfigSourceDynamicTopicConfig, retention.ConfigSynonyms[0].Source)
		require.Equal(t, "3600000", *retention.ConfigSynonyms[0].Value)
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, retention.ConfigSynonyms[1].Source)
		require.Len(t, policy.ConfigSynonyms, 1, "a default is its own only synonym")
		require.Equal(t, kmsg.ConfigSourceDefaultConfig, policy.ConfigSynonyms[0].Source)
	}
}
