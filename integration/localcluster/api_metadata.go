package localcluster

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rules of the APIs that describe the cluster: Metadata and
// DescribeTopicPartitions are rendered from the broker's image (a lagging
// broker omits topics it has not applied and keeps deleted ones); every
// broker address kfake reports is replaced by its gateway's.

// handler looks at a request before it is forwarded. It returns the frame
// to forward (the original or a rewritten one), or sets x.local to answer
// itself, or returns nil to forward nothing.
type handler func(cn *conn, x *exchange, frame []byte) ([]byte, error)

var handlers = map[int16]handler{}

func init() {
	handlers[3] = handleMetadata
	handlers[75] = handleDescribeTopicPartitions
	handlers[60] = handleDescribeCluster
	handlers[10] = handleFindCoordinator
}

// gatewayOf replaces a kfake address by the gateway of the same node in the
// cluster serving this connection.
func (cn *conn) gatewayOf(node int32, host *string, port *int32) {
	if h, p, ok := cn.b.c.gatewayHostPort(node); ok {
		*host, *port = h, p
	}
}

func handleMetadata(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	r, err := x.request()
	if err != nil {
		return nil, err
	}
	req := r.(*kmsg.MetadataRequest)
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.MetadataResponse)
		for i := range resp.Brokers {
			br := &resp.Brokers[i]
			cn.gatewayOf(br.NodeID, &br.Host, &br.Port)
		}
		var token int64
		cn.b.view(func(im *image) {
			token = im.offset
			resp.Topics = cn.renderMetadataTopics(im, req, resp.Topics)
		})
		return token
	}
	return frame, nil
}

func (cn *conn) renderMetadataTopics(im *image, req *kmsg.MetadataRequest, kf []kmsg.MetadataResponseTopic) []kmsg.MetadataResponseTopic {
	byID := make(map[[16]byte]*kmsg.MetadataResponseTopic, len(kf))
	for i := range kf {
		if kf[i].ErrorCode == 0 {
			byID[kf[i].TopicID] = &kf[i]
		}
	}
	stale := false
	var out []kmsg.MetadataResponseTopic
	if req.Topics == nil {
		for _, t := range im.sortedTopics() {
			out = append(out, renderMetadataTopic(t, byID[t.id]))
		}
		stale = len(out) != len(kf)
	} else {
		for _, kt := range kf {
			name := ""
			if kt.Topic != nil {
				name = *kt.Topic
			}
			switch kt.ErrorCode {
			case 0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicID.Code:
			default: // an ACL denial or an injected fault: kfake's answer stands
				out = append(out, kt)
				continue
			}
			t := im.topic(name, kt.TopicID)
			if t == nil {
				if kt.ErrorCode == 0 {
					stale = true
					kt.ErrorCode = kerr.UnknownTopicOrPartition.Code
					kt.TopicID = [16]byte{}
					kt.Partitions = nil
					kt.IsInternal = false
				}
				out = append(out, kt)
				continue
			}
			nt := renderMetadataTopic(t, byID[t.id])
			if kt.ErrorCode != 0 || len(nt.Partitions) != len(kt.Partitions) {
				stale = true
			}
			out = append(out, nt)
		}
	}
	if stale {
		cn.b.c.stats.stale.Add(1)
	}
	return out
}

func renderMetadataTopic(t *topicImage, kf *kmsg.MetadataResponseTopic) kmsg.MetadataResponseTopic {
	nt := kmsg.NewMetadataResponseTopic()
	nt.Topic = kmsg.StringPtr(t.name)
	nt.TopicID = t.id
	if kf != nil {
		nt.IsInternal = kf.IsInternal
		nt.AuthorizedOperations = kf.AuthorizedOperations
	}
	for _, p := range t.sortedPartitions() {
		pi := t.partitions[p]
		np := kmsg.NewMetadataResponseTopicPartition()
		np.Partition = p
		np.Leader = pi.leader
		np.LeaderEpoch = pi.leaderEpoch
		np.Replicas = append([]int32(nil), pi.replicas...)
		np.ISR = append([]int32(nil), pi.isr...)
		nt.Partitions = append(nt.Partitions, np)
	}
	return nt
}

