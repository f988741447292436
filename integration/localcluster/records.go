package localcluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The metadata records of the local cluster's log, in the KRaft formats of
// KIP-746. A record on the wire is a frame header of three unsigned varints
// (frame version, api key, record version) followed by the record's fields.
// Version 0 of each KIP-746 record is the Kafka 2.8 form (classic encodings,
// no tagged fields); version 1 is the flexible form (compact strings and
// arrays, tagged fields) and is what the local cluster writes.

// FrameVersion is the version of the KRaft metadata record frame.
const FrameVersion = 1

// Record api keys, as assigned by Apache Kafka's metadata schema, plus the
// cluster id record of seeds/002.
const (
	TopicRecordKey           int16 = 2
	PartitionRecordKey       int16 = 3
	ConfigRecordKey          int16 = 4
	PartitionChangeRecordKey int16 = 5
	RemoveTopicRecordKey     int16 = 9

	// ClusterIDRecordKey is the api key of ClusterIDRecord. Kafka has not
	// assigned one (seeds/002 is an idea, not a KIP); Kafka's metadata keys
	// are dense and below 100, so 1000 stays clear of them.
	ClusterIDRecordKey int16 = 1000
)

// ErrMalformedRecord wraps every error of DecodeRecord and AppendRecord.
var ErrMalformedRecord = errors.New("localcluster: malformed metadata record")

// MetadataRecord is one record of the metadata log. The set is closed: only
// the record types of this package implement it.
type MetadataRecord interface {
	// APIKey is the record's api key in the frame header.
	APIKey() int16
	// Version is the record version in the frame header.
	Version() int16

	maxVersion() int16
	flexible() bool
	appendFields(e *encoder)
	readFields(d *decoder)
}

// TopicRecord creates a topic (versions 0 and 1).
type TopicRecord struct {
	V       int16
	Name    string
	TopicID [16]byte
}

// PartitionRecord creates a partition of a topic (versions 0 and 1).
// RemovingReplicas and AddingReplicas are nullable.
type PartitionRecord struct {
	V                int16
	PartitionID      int32
	TopicID          [16]byte
	Replicas         []int32
	ISR              []int32
	RemovingReplicas []int32
	AddingReplicas   []int32
	Leader           int32
	LeaderEpoch      int32
	PartitionEpoch   int32
}

// ConfigRecord sets (or, with a nil Value, removes) one configuration key of
// a resource (versions 0 and 1; Value is nullable only in version 1).
// ResourceType uses the DescribeConfigs codes: 2 topic, 4 broker.
type ConfigRecord struct {
	V            int16
	ResourceType int8
	ResourceName string
	Name         string
	Value        *string
}

// RemoveTopicRecord deletes a topic and its partitions (versions 0 and 1).
type RemoveTopicRecord struct {
	V       int16
	TopicID [16]byte
}

// PartitionChangeRecord changes a partition (version 0, flexible). Every
// change is a tagged field: a nil slice means unchanged, and Leader is
// NoLeaderChange unless the leader moves.
type PartitionChangeRecord struct {
	V                int16
	PartitionID      int32
	TopicID          [16]byte
	ISR              []int32 // tag 0
	Leader           int32   // tag 1
	Replicas         []int32 // tag 2
	RemovingReplicas []int32 // tag 3
	AddingReplicas   []int32 // tag 4
}

// NoLeaderChange is PartitionChangeRecord.Leader when the leader stays.
const NoLeaderChange int32 = -2

// ClusterIDRecord names the cluster whose log this is; it is the record at
// offset 0 (version 0, flexible).
type ClusterIDRecord struct {
	V         int16
	ClusterID string
}

func (*TopicRecord) APIKey() int16           { return TopicRecordKey }
func (*PartitionRecord) APIKey() int16       { return PartitionRecordKey }
func (*ConfigRecord) APIKey() int16          { return ConfigRecordKey }
func (*RemoveTopicRecord) APIKey() int16     { return RemoveTopicRecordKey }
func (*PartitionChangeRecord) APIKey() int16 { return PartitionChangeRecordKey }
func (*ClusterIDRecord) APIKey() int16       { return ClusterIDRecordKey }

