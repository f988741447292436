package localcluster

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rules of the data plane: a broker answers UNKNOWN_TOPIC_OR_PARTITION for
// a partition its image does not have, as a broker that has not applied the
// topic's creation does. Produce never reaches kfake for such a partition
// (the write must not happen); Fetch and ListOffsets are reads, so kfake's
// answer is rewritten. Leader hints (KIP-951 node endpoints) are rewritten
// to gateway addresses.

func init() {
	handlers[0] = handleProduce
	handlers[1] = handleFetch
	handlers[2] = handleListOffsets
}

type topicPartition struct {
	topic string
	id    [16]byte
	part  int32
}

func handleProduce(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	r, err := x.request()
	if err != nil {
		return nil, err
	}
	req := r.(*kmsg.ProduceRequest)
	var unknown []topicPartition
	cn.b.view(func(im *image) {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if !im.hasPartition(t.Topic, t.TopicID, p.Partition) {
					unknown = append(unknown, topicPartition{t.Topic, t.TopicID, p.Partition})
				}
			}
		}
	})
	if len(unknown) > 0 {
		cn.b.c.stats.stale.Add(1)
		frame = dropProducePartitions(req, unknown, frame, x)
	}
	if req.Acks == 0 {
		// No response follows; the gateway only forwards what is known.
		if frame != nil {
			return nil, cn.send(frame)
		}
		return nil, nil
	}
	if frame == nil { // every partition is unknown: answer here
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		addProduceErrors(resp, unknown, kerr.UnknownTopicOrPartition.Code)
		cn.answerLocal(x, resp, -1)
		return nil, nil
	}
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.ProduceResponse)
		addProduceErrors(resp, unknown, kerr.UnknownTopicOrPartition.Code)
		for i := range resp.Brokers {
			br := &resp.Brokers[i]
			cn.gatewayOf(br.NodeID, &br.Host, &br.Port)
		}
		return -1
	}
	return frame, nil
}

// dropProducePartitions removes the unknown partitions from the request and
// returns the re-encoded frame, or nil when nothing is left to forward.
func dropProducePartitions(req *kmsg.ProduceRequest, unknown []topicPartition, frame []byte, x *exchange) []byte {
	isUnknown := func(t *kmsg.ProduceRequestTopic, p int32) bool {
		for _, u := range unknown {
			if u.topic == t.Topic && u.id == t.TopicID && u.part == p {
				return true
			}
		}
		return false
	}
	var topics []kmsg.ProduceRequestTopic
	for _, t := range req.Topics {
		var keep []kmsg.ProduceRequestTopicPartition
		for _, p := range t.Partitions {
			if !isUnknown(&t, p.Partition) {
				keep = append(keep, p)
			}
		}
		if len(keep) > 0 {
			t.Partitions = keep
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return nil
	}
	kept := *req
	kept.Topics = topics
	header := frame[4 : len(frame)-len(x.body)]
	out := append([]byte{0, 0, 0, 0}, header...)
	out = kept.AppendTo(out)
	putFrameSize(out)
	return out
}

func addProduceErrors(resp *kmsg.ProduceResponse, tps []topicPartition, code int16) {
	for _, tp := range tps {
		idx := -1
		for i, t := range resp.Topics {
			if t.Topic == tp.topic && t.TopicID == tp.id {
				idx = i
				break
			}
		}
		if idx < 0 {
			t := kmsg.NewProduceResponseTopic()
			t.Topic, t.TopicID = tp.topic, tp.id
			resp.Topics = append(resp.Topics, t)
			idx = len(resp.Topics) - 1
		}
		p := kmsg.NewProduceResponseTopicPartition()
		p.Partition = tp.part
		p.ErrorCode = code
		p.BaseOffset = -1
		p.LogAppendTime = -1
		p.LogStartOffset = -1
		resp.Topics[idx].Partitions = append(resp.Topics[idx].Partitions, p)
	}
}

func handleFetch(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.FetchResponse)
		for i := range resp.Brokers {
			br := &resp.Brokers[i]
			cn.gatewayOf(br.NodeID, &br.Host, &br.Port)
		}
		var token int64
		stale := false
		cn.b.view(func(im *image) {
			token = im.offset
			for i := range resp.Topics {
				t := &resp.Topics[i]
				for j := range t.Partitions {
					p := &t.Partitions[j]
					known := im.hasPartition(t.Topic, t.TopicID, p.Partition)
					if known && goneInKfake(p.ErrorCode) {
						p.ErrorCode = inFlux
					}
					if p.ErrorCode != 0 || known {
						continue
					}
					stale = true
					blank := kmsg.NewFetchResponseTopicPartition()
					blank.Partition = p.Partition
					blank.ErrorCode = kerr.UnknownTopicOrPartition.Code
					if t.TopicID != ([16]byte{}) {
						blank.ErrorCode = kerr.UnknownTopicID.Code
					}
					blank.HighWatermark, blank.LastStableOffset, blank.LogStartOffset = -1, -1, -1
					*p = blank
				}
			}
		})
		if stale {
			cn.b.c.stats.stale.Add(1)
		}
		return token
	}
	return frame, nil
}

func handleListOffsets(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.ListOffsetsResponse)
		var token int64
		stale := false
		cn.b.view(func(im *image) {
			token = im.offset
			for i := range resp.Topics {
				t := &resp.Topics[i]
				for j := range t.Partitions {
					p := &t.Partitions[j]
					known := im.hasPartition(t.Topic, [16]byte{}, p.Partition)
					if known && goneInKfake(p.ErrorCode) {
						p.ErrorCode = inFlux
					}
					if p.ErrorCode != 0 || known {
						continue
					}
					stale = true
					blank := kmsg.NewListOffsetsResponseTopicPartition()
					blank.Partition = p.Partition
					blank.ErrorCode = kerr.UnknownTopicOrPartition.Code
					*p = blank
				}
			}
		})
		if stale {
			cn.b.c.stats.stale.Add(1)
		}
		return token
	}
	return frame, nil
}

// goneInKfake reports whether kfake answered that a partition does not
// exist. For a partition the broker's image still has, that means a delete
// is under way: kfake drops a topic when it handles DeleteTopics, before
// the gateway commits the RemoveTopicRecord.
func goneInKfake(code int16) bool {
	return code == kerr.UnknownTopicOrPartition.Code || code == kerr.UnknownTopicID.Code
}

// inFlux is the code for a partition the broker's image has but kfake has
// already dropped: "gone" would run ahead of the answer's token (a client
// could then see the topic gone, then present again), and waiting for the
// delete's commit here could deadlock the connection, so the broker says
// what a real one says while a partition moves: retry.
var inFlux = kerr.LeaderNotAvailable.Code

func putFrameSize(frame []byte) {
	n := uint32(len(frame) - 4)
	frame[0], frame[1], frame[2], frame[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
}
