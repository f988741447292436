package checker

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// ms turns milliseconds into history time.
func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func write(kind Kind, client string, start, end int, topic string, partitions int32, config string) Op {
	return Op{Kind: kind, Client: client, Start: ms(start), End: ms(end), Topic: topic, Partitions: partitions, Config: config, Token: -1}
}

func read(client string, start, end int, views ...View) Op {
	return Op{Kind: ListTopics, Client: client, Start: ms(start), End: ms(end), Views: views, Token: -1}
}

func present(topic string, partitions int32) View {
	return View{Topic: topic, State: Present, Partitions: partitions}
}

func absent(topic string) View { return View{Topic: topic, State: Absent} }

func withConfig(topic, v string) View {
	return View{Topic: topic, State: Present, Config: v, HasConfig: true}
}

func history(ops ...Op) History {
	for i := range ops {
		ops[i].ID = i + 1
	}
	return History{Ops: ops, Drained: true, Subscribed: []string{"d"}}
}

func rules(rep Report) map[Rule]int {
	out := map[Rule]int{}
	for _, v := range rep.Violations {
		out[v.Rule]++
	}
	return out
}

func TestCheckMetadataHistories(t *testing.T) {
	create := write(CreateTopic, "admin-0", 0, 10, "t", 1, "a")
	tests := []struct {
		name string
		h    History
		want map[Rule]int
	}{
		{"read after create sees the topic", history(create, read("admin-1", 20, 30, present("t", 1))), map[Rule]int{}},
		{"read after create misses the topic", history(create, read("admin-1", 20, 30, absent("t"))), map[Rule]int{ReadYourWrites: 1}},
		{"read overlapping the create may miss it", history(create, read("admin-1", 5, 30, absent("t"))), map[Rule]int{}},
		{"read overlapping the create may see it", history(create, read("admin-1", 5, 30, present("t", 1))), map[Rule]int{}},
		{"read after delete still sees the topic", history(create,
			write(DeleteTopic, "admin-0", 20, 30, "t", 0, ""),
			read("admin-1", 40, 50, present("t", 1))), map[Rule]int{ReadYourWrites: 1}},
		{"read after delete sees it gone", history(create,
			write(DeleteTopic, "admin-0", 20, 30, "t", 0, ""),
			read("admin-1", 40, 50, absent("t"))), map[Rule]int{}},
		{"partition count below the one created", history(create,
			write(CreatePartitions, "admin-0", 20, 30, "t", 3, ""),
			read("admin-1", 40, 50, present("t", 1))), map[Rule]int{ReadYourWrites: 1}},
		{"partition count as created", history(create,
			write(CreatePartitions, "admin-0", 20, 30, "t", 3, ""),
			read("admin-1", 40, 50, present("t", 3))), map[Rule]int{}},
		{"a broker without a created partition", history(create,
			write(CreatePartitions, "admin-0", 20, 30, "t", 3, ""),
			read("admin-1", 40, 50, View{Topic: "t", State: NotAbove, Partitions: 2})), map[Rule]int{ReadYourWrites: 1}},
		{"old config value after an alter", history(create,
			write(AlterConfig, "admin-0", 20, 30, "t", 0, "b"),
			read("admin-1", 40, 50, withConfig("t", "a"))), map[Rule]int{ReadYourWrites: 1}},
		{"newest config value after an alter", history(create,
			write(AlterConfig, "admin-0", 20, 30, "t", 0, "b"),
			read("admin-1", 40, 50, withConfig("t", "b"))), map[Rule]int{}},
		{"a later write may show", history(create,
			write(AlterConfig, "admin-0", 20, 30, "t", 0, "b"),
			write(AlterConfig, "admin-0", 35, 60, "t", 0, "c"),
			read("admin-1", 40, 50, withConfig("t", "c"))), map[Rule]int{}},
		{"a write that had not started cannot show", history(
			read("admin-1", 0, 5, present("t", 1)),
			write(CreateTopic, "admin-0", 10, 20, "t", 1, "a")), map[Rule]int{WellFormed: 1}},
		{"a state nobody wrote", history(create, read("admin-1", 20, 30, present("t", 7))), map[Rule]int{WellFormed: 1}},
		{"overlapping writes to one topic", history(create,
			write(AlterConfig, "admin-0", 20, 30, "t", 0, "b"),
			write(AlterConfig, "admin-1", 25, 35, "t", 0, "c")), map[Rule]int{WellFormed: 1}},
		{"reads after a write of unknown outcome are not judged", history(create,
			Op{Kind: DeleteTopic, Client: "admin-0", Start: ms(20), End: ms(30), Topic: "t", Outcome: Unknown},
			read("admin-1", 40, 50, present("t", 1)),
			read("admin-1", 60, 70, absent("t"))), map[Rule]int{}},
		{"a failed write changes nothing", history(create,
			Op{Kind: DeleteTopic, Client: "admin-0", Start: ms(20), End: ms(30), Topic: "t", Outcome: Failed},
			read("admin-1", 40, 50, present("t", 1))), map[Rule]int{}},
		// Monotonic reads: both reads overlap a slow write, so either
		// state is allowed to each, but not new-then-old to one client.
		{"one client sees new then old", history(
			write(CreateTopic, "admin-0", 0, 100, "t", 1, "a"),
			read("admin-1", 10, 20, present("t", 1)),
			read("admin-1", 30, 40, absent("t"))), map[Rule]int{MonotonicReads: 1}},
		{"one client sees old then new", history(
			write(CreateTopic, "admin-0", 0, 100, "t", 1, "a"),
			read("admin-1", 10, 20, absent("t")),
			read("admin-1", 30, 40, present("t", 1))), map[Rule]int{}},
		{"two clients may disagree while the write is in flight", history(
			write(CreateTopic, "admin-0", 0, 100, "t", 1, "a"),
			read("admin-1", 10, 20, present("t", 1)),
			read("admin-2", 30, 40, absent("t"))), map[Rule]int{}},
		{"overlapping reads of one client are not ordered", history(
			write(CreateTopic, "admin-0", 0, 100, "t", 1, "a"),
			read("admin-1", 10, 35, present("t", 1)),
			read("admin-1", 30, 40, absent("t"))), map[Rule]int{}},
		{"config goes backwards for one client", history(create,
			write(AlterConfig, "admin-0", 20, 100, "t", 0, "b"),
			read("admin-1", 30, 40, withConfig("t", "b")),
			read("admin-1", 50, 60, withConfig("t", "a"))), map[Rule]int{MonotonicReads: 1}},
		{"a stale read after a fresh one is both", history(
			write(CreateTopic, "admin-0", 0, 10, "t", 1, "a"),
			read("admin-1", 20, 30, present("t", 1)),
			read("admin-1", 40, 50, absent("t"))), map[Rule]int{ReadYourWrites: 1, MonotonicReads: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := Check(tt.h)
			require.Equal(t, tt.want, rules(rep), "%v", rep.Violations)
		})
	}
}

