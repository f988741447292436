package wire

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionRecorder is a ProduceObserver that keeps what it was told.
type partitionRecorder struct {
	recorder
	marks ProduceMarks
	told  []string
}

func (r *partitionRecorder) OnProduceInconsistentMetadata(topic string, partition int32) {
	r.marks.Mark(topic, partition)
	r.told = append(r.told, topic+"/"+string(rune('0'+partition)))
}

// TestProducePartitionsNoted: of a produce answer, only the partitions that
// carried INCONSISTENT_METADATA are reported, not the one with a genuine
// NOT_ENOUGH_REPLICAS (which reads the same to kgo once rewritten).
func TestProducePartitionsNoted(t *testing.T) {
	rec := &partitionRecorder{}
	c, m, _ := newTestConn(t, knownStore(t, "abc", 100), func(cfg *Config) { cfg.Observer = rec })
	sendRequests(t, c, produceReq(9, -1, nil))
	r := kmsg.NewPtrProduceResponse()
	r.Version = 9
	for topic, codes := range map[string][]int16{"t": {1243, 19}, "u": {0, 1243}} {
		tp := kmsg.NewProduceResponseTopic()
		tp.Topic = topic
		for i, code := range codes {
			p := kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.ErrorCode = int32(i), code
			tp.Partitions = append(tp.Partitions, p)
		}
		r.Topics = append(r.Topics, tp)
	}
	m.in = respFrame(0, stateTags("abc", 90), r.AppendTo(nil))
	_, _ = readAll(c, 4096)
	require.ElementsMatch(t, []string{"t/0", "u/1"}, rec.told)
	require.Equal(t, uint64(2), rec.marks.Clock().Load())
	require.NotZero(t, rec.marks.At("t", 0))
	require.Zero(t, rec.marks.At("t", 1), "a genuine error is not marked")
	require.Zero(t, rec.marks.At("u", 0))
}

// TestProduceMarksWithoutTopic: an answer naming topics by id only (Produce
// v13+) marks the partition number for every topic.
func TestProduceMarksWithoutTopic(t *testing.T) {
	var m ProduceMarks
	require.Zero(t, m.At("t", 0))
	m.Mark("t", 0)
	m.Mark("", 1)
	require.Equal(t, uint64(1), m.At("t", 0))
	require.Equal(t, uint64(2), m.At("t", 1))
	require.Equal(t, uint64(2), m.At("u", 1))
	require.Zero(t, m.At("u", 0))
}

func TestProduceMarksWholeTopic(t *testing.T) {
	var m ProduceMarks
	before := m.Clock().Load()
	m.Mark("frozen", -1) // a Metadata answer for the topic was held back
	if m.At("frozen", 3) <= before {
		t.Fatal("a record of the topic does not see its metadata held back")
	}
	if m.At("other", 3) != 0 {
		t.Fatal("another topic is marked")
	}
}
