package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func metaWith(topics ...kmsg.MetadataResponseTopic) *kmsg.MetadataResponse {
	m := kmsg.NewPtrMetadataResponse()
	m.Topics = topics
	return m
}

func metaTopic(name string, id byte, partitions int, code int16) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic, t.ErrorCode = kmsg.StringPtr(name), code
	t.TopicID[0] = id
	for range partitions {
		t.Partitions = append(t.Partitions, kmsg.NewMetadataResponseTopicPartition())
	}
	return t
}

func TestShownByCreateTopics(t *testing.T) {
	req := kmsg.NewPtrCreateTopicsRequest()
	resp := kmsg.NewPtrCreateTopicsResponse()
	ok := kmsg.NewCreateTopicsResponseTopic()
	ok.Topic, ok.TopicID[0] = "a", 7
	failed := kmsg.NewCreateTopicsResponseTopic()
	failed.Topic, failed.ErrorCode = "b", kerr.TopicAlreadyExists.Code
	resp.Topics = []kmsg.CreateTopicsResponseTopic{ok, failed}

	s, covered := shownBy(req, resp)
	require.True(t, covered)
	require.NotNil(t, s)
	q := s.ask.(*kmsg.MetadataRequest)
	require.False(t, q.AllowAutoTopicCreation, "asking must never create the topic")
	require.Len(t, q.Topics, 1, "only the created topic is asked for")

	require.True(t, s.shows(metaWith(metaTopic("a", 7, 1, 0))))
	require.False(t, s.shows(metaWith(metaTopic("a", 7, 1, kerr.UnknownTopicOrPartition.Code))), "not yet applied")
	require.False(t, s.shows(metaWith(metaTopic("a", 8, 1, 0))), "another topic of that name")
	require.False(t, s.shows(metaWith()))
	require.False(t, s.shows(kmsg.NewPtrDescribeConfigsResponse()))

	req.ValidateOnly = true
	s, covered = shownBy(req, resp)
	require.True(t, covered)
	require.Nil(t, s, "validate only changes nothing")

	req.ValidateOnly = false
	resp.Topics = resp.Topics[1:]
	s, covered = shownBy(req, resp)
	require.True(t, covered)
	require.Nil(t, s, "every topic failed: nothing to show")
}

func TestShownByDeleteTopics(t *testing.T) {
	req := kmsg.NewPtrDeleteTopicsRequest()
	resp := kmsg.NewPtrDeleteTopicsResponse()
	gone := kmsg.NewDeleteTopicsResponseTopic()
	gone.Topic, gone.TopicID[0] = kmsg.StringPtr("a"), 7
	resp.Topics = []kmsg.DeleteTopicsResponseTopic{gone}

	s, covered := shownBy(req, resp)
	require.True(t, covered)
	require.True(t, s.floor, "a broker behind the creation lists no topic either")
	require.True(t, s.shows(metaWith(metaTopic("a", 0, 0, kerr.UnknownTopicOrPartition.Code))))
	require.True(t, s.shows(metaWith()))
	require.True(t, s.shows(metaWith(metaTopic("a", 9, 1, 0))), "created again since")
	require.False(t, s.shows(metaWith(metaTopic("a", 7, 1, 0))), "still there")
	require.False(t, s.shows(metaWith(metaTopic("a", 7, 1, kerr.TopicAuthorizationFailed.Code))), "not told")

	resp.Topics[0].Topic = nil // deleted by id, answer names none
	_, covered = shownBy(req, resp)
	require.False(t, covered)
}

func TestShownByCreatePartitions(t *testing.T) {
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "a", 3
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	ok := kmsg.NewCreatePartitionsResponseTopic()
	ok.Topic = "a"
	resp.Topics = append(resp.Topics, ok)

	s, covered := shownBy(req, resp)
	require.True(t, covered)
	require.True(t, s.shows(metaWith(metaTopic("a", 1, 3, 0))))
	require.False(t, s.shows(metaWith(metaTopic("a", 1, 2, 0))))

	req.ValidateOnly = true
	s, covered = shownBy(req, resp)
	require.True(t, covered)
	require.Nil(t, s)
}