func (r *TopicRecord) Version() int16           { return r.V }
func (r *PartitionRecord) Version() int16       { return r.V }
func (r *ConfigRecord) Version() int16          { return r.V }
func (r *RemoveTopicRecord) Version() int16     { return r.V }
func (r *PartitionChangeRecord) Version() int16 { return r.V }
func (r *ClusterIDRecord) Version() int16       { return r.V }

func (*TopicRecord) maxVersion() int16           { return 1 }
func (*PartitionRecord) maxVersion() int16       { return 1 }
func (*ConfigRecord) maxVersion() int16          { return 1 }
func (*RemoveTopicRecord) maxVersion() int16     { return 1 }
func (*PartitionChangeRecord) maxVersion() int16 { return 0 }
func (*ClusterIDRecord) maxVersion() int16       { return 0 }

func (r *TopicRecord) flexible() bool         { return r.V >= 1 }
func (r *PartitionRecord) flexible() bool     { return r.V >= 1 }
func (r *ConfigRecord) flexible() bool        { return r.V >= 1 }
func (r *RemoveTopicRecord) flexible() bool   { return r.V >= 1 }
func (*PartitionChangeRecord) flexible() bool { return true }
func (*ClusterIDRecord) flexible() bool       { return true }

// newRecord returns an empty record of the given key, or nil.
func newRecord(key int16) MetadataRecord {
	switch key {
	case TopicRecordKey:
		return new(TopicRecord)
	case PartitionRecordKey:
		return new(PartitionRecord)
	case ConfigRecordKey:
		return new(ConfigRecord)
	case RemoveTopicRecordKey:
		return new(RemoveTopicRecord)
	case PartitionChangeRecordKey:
		return new(PartitionChangeRecord)
	case ClusterIDRecordKey:
		return new(ClusterIDRecord)
	}
	return nil
}

func setVersion(r MetadataRecord, v int16) {
	switch r := r.(type) {
	case *TopicRecord:
		r.V = v
	case *PartitionRecord:
		r.V = v
	case *ConfigRecord:
		r.V = v
	case *RemoveTopicRecord:
		r.V = v
	case *PartitionChangeRecord:
		r.V = v
	case *ClusterIDRecord:
		r.V = v
	}
}

// AppendRecord appends the framed encoding of r to dst. It fails for a
// version the record does not have, or a value the version cannot carry
// (a null ConfigRecord value before version 1).
func AppendRecord(dst []byte, r MetadataRecord) ([]byte, error) {
	if r == nil {
		return dst, fmt.Errorf("%w: nil record", ErrMalformedRecord)
	}
	if v := r.Version(); v < 0 || v > r.maxVersion() {
		return dst, fmt.Errorf("%w: %T has no version %d", ErrMalformedRecord, r, v)
	}
	if c, ok := r.(*ConfigRecord); ok && c.Value == nil && !c.flexible() {
		return dst, fmt.Errorf("%w: ConfigRecord v%d cannot remove a key (null value needs v1)", ErrMalformedRecord, c.V)
	}
	e := encoder{b: dst, flex: r.flexible()}
	e.uvarint(FrameVersion)
	e.uvarint(uint64(uint16(r.APIKey())))
	e.uvarint(uint64(r.Version()))
	r.appendFields(&e)
	return e.b, nil
}

// DecodeRecord decodes one framed record that fills all of b. Errors wrap
// ErrMalformedRecord and say what was wrong.
func DecodeRecord(b []byte) (MetadataRecord, error) {
	d := decoder{b: b}
	frame := d.uvarint()
	key := d.uvarint()
	version := d.uvarint()
	if d.err != nil {
		return nil, fmt.Errorf("%w: frame header: %v", ErrMalformedRecord, d.err)
	}
	if frame != FrameVersion {
		return nil, fmt.Errorf("%w: frame version %d, want %d", ErrMalformedRecord, frame, FrameVersion)
	}
	if key > math.MaxInt16 {
		return nil, fmt.Errorf("%w: api key %d", ErrMalformedRecord, key)
	}
	r := newRecord(int16(key))
	if r == nil {
		return nil, fmt.Errorf("%w: unknown api key %d", ErrMalformedRecord, key)
	}
	if version > uint64(r.maxVersion()) {
		return nil, fmt.Errorf("%w: %T has no version %d", ErrMalformedRecord, r, version)
	}
	setVersion(r, int16(version))
	d.flex = r.flexible()
	r.readFields(&d)
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %T v%d: %v", ErrMalformedRecord, r, version, d.err)
	}
	return r, nil
}

