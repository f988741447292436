package kafkatest

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CountRecords counts the records of topic in the cluster that opts (at
// least kgo.SeedBrokers) reach, by reading every partition from its start
// offset to its high watermark. Reading rather than subtracting offsets
// keeps the count exact when transaction markers or compaction leave gaps.
// A topic that does not exist counts 0, so a record that went to the wrong
// cluster shows as a count there, not as an error.
func CountRecords(ctx context.Context, topic string, opts ...kgo.Opt) (int64, error) {
	adm, err := kgo.NewClient(opts...)
	if err != nil {
		return 0, fmt.Errorf("kafkatest: CountRecords client: %w", err)
	}
	defer adm.Close()
	ac := kadm.NewClient(adm)
	starts, err := ac.ListStartOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafkatest: CountRecords(%q) start offsets: %w", topic, err)
	}
	ends, err := ac.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("kafkatest: CountRecords(%q) end offsets: %w", topic, err)
	}
	from := make(map[int32]kgo.Offset)
	until := make(map[int32]int64)
	var lerr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic != topic {
			return
		}
		if o.Err != nil {
			if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
				return
			}
			lerr = fmt.Errorf("kafkatest: CountRecords(%q) partition %d: %w", topic, o.Partition, o.Err)
			return
		}
		s, ok := starts.Lookup(topic, o.Partition)
		if !ok || s.Err != nil {
			lerr = fmt.Errorf("kafkatest: CountRecords(%q) partition %d: no start offset (%v)", topic, o.Partition, s.Err)
			return
		}
		if o.Offset > s.Offset {
			from[o.Partition] = kgo.NewOffset().At(s.Offset)
			until[o.Partition] = o.Offset
		}
	})
	if lerr != nil {
		return 0, lerr
	}
	if len(from) == 0 {
		return 0, nil
	}

	cl, err := kgo.NewClient(append(opts[:len(opts):len(opts)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: from}),
		// Markers are kept so that a partition ending in one is still
		// seen to its last offset; they are not counted.
		kgo.KeepControlRecords())...)
	if err != nil {
		return 0, fmt.Errorf("kafkatest: CountRecords consumer: %w", err)
	}
	defer cl.Close()
	var n int64
	for len(until) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return n, fmt.Errorf("kafkatest: CountRecords(%q): counted %d, partitions %v not read to the end: %w", topic, n, keys(until), err)
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if ferr == nil {
				ferr = fmt.Errorf("kafkatest: CountRecords(%q) partition %d: %w", t, p, err)
			}
		})
		if ferr != nil {
			return n, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := until[r.Partition]
			if !ok || r.Offset >= end {
				return // written after we listed the end
			}
			if !r.Attrs.IsControl() {
				n++
			}
			if r.Offset == end-1 {
				delete(until, r.Partition)
			}
		})
	}
	return n, nil
}

func keys(m map[int32]int64) []int32 {
	var ks []int32
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
