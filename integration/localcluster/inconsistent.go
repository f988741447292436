package localcluster

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rule of INCONSISTENT_METADATA: a broker that will not serve a request
// because its image is older than the request's token says so in the API's
// own error fields, the way Kafka reports every per-resource error: each
// topic, partition or resource of the request gets the code. APIs with one
// top-level error code get it there. An API with no error field (or a
// Metadata request for all topics, which names nothing to fail) cannot say
// it before v13 (which has a top-level code); such requests are held, then
// their connection is closed, never served from older metadata: see
// conn.awaitToken.

// inconsistentAnswer builds the INCONSISTENT_METADATA answer to x, and
// reports false when the API has no way to carry it.
func (cn *conn) inconsistentAnswer(x *exchange) (kmsg.Response, bool) {
	return cn.errorAnswer(x, cn.b.c.cfg.inconsistentCode)
}

// errorAnswer builds an answer to x with code in every error field that
// the request's topics, partitions or resources call for, and reports false
// when the API has no way to carry it.
func (cn *conn) errorAnswer(x *exchange, code int16) (kmsg.Response, bool) {
	r, err := x.request()
	if err != nil {
		return nil, false
	}
	resp := r.ResponseKind()
	switch req := r.(type) {
	case *kmsg.ProduceRequest:
		if req.Acks == 0 {
			return nil, false
		}
		out := resp.(*kmsg.ProduceResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.BaseOffset, rp.LogAppendTime, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.FetchRequest:
		out := resp.(*kmsg.FetchResponse)
		out.SessionID = req.SessionID
		for _, t := range req.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
		if len(out.Topics) == 0 {
			out.ErrorCode = code
		}
	case *kmsg.ListOffsetsRequest:
		out := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.MetadataRequest:
		out := resp.(*kmsg.MetadataResponse)
		out.ClusterID = kmsg.StringPtr(cn.b.c.cfg.clusterID)
		out.ControllerID = -1
		if len(req.Topics) == 0 {
			// All topics (or none) names nothing to fail; v13 has a
			// top-level error code (KIP-1102), older versions no field.
			if req.Version < 13 {
				return nil, false
			}
			out.ErrorCode = code
			return resp, true
		}
		for _, t := range req.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.DescribeTopicPartitionsRequest:
		if len(req.Topics) == 0 {
			return nil, false
		}
		out := resp.(*kmsg.DescribeTopicPartitionsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(t.Topic), code
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.DescribeConfigsRequest:
		out := resp.(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.CreateTopicsRequest:
		out := resp.(*kmsg.CreateTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.DeleteTopicsRequest:
		out := resp.(*kmsg.DeleteTopicsResponse)
		for _, n := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.ErrorCode = kmsg.StringPtr(n), code
			out.Topics = append(out.Topics, rt)
		}
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, code
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.CreatePartitionsRequest:
		out := resp.(*kmsg.CreatePartitionsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, code
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.AlterConfigsRequest:
		out := resp.(*kmsg.AlterConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.IncrementalAlterConfigsRequest:
		out := resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode = r.ResourceType, r.ResourceName, code
			out.Resources = append(out.Resources, rr)
		}
	case *kmsg.OffsetCommitRequest:
		out := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	case *kmsg.FindCoordinatorRequest:
		out := resp.(*kmsg.FindCoordinatorResponse)
		out.ErrorCode, out.NodeID = code, -1
		for _, k := range req.CoordinatorKeys {
			rc := kmsg.NewFindCoordinatorResponseCoordinator()
			rc.Key, rc.NodeID, rc.ErrorCode = k, -1, code
			out.Coordinators = append(out.Coordinators, rc)
		}
	case *kmsg.StreamsGroupDescribeRequest:
		out := resp.(*kmsg.StreamsGroupDescribeResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewStreamsGroupDescribeResponseGroup()
			rg.Group, rg.ErrorCode = g, code
			out.Groups = append(out.Groups, rg)
		}
	default:
		if !setTopLevelError(resp, code) {
			return nil, false
		}
	}
	return resp, true
}

// setTopLevelError sets the response's top-level ErrorCode field, if it has
// one (JoinGroup, Heartbeat, FindCoordinator before v4, DescribeCluster…).
func setTopLevelError(resp kmsg.Response, code int16) bool {
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	f := v.Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return false
	}
	f.SetInt(int64(code))
	return true
}