func (r *TopicRecord) appendFields(e *encoder) {
	e.str(r.Name)
	e.uuid(r.TopicID)
	e.noTags()
}

func (r *TopicRecord) readFields(d *decoder) {
	r.Name = d.str()
	r.TopicID = d.uuid()
	d.skipTags()
}

func (r *PartitionRecord) appendFields(e *encoder) {
	e.int32(r.PartitionID)
	e.uuid(r.TopicID)
	e.int32s(r.Replicas, false)
	e.int32s(r.ISR, false)
	e.int32s(r.RemovingReplicas, true)
	e.int32s(r.AddingReplicas, true)
	e.int32(r.Leader)
	e.int32(r.LeaderEpoch)
	e.int32(r.PartitionEpoch)
	e.noTags()
}

func (r *PartitionRecord) readFields(d *decoder) {
	r.PartitionID = d.int32()
	r.TopicID = d.uuid()
	r.Replicas = d.int32s(false)
	r.ISR = d.int32s(false)
	r.RemovingReplicas = d.int32s(true)
	r.AddingReplicas = d.int32s(true)
	r.Leader = d.int32()
	r.LeaderEpoch = d.int32()
	r.PartitionEpoch = d.int32()
	d.skipTags()
}

func (r *ConfigRecord) appendFields(e *encoder) {
	e.int8(r.ResourceType)
	e.str(r.ResourceName)
	e.str(r.Name)
	e.nullableStr(r.Value)
	e.noTags()
}

func (r *ConfigRecord) readFields(d *decoder) {
	r.ResourceType = d.int8()
	r.ResourceName = d.str()
	r.Name = d.str()
	if r.flexible() {
		r.Value = d.nullableStr()
	} else {
		v := d.str()
		r.Value = &v
	}
	d.skipTags()
}

func (r *RemoveTopicRecord) appendFields(e *encoder) {
	e.uuid(r.TopicID)
	e.noTags()
}

func (r *RemoveTopicRecord) readFields(d *decoder) {
	r.TopicID = d.uuid()
	d.skipTags()
}

func (r *ClusterIDRecord) appendFields(e *encoder) {
	e.str(r.ClusterID)
	e.noTags()
}

func (r *ClusterIDRecord) readFields(d *decoder) {
	r.ClusterID = d.str()
	d.skipTags()
}

func (r *PartitionChangeRecord) appendFields(e *encoder) {
	e.int32(r.PartitionID)
	e.uuid(r.TopicID)
	// Tagged fields at their defaults are omitted; tags ascend.
	type tagged struct {
		tag  uint64
		data []byte
	}
	var tags []tagged
	arr := func(tag uint64, v []int32) {
		if v != nil {
			sub := encoder{flex: true}
			sub.int32s(v, true)
			tags = append(tags, tagged{tag, sub.b})
		}
	}
	arr(0, r.ISR)
	if r.Leader != NoLeaderChange {
		tags = append(tags, tagged{1, binary.BigEndian.AppendUint32(nil, uint32(r.Leader))})
	}
	arr(2, r.Replicas)
	arr(3, r.RemovingReplicas)
	arr(4, r.AddingReplicas)
	e.uvarint(uint64(len(tags)))
	for _, t := range tags {
		e.uvarint(t.tag)
		e.uvarint(uint64(len(t.data)))
		e.b = append(e.b, t.data...)
	}
}

func (r *PartitionChangeRecord) readFields(d *decoder) {
	r.PartitionID = d.int32()
	r.TopicID = d.uuid()
	r.Leader = NoLeaderChange
	d.eachTag(func(tag uint64, sub *decoder) {
		switch tag {
		case 0:
			r.ISR = sub.int32s(true)
		case 1:
			r.Leader = sub.int32()
		case 2:
			r.Replicas = sub.int32s(true)
		case 3:
			r.RemovingReplicas = sub.int32s(true)
		case 4:
			r.AddingReplicas = sub.int32s(true)
		default:
			sub.b = nil // unknown tags are skipped, as Kafka does
		}
	})
}

