package wire

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProduceObserver is an optional extension of Observer: it is told, for a
// produce answer that carried INCONSISTENT_METADATA, which partitions did,
// before kgo sees the answer (as NOT_ENOUGH_REPLICAS, see inspect). With it
// a producer tells a record that failed because its partition's broker
// stayed behind the token from one that failed for a genuine reason.
//
// topic is empty from Produce v13 on, whose answers name topics by id.
type ProduceObserver interface {
	OnProduceInconsistentMetadata(topic string, partition int32)
}

// notePartitions tells a ProduceObserver which partitions of resp carry
// code. It runs only for answers that carried the code, never per request.
func (r *responseReader) notePartitions(resp kmsg.Response) {
	po, ok := r.i.observer.(ProduceObserver)
	if !ok {
		return
	}
	if mr, ok := resp.(*kmsg.MetadataResponse); ok {
		// A topic's metadata held back: every record of the topic waits
		// on it (partition -1 stands for all of them).
		for i := range mr.Topics {
			if t := &mr.Topics[i]; t.ErrorCode == r.i.code && t.Topic != nil {
				po.OnProduceInconsistentMetadata(*t.Topic, -1)
			}
		}
		return
	}
	pr, ok := resp.(*kmsg.ProduceResponse)
	if !ok {
		return
	}
	for i := range pr.Topics {
		t := &pr.Topics[i]
		for j := range t.Partitions {
			if t.Partitions[j].ErrorCode == r.i.code {
				po.OnProduceInconsistentMetadata(t.Topic, t.Partitions[j].Partition)
			}
		}
	}
}

// ProduceMarks remembers, per partition, when a produce answer for it last
// carried INCONSISTENT_METADATA, on a clock that moves at each such
// partition answer. A record that notes Clock when it is given to the
// client failed because of such answers if At its partition moved past it
// meanwhile. The zero value is ready to use; it is safe for concurrent use.
type ProduceMarks struct {
	clock atomic.Uint64
	mu    sync.Mutex
	at    map[producePartition]uint64
	held  map[string]time.Time // when a topic's metadata was last held back
}

type producePartition struct {
	topic     string // empty: answers naming topics by id (Produce v13+)
	partition int32
}

// Mark notes an INCONSISTENT_METADATA answer for topic's partition; an
// empty topic stands for every topic, partition -1 for every partition (a
// Metadata answer for the topic).
func (m *ProduceMarks) Mark(topic string, partition int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = make(map[producePartition]uint64)
	}
	m.at[producePartition{topic, partition}] = m.clock.Add(1)
	if partition == -1 && topic != "" {
		if m.held == nil {
			m.held = make(map[string]time.Time)
		}
		m.held[topic] = time.Now()
	}
}

// TopicHeldAt returns when a Metadata answer last held topic back, or the
// zero time.
func (m *ProduceMarks) TopicHeldAt(topic string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held[topic]
}

// Tick moves the clock for an INCONSISTENT_METADATA answer to a request
// that names no partition (a producer id, a coordinator), which may hold
// any record back: a record that then times out was held by it (see
// link.InconsistentMarks).
func (m *ProduceMarks) Tick() { m.clock.Add(1) }

// Clock returns the clock itself: a producer loads it on every record (an
// atomic load, where a func value would be a call).
func (m *ProduceMarks) Clock() *atomic.Uint64 { return &m.clock }

// At returns the clock's value at the last answer for topic's partition,
// or 0 if none. An answer that named no topic counts for every topic: the
// partition numbers match, and a record is better reported as held back by
// a stale broker than not when it may have been.
func (m *ProduceMarks) At(topic string, partition int32) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return max(m.at[producePartition{topic, partition}], m.at[producePartition{"", partition}], m.at[producePartition{topic, -1}])
}