func describedConfig(topic, name string, value *string, source kmsg.ConfigSource) *kmsg.DescribeConfigsResponse {
	d := kmsg.NewPtrDescribeConfigsResponse()
	res := kmsg.NewDescribeConfigsResponseResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value, c.Source = name, value, source
	res.Configs = append(res.Configs, c)
	d.Resources = append(d.Resources, res)
	return d
}

func TestShownByIncrementalAlterConfigs(t *testing.T) {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
	set := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	set.Name, set.Op, set.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("5")
	res.Configs = append(res.Configs, set)
	req.Resources = append(req.Resources, res)
	resp := kmsg.NewPtrIncrementalAlterConfigsResponse()
	ok := kmsg.NewIncrementalAlterConfigsResponseResource()
	ok.ResourceType, ok.ResourceName = kmsg.ConfigResourceTypeTopic, "a"
	resp.Resources = append(resp.Resources, ok)

	s, covered := shownBy(req, resp)
	require.True(t, covered)
	d := s.ask.(*kmsg.DescribeConfigsRequest)
	require.Equal(t, []string{"retention.ms"}, d.Resources[0].ConfigNames)
	require.True(t, s.shows(describedConfig("a", "retention.ms", kmsg.StringPtr("5"), kmsg.ConfigSourceDynamicTopicConfig)))
	require.False(t, s.shows(describedConfig("a", "retention.ms", kmsg.StringPtr("6"), kmsg.ConfigSourceDynamicTopicConfig)))
	require.False(t, s.shows(describedConfig("b", "retention.ms", kmsg.StringPtr("5"), kmsg.ConfigSourceDynamicTopicConfig)))

	req.Resources[0].Configs[0].Op = kmsg.IncrementalAlterConfigOpDelete
	s, _ = shownBy(req, resp)
	require.True(t, s.shows(describedConfig("a", "retention.ms", kmsg.StringPtr("604800000"), kmsg.ConfigSourceDefaultConfig)))
	require.False(t, s.shows(describedConfig("a", "retention.ms", kmsg.StringPtr("5"), kmsg.ConfigSourceDynamicTopicConfig)))

	req.Resources[0].Configs[0].Op, req.Resources[0].Configs[0].Value = kmsg.IncrementalAlterConfigOpAppend, kmsg.StringPtr("x")
	s, _ = shownBy(req, resp)
	require.True(t, s.shows(describedConfig("a", "retention.ms", kmsg.StringPtr("w,x"), kmsg.ConfigSourceDynamicTopicConfig)))
	require.False(t, s.shows(describedConfig("a", "retention.ms", kmsg.StringPtr("w"), kmsg.ConfigSourceDynamicTopicConfig)))

	// A broker config: no broker's answer is asked for it here.
	resp.Resources[0].ResourceType = kmsg.ConfigResourceTypeBroker
	_, covered = shownBy(req, resp)
	require.False(t, covered)
}

func TestShownByUncoveredKinds(t *testing.T) {
	_, covered := shownBy(kmsg.NewPtrCreateACLsRequest(), kmsg.NewPtrCreateACLsResponse())
	require.False(t, covered)
	_, covered = shownBy(nil, kmsg.NewPtrCreateTopicsResponse())
	require.False(t, covered, "a write whose request was not noted")
}

func TestWriteNotes(t *testing.T) {
	var w writeNotes
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = "a"
	req.Topics = append(req.Topics, rt)
	body := req.AppendTo(nil)
	w.note(5, int16(kmsg.CreateTopics), 7, body)
	w.note(6, int16(kmsg.CreateTopics), 7, []byte{0xff}) // not a body: not kept
	require.Nil(t, w.take(6))
	got, ok := w.take(5).(*kmsg.CreateTopicsRequest)
	require.True(t, ok)
	require.Equal(t, "a", got.Topics[0].Topic)
	require.Nil(t, w.take(5), "taken once")
	for corr := range int32(20) { // more than it keeps: the oldest go
		w.note(corr, int16(kmsg.CreateTopics), 7, body)
	}
	require.Nil(t, w.take(0))
	require.NotNil(t, w.take(19))
}