// encoder writes Kafka protocol primitives; flex selects compact encodings.
type encoder struct {
	b    []byte
	flex bool
}

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int8(v int8)      { e.b = append(e.b, byte(v)) }
func (e *encoder) int16(v int16)    { e.b = binary.BigEndian.AppendUint16(e.b, uint16(v)) }
func (e *encoder) int32(v int32)    { e.b = binary.BigEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) uuid(v [16]byte)  { e.b = append(e.b, v[:]...) }

func (e *encoder) str(s string) {
	if e.flex {
		e.uvarint(uint64(len(s)) + 1)
	} else {
		e.int16(int16(len(s)))
	}
	e.b = append(e.b, s...)
}

func (e *encoder) nullableStr(s *string) {
	if s != nil {
		e.str(*s)
		return
	}
	if e.flex {
		e.uvarint(0)
	} else {
		e.int16(-1)
	}
}

func (e *encoder) int32s(v []int32, nullable bool) {
	switch {
	case v == nil && nullable && e.flex:
		e.uvarint(0)
		return
	case v == nil && nullable:
		e.int32(-1)
		return
	case e.flex:
		e.uvarint(uint64(len(v)) + 1)
	default:
		e.int32(int32(len(v)))
	}
	for _, x := range v {
		e.int32(x)
	}
}

func (e *encoder) noTags() {
	if e.flex {
		e.uvarint(0)
	}
}

// decoder reads Kafka protocol primitives. The first error sticks and every
// later read returns zero values, so field readers need no error plumbing.
type decoder struct {
	b    []byte
	flex bool
	err  error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
	d.b = nil
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.fail("%s truncated", what)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int8() int8 {
	if b := d.take(1, "int8"); b != nil {
		return int8(b[0])
	}
	return 0
}

func (d *decoder) int16() int16 {
	if b := d.take(2, "int16"); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (d *decoder) int32() int32 {
	if b := d.take(4, "int32"); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) uuid() (id [16]byte) {
	copy(id[:], d.take(16, "uuid"))
	return id
}

// length reads a string or array length; -1 means null.
func (d *decoder) length(what string) int {
	if d.flex {
		n := d.uvarint()
		if n > uint64(len(d.b))+1 {
			d.fail("%s length %d exceeds the record", what, n-1)
			return 0
		}
		return int(n) - 1
	}
	var n int
	if what == "array" {
		n = int(d.int32())
	} else {
		n = int(d.int16())
	}
	if n < -1 || n > len(d.b) {
		d.fail("%s length %d is invalid", what, n)
		return 0
	}
	return n
}

func (d *decoder) str() string {
	n := d.length("string")
	if n < 0 {
		d.fail("null string in a non-nullable field")
		return ""
	}
	return string(d.take(n, "string"))
}

func (d *decoder) nullableStr() *string {
	n := d.length("string")
	if n < 0 || d.err != nil {
		return nil
	}
	s := string(d.take(n, "string"))
	return &s
}

func (d *decoder) int32s(nullable bool) []int32 {
	n := d.length("array")
	if d.err != nil {
		return nil
	}
	if n < 0 {
		if !nullable {
			d.fail("null array in a non-nullable field")
		}
		return nil
	}
	if n > len(d.b)/4 {
		d.fail("array of %d int32 truncated", n)
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = d.int32()
	}
	return v
}

func (d *decoder) skipTags() {
	if d.flex {
		d.eachTag(func(_ uint64, sub *decoder) { sub.b = nil })
	}
}

// eachTag walks a tagged-field section; fn must consume the whole field.
func (d *decoder) eachTag(fn func(tag uint64, sub *decoder)) {
	count := d.uvarint()
	if count > uint64(len(d.b)) {
		d.fail("tag count %d exceeds the record", count)
		return
	}
	last := int64(-1)
	for i := uint64(0); i < count && d.err == nil; i++ {
		tag := d.uvarint()
		size := d.uvarint()
		if d.err != nil {
			return
		}
		if int64(tag) <= last || tag > math.MaxInt32 {
			d.fail("tag %d out of order", tag)
			return
		}
		last = int64(tag)
		if size > uint64(len(d.b)) {
			d.fail("tag %d truncated", tag)
			return
		}
		sub := decoder{b: d.take(int(size), "tag"), flex: true}
		fn(tag, &sub)
		if sub.err == nil && len(sub.b) != 0 {
			sub.err = fmt.Errorf("%d trailing bytes", len(sub.b))
		}
		if sub.err != nil {
			d.fail("tag %d: %v", tag, sub.err)
		}
	}
}
