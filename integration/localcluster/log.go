package localcluster

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Record is one entry of the metadata log. Its Offset is the consistency
// token a broker reports once it has applied the record.
type Record struct {
	Offset    int64
	Committed time.Time
	Value     MetadataRecord
	// Encoded is Value in its framed wire form (see AppendRecord).
	Encoded []byte
	// BatchEnd is the offset of the last record committed together with
	// this one; brokers apply a batch whole, as KRaft brokers publish whole
	// batches, so no broker ever shows half a topic creation.
	BatchEnd int64
}

// metadataLog is the cluster's append-only, in-memory metadata log. Records
// are stored encoded and decoded again on append, so every record in the log
// has been through the real codec.
type metadataLog struct {
	mu      sync.RWMutex
	records []Record
	grew    chan struct{} // closed and replaced on every append
}

func newMetadataLog() *metadataLog {
	return &metadataLog{grew: make(chan struct{})}
}

// append commits rs as one batch and returns the offset of its last record.
func (l *metadataLog) append(rs ...MetadataRecord) (int64, error) {
	if len(rs) == 0 {
		return -1, fmt.Errorf("localcluster: empty metadata batch")
	}
	batch := make([]Record, 0, len(rs))
	for _, r := range rs {
		enc, err := AppendRecord(nil, r)
		if err != nil {
			return -1, err
		}
		dec, err := DecodeRecord(enc)
		if err != nil {
			return -1, err
		}
		batch = append(batch, Record{Value: dec, Encoded: enc})
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	first := int64(len(l.records))
	end := first + int64(len(batch)) - 1
	for i := range batch {
		batch[i].Offset = first + int64(i)
		batch[i].Committed = now
		batch[i].BatchEnd = end
	}
	l.records = append(l.records, batch...)
	close(l.grew)
	l.grew = make(chan struct{})
	return end, nil
}

// at returns the record at offset, or false with the channel that closes on
// the next append.
func (l *metadataLog) at(offset int64) (Record, bool, <-chan struct{}) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if offset < 0 || offset >= int64(len(l.records)) {
		return Record{}, false, l.grew
	}
	return l.records[offset], true, nil
}

func (l *metadataLog) since(offset int64) []Record {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if offset < 0 {
		offset = 0
	}
	if offset >= int64(len(l.records)) {
		return nil
	}
	return append([]Record(nil), l.records[offset:]...)
}

func (l *metadataLog) end() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return int64(len(l.records)) - 1
}

// follow calls fn for every record from offset on, in order, until ctx ends.
func (l *metadataLog) follow(ctx context.Context, offset int64, fn func(Record)) error {
	for {
		r, ok, grew := l.at(offset)
		if ok {
			fn(r)
			offset++
			continue
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// DumpRecords writes one line per record: offset, commit time, batch end
// and the decoded record.
func DumpRecords(w io.Writer, rs []Record) error {
	for _, r := range rs {
		if _, err := fmt.Fprintf(w, "%6d  %s  batch-end=%d  %s\n", r.Offset, r.Committed.Format(time.RFC3339Nano), r.BatchEnd, Describe(r.Value)); err != nil {
			return err
		}
	}
	return nil
}

// Describe renders a record for people: its name, version and fields.
func Describe(r MetadataRecord) string {
	switch r := r.(type) {
	case *ClusterIDRecord:
		return fmt.Sprintf("ClusterIDRecord(v%d) cluster-id=%q", r.V, r.ClusterID)
	case *TopicRecord:
		return fmt.Sprintf("TopicRecord(v%d) name=%q id=%s", r.V, r.Name, uuidString(r.TopicID))
	case *PartitionRecord:
		return fmt.Sprintf("PartitionRecord(v%d) topic-id=%s partition=%d leader=%d leader-epoch=%d partition-epoch=%d replicas=%v isr=%v removing=%v adding=%v",
			r.V, uuidString(r.TopicID), r.PartitionID, r.Leader, r.LeaderEpoch, r.PartitionEpoch, r.Replicas, r.ISR, r.RemovingReplicas, r.AddingReplicas)
	case *ConfigRecord:
		v := "<removed>"
		if r.Value != nil {
			v = fmt.Sprintf("%q", *r.Value)
		}
		return fmt.Sprintf("ConfigRecord(v%d) resource-type=%d resource=%q %s=%s", r.V, r.ResourceType, r.ResourceName, r.Name, v)
	case *RemoveTopicRecord:
		return fmt.Sprintf("RemoveTopicRecord(v%d) id=%s", r.V, uuidString(r.TopicID))
	case *PartitionChangeRecord:
		return fmt.Sprintf("PartitionChangeRecord(v%d) topic-id=%s partition=%d leader=%d isr=%v replicas=%v removing=%v adding=%v",
			r.V, uuidString(r.TopicID), r.PartitionID, r.Leader, r.ISR, r.Replicas, r.RemovingReplicas, r.AddingReplicas)
	}
	return fmt.Sprintf("%T", r)
}

func uuidString(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}