func TestViolationExcerpt(t *testing.T) {
	h := history(write(CreateTopic, "admin-0", 0, 10, "t", 1, "a"),
		read("admin-2", 12, 13, present("t", 1)), // unrelated noise
		read("admin-1", 20, 30, absent("t")))
	h.Seed = 42
	rep := Check(h)
	require.Len(t, rep.Violations, 1)
	v := rep.Violations[0]
	require.Equal(t, ReadYourWrites, v.Rule)
	require.Len(t, v.Excerpt, 2, "the write and the offending read, nothing else")
	require.Equal(t, CreateTopic, v.Excerpt[0].Kind)
	require.Equal(t, 3, v.Excerpt[1].ID)
	s := v.String()
	require.Contains(t, s, "completed 10ms before the read started")
	require.Contains(t, s, "create-topic t 1p cfg=a ok")
	require.Equal(t, 3, strings.Count(s, "\n")+1)

	h = history(write(CreateTopic, "admin-0", 0, 100, "t", 1, "a"),
		read("admin-1", 10, 20, present("t", 1)),
		read("admin-1", 30, 40, absent("t")))
	rep = Check(h)
	require.Len(t, rep.Violations, 1)
	require.Equal(t, []int{1, 2, 3}, []int{rep.Violations[0].Excerpt[0].ID, rep.Violations[0].Excerpt[1].ID, rep.Violations[0].Excerpt[2].ID},
		"the write the first read saw, the first read, the second read")
}

func produced(key, topic string, p int32, off int64, start, end int) Op {
	return Op{Kind: Produce, Client: "producer-0", Start: ms(start), End: ms(end), Topic: topic,
		Records: []RecordRef{{Key: key, Topic: topic, Partition: p, Offset: off}}, Views: []View{{Topic: topic, State: Present}}}
}

