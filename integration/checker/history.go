package checker

import (
	"fmt"
	"strings"
	"time"
)

// Kind is what an operation did.
type Kind string

// Writes change a topic's metadata; reads observe it; Produce is both a read
// (the producer had to know the topic) and a record write; Consume is what
// the group consumer polled.
const (
	CreateTopic      Kind = "create-topic"
	DeleteTopic      Kind = "delete-topic"
	CreatePartitions Kind = "create-partitions"
	AlterConfig      Kind = "alter-config"
	ListTopics       Kind = "list-topics"
	DescribeConfigs  Kind = "describe-configs"
	ListEndOffsets   Kind = "list-end-offsets"
	Produce          Kind = "produce"
	Consume          Kind = "consume"
)

// IsWrite reports whether k changes topic metadata.
func (k Kind) IsWrite() bool {
	switch k {
	case CreateTopic, DeleteTopic, CreatePartitions, AlterConfig:
		return true
	}
	return false
}

// Outcome says whether an operation took effect.
type Outcome uint8

const (
	// OK: the operation succeeded.
	OK Outcome = iota
	// Failed: the broker refused it; a write did not happen.
	Failed
	// Unknown: no answer (timeout, connection lost); a write may or may
	// not have happened, so the checker stops judging reads of its topic
	// from the write's start on.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Failed:
		return "failed"
	default:
		return "unknown"
	}
}

// ViewState is what a read said about a topic.
type ViewState uint8

const (
	// Absent: the topic does not exist.
	Absent ViewState = iota
	// Present: the topic exists; with Partitions > 0 it has exactly that
	// many partitions, with HasConfig its watched config has Config.
	Present
	// NotAbove: the topic is absent or has at most Partitions partitions
	// (a broker answered UNKNOWN_TOPIC_OR_PARTITION for partition
	// Partitions).
	NotAbove
)

// View is one observation of one topic by a read.
type View struct {
	Topic      string
	State      ViewState
	Partitions int32
	Config     string
	HasConfig  bool
}

func (v View) String() string {
	switch v.State {
	case Absent:
		return v.Topic + " absent"
	case NotAbove:
		return fmt.Sprintf("%s absent-or-≤%dp", v.Topic, v.Partitions)
	}
	s := v.Topic + " present"
	if v.Partitions > 0 {
		s += fmt.Sprintf(" %dp", v.Partitions)
	}
	if v.HasConfig {
		s += " cfg=" + v.Config
	}
	return s
}

// RecordRef names a produced or consumed record. Keys are unique per run.
type RecordRef struct {
	Key       string
	Topic     string
	Partition int32
	Offset    int64
}

// EndOffset is a partition's end offset as a read saw it.
type EndOffset struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Op is one operation of a history. Times are durations since the start of
// the history, on the monotonic clock: Start is taken before the call, End
// after it returned.
type Op struct {
	ID        int
	Kind      Kind
	Client    string // the client that ran it, e.g. "admin-1"
	Goroutine int
	Start     time.Duration
	End       time.Duration
	Outcome   Outcome
	Err       string
	// Token is the factory's consistency token after the op; -1 when
	// there is none (plain clients).
	Token int64

	// Writes: the topic, the partition count after a create or
	// create-partitions, the watched config value after a create or
	// alter-config.
	Topic      string
	Partitions int32
	Config     string

	// Reads: what was observed. A Produce that succeeded views its topic
	// as present; one refused with UNKNOWN_TOPIC_OR_PARTITION as absent.
	Views []View
	Ends  []EndOffset
	// Produce: the record (on success with its partition and offset);
	// Consume: the records polled.
	Records []RecordRef
}

func (op Op) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d [%9.3fs → %9.3fs] %-10s g%d %s", op.ID, op.Start.Seconds(), op.End.Seconds(), op.Client, op.Goroutine, op.Kind)
	if op.Topic != "" {
		b.WriteString(" " + op.Topic)
	}
	switch op.Kind {
	case CreateTopic:
		fmt.Fprintf(&b, " %dp cfg=%s", op.Partitions, op.Config)
	case CreatePartitions:
		fmt.Fprintf(&b, " to %dp", op.Partitions)
	case AlterConfig:
		fmt.Fprintf(&b, " cfg=%s", op.Config)
	}
	b.WriteString(" " + op.Outcome.String())
	if op.Err != "" {
		b.WriteString(" (" + op.Err + ")")
	}
	if op.Token >= 0 {
		fmt.Fprintf(&b, " token=%d", op.Token)
	}
	return b.String()
}

// History is what a run recorded.
type History struct {
	Seed uint64
	Mode Mode
	Ops  []Op
	// Subscribed are the topics the group consumer consumes; every
	// acknowledged produce to them must be consumed exactly once.
	Subscribed []string
	// Drained says whether the consumer was given the chance to catch up
	// (the no-loss rule applies only then).
	Drained bool
}