func handleDescribeTopicPartitions(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	r, err := x.request()
	if err != nil {
		return nil, err
	}
	req := r.(*kmsg.DescribeTopicPartitionsRequest)
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.DescribeTopicPartitionsResponse)
		var token int64
		cn.b.view(func(im *image) {
			token = im.offset
			resp.Topics = cn.renderDescribedTopics(im, req, resp.Topics)
			resp.NextCursor = nil // the rendering is not paged
		})
		return token
	}
	return frame, nil
}

func (cn *conn) renderDescribedTopics(im *image, req *kmsg.DescribeTopicPartitionsRequest, kf []kmsg.DescribeTopicPartitionsResponseTopic) []kmsg.DescribeTopicPartitionsResponseTopic {
	byName := make(map[string]*kmsg.DescribeTopicPartitionsResponseTopic, len(kf))
	for i := range kf {
		if kf[i].Topic != nil {
			byName[*kf[i].Topic] = &kf[i]
		}
	}
	render := func(t *topicImage) kmsg.DescribeTopicPartitionsResponseTopic {
		nt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		nt.Topic = kmsg.StringPtr(t.name)
		nt.TopicID = t.id
		if k := byName[t.name]; k != nil && k.TopicID == t.id {
			nt.IsInternal = k.IsInternal
			nt.AuthorizedOperations = k.AuthorizedOperations
		}
		for _, p := range t.sortedPartitions() {
			pi := t.partitions[p]
			np := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
			np.Partition = p
			np.LeaderID = pi.leader
			np.LeaderEpoch = pi.leaderEpoch
			np.Replicas = append([]int32(nil), pi.replicas...)
			np.ISR = append([]int32(nil), pi.isr...)
			// Nullable, but Kafka sends empty lists when no replica is
			// eligible, and the Java client reads them without a check.
			np.EligibleLeaderReplicas = []int32{}
			np.LastKnownELR = []int32{}
			nt.Partitions = append(nt.Partitions, np)
		}
		return nt
	}
	var out []kmsg.DescribeTopicPartitionsResponseTopic
	if len(req.Topics) == 0 {
		for _, t := range im.sortedTopics() {
			out = append(out, render(t))
		}
		if len(out) != len(kf) {
			cn.b.c.stats.stale.Add(1)
		}
		return out
	}
	for _, rt := range req.Topics {
		if k := byName[rt.Topic]; k != nil && k.ErrorCode != 0 && k.ErrorCode != kerr.UnknownTopicOrPartition.Code {
			out = append(out, *k)
			continue
		}
		t := im.byName[rt.Topic]
		if t == nil {
			nt := kmsg.NewDescribeTopicPartitionsResponseTopic()
			nt.Topic = kmsg.StringPtr(rt.Topic)
			nt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			out = append(out, nt)
			if k := byName[rt.Topic]; k != nil && k.ErrorCode == 0 {
				cn.b.c.stats.stale.Add(1)
			}
			continue
		}
		out = append(out, render(t))
	}
	return out
}

func handleDescribeCluster(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.DescribeClusterResponse)
		for i := range resp.Brokers {
			br := &resp.Brokers[i]
			cn.gatewayOf(br.NodeID, &br.Host, &br.Port)
		}
		return -1
	}
	return frame, nil
}

func handleFindCoordinator(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.FindCoordinatorResponse)
		if resp.ErrorCode == 0 && resp.NodeID >= 0 {
			cn.gatewayOf(resp.NodeID, &resp.Host, &resp.Port)
		}
		for i := range resp.Coordinators {
			co := &resp.Coordinators[i]
			if co.ErrorCode == 0 && co.NodeID >= 0 {
				cn.gatewayOf(co.NodeID, &co.Host, &co.Port)
			}
		}
		return -1
	}
	return frame, nil
}