func consumed(start int, recs ...RecordRef) Op {
	return Op{Kind: Consume, Client: "consumer-0", Start: ms(start), End: ms(start + 1), Records: recs}
}

func TestCheckRecordHistories(t *testing.T) {
	d := write(CreateTopic, "admin-0", 0, 1, "d", 1, "a")
	k1 := RecordRef{Key: "k1", Topic: "d", Partition: 0, Offset: 0}
	k2 := RecordRef{Key: "k2", Topic: "d", Partition: 0, Offset: 1}
	unacked := produced("k3", "d", 0, 0, 5, 6)
	unacked.Outcome, unacked.Records[0].Offset, unacked.Views = Unknown, 0, nil
	ends := func(start int, end int64) Op {
		return Op{Kind: ListEndOffsets, Client: "admin-1", Start: ms(start), End: ms(start + 1),
			Ends: []EndOffset{{Topic: "d", Partition: 0, Offset: end}}}
	}
	tests := []struct {
		name    string
		h       History
		drained bool
		want    map[Rule]int
	}{
		{"each acked record consumed once", history(d, produced("k1", "d", 0, 0, 2, 3), produced("k2", "d", 0, 1, 3, 4),
			consumed(10, k1), consumed(11, k2)), true, map[Rule]int{}},
		{"an acked record never consumed", history(d, produced("k1", "d", 0, 0, 2, 3), produced("k2", "d", 0, 1, 3, 4),
			consumed(10, k1)), true, map[Rule]int{NoLoss: 1}},
		{"loss is only judged after a drain", history(d, produced("k1", "d", 0, 0, 2, 3)), false, map[Rule]int{}},
		{"a record consumed twice", history(d, produced("k1", "d", 0, 0, 2, 3),
			consumed(10, k1), consumed(11, k1)), true, map[Rule]int{NoDuplication: 1}},
		{"a record consumed at another offset was written twice", history(d, produced("k1", "d", 0, 0, 2, 3),
			consumed(10, RecordRef{Key: "k1", Topic: "d", Partition: 0, Offset: 4})), true, map[Rule]int{NoDuplication: 1}},
		{"an unacknowledged record may be consumed once", history(d, unacked,
			consumed(10, RecordRef{Key: "k3", Topic: "d"})), true, map[Rule]int{}},
		{"a record nobody produced", history(d, consumed(10, RecordRef{Key: "zz", Topic: "d"})), true, map[Rule]int{WellFormed: 1}},
		{"end offset behind an acked record", history(d, produced("k1", "d", 0, 0, 2, 3), produced("k2", "d", 0, 1, 3, 4),
			ends(5, 1), consumed(10, k1), consumed(11, k2)), true, map[Rule]int{ReadYourWrites: 1}},
		{"end offset past every acked record", history(d, produced("k1", "d", 0, 0, 2, 3), produced("k2", "d", 0, 1, 3, 4),
			ends(5, 2), consumed(10, k1), consumed(11, k2)), true, map[Rule]int{}},
		{"end offset read while the produce was in flight", history(d, produced("k1", "d", 0, 0, 2, 3), produced("k2", "d", 0, 1, 3, 8),
			ends(5, 1), consumed(10, k1), consumed(11, k2)), true, map[Rule]int{}},
		{"a produce refused as unknown topic after the create", history(d,
			Op{Kind: Produce, Client: "producer-0", Start: ms(2), End: ms(3), Outcome: Failed, Topic: "d",
				Records: []RecordRef{{Key: "k1", Topic: "d"}}, Views: []View{{Topic: "d", State: Absent}}}), true, map[Rule]int{ReadYourWrites: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.h.Drained = tt.drained
			rep := Check(tt.h)
			require.Equal(t, tt.want, rules(rep), "%v", rep.Violations)
		})
	}
}

// TestMonotonicBlamesOnlyCertainOrder: a view that matches an old and a new
// version does not prove the client saw the new one.
func TestMonotonicBlamesOnlyCertainOrder(t *testing.T) {
	h := history(write(CreateTopic, "admin-0", 0, 10, "t", 2, "a"),
		write(CreatePartitions, "admin-0", 20, 30, "t", 3, ""),
		read("admin-1", 40, 50, withConfig("t", "a")), // version 1 or 2
		read("admin-1", 60, 70, present("t", 2)))      // version 1: stale
	rep := Check(h)
	require.Equal(t, map[Rule]int{ReadYourWrites: 1}, rules(rep), "%v", rep.Violations)
}
