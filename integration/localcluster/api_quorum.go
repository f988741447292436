package localcluster

import (
	"crypto/sha256"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rule of DescribeQuorum: kfake has no KRaft quorum, so the gateway answers
// DescribeQuorum itself, as a combined-mode cluster would: every broker is a
// voter of __cluster_metadata-0, node 0 leads in epoch 1, and the high
// watermark is the next offset the metadata log will write (Kafka's HWM is
// exclusive). Every voter is caught up to it. A mutation is committed before
// its answer is sent (api_mutations.go), so a DescribeQuorum issued after
// that answer returns a high watermark above the mutation's offset; clients
// that emulate tokens on brokers without KIP-1243 rely on it. Like Kafka, a
// request that does not name exactly __cluster_metadata partition 0 is
// answered UNKNOWN_TOPIC_OR_PARTITION in each partition it names. With
// DescribeQuorumAllowed(false) every request is refused
// CLUSTER_AUTHORIZATION_FAILED.

const (
	metadataTopic        = "__cluster_metadata"
	quorumLeader         = int32(0)
	quorumEpoch          = int32(1)
	controllerListener   = "CONTROLLER"
	quorumDirectorySeeds = "localcluster-quorum-directory"
)

func init() { handlers[(*kmsg.DescribeQuorumRequest)(nil).Key()] = handleDescribeQuorum }

func handleDescribeQuorum(cn *conn, x *exchange, _ []byte) ([]byte, error) {
	r, err := x.request()
	if err != nil {
		return nil, err
	}
	resp := cn.b.c.describeQuorum(r.(*kmsg.DescribeQuorumRequest), time.Now())
	cn.answerLocal(x, resp, -1)
	return nil, nil
}

func (c *Cluster) describeQuorum(req *kmsg.DescribeQuorumRequest, now time.Time) *kmsg.DescribeQuorumResponse {
	resp := req.ResponseKind().(*kmsg.DescribeQuorumResponse)
	if c.cfg.quorumRefused {
		// Kafka checks DESCRIBE on CLUSTER before anything else and
		// answers a denial in the top-level error alone.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		if resp.Version >= 2 {
			resp.ErrorMessage = kmsg.StringPtr(kerr.ClusterAuthorizationFailed.Description)
		}
		return resp
	}
	if len(req.Topics) != 1 || req.Topics[0].Topic != metadataTopic ||
		len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != 0 {
		for _, t := range req.Topics {
			rt := kmsg.NewDescribeQuorumResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeQuorumResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.UnknownTopicOrPartition.Code
				rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = -1, -1, -1
				if resp.Version >= 2 {
					rp.ErrorMessage = kmsg.StringPtr(kerr.UnknownTopicOrPartition.Description)
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}

	hwm := c.log.end() + 1
	ms := now.UnixMilli()
	rp := kmsg.NewDescribeQuorumResponseTopicPartition()
	rp.LeaderID, rp.LeaderEpoch, rp.HighWatermark = quorumLeader, quorumEpoch, hwm
	for _, b := range c.brokers {
		v := kmsg.NewDescribeQuorumResponseTopicPartitionReplicaState()
		v.ReplicaID, v.LogEndOffset = b.node, hwm
		v.LastFetchTimestamp, v.LastCaughtUpTimestamp = ms, ms
		if resp.Version >= 2 {
			v.ReplicaDirectoryID = c.directoryID(b.node)
			n := kmsg.NewDescribeQuorumResponseNode()
			n.NodeID = b.node
			if host, port, ok := c.gatewayHostPort(b.node); ok {
				l := kmsg.NewDescribeQuorumResponseNodeListener()
				l.Name, l.Host, l.Port = controllerListener, host, uint16(port)
				n.Listeners = append(n.Listeners, l)
			}
			resp.Nodes = append(resp.Nodes, n)
		}
		rp.CurrentVoters = append(rp.CurrentVoters, v)
	}
	rt := kmsg.NewDescribeQuorumResponseTopic()
	rt.Topic = metadataTopic
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	return resp
}

// directoryID is a voter's metadata log directory id (KIP-853): random in
// Kafka, derived here from the cluster id and node so that it is stable and
// distinct per voter.
func (c *Cluster) directoryID(node int32) [16]byte {
	sum := sha256.Sum256([]byte(quorumDirectorySeeds + "/" + c.cfg.clusterID + "/" + strconv.Itoa(int(node))))
	var id [16]byte
	copy(id[:], sum[:])
	// UUID version 4 bits, as Kafka's random ids have.
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}
