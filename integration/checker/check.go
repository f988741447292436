package checker

import (
	"fmt"
	"sort"
	"strings"
)

// Rule names a property the checker verifies.
type Rule string

const (
	// ReadYourWrites: a read that starts after a write completed (any
	// client) reflects it or a later write.
	ReadYourWrites Rule = "read-your-writes"
	// MonotonicReads: a client never observes an older metadata state of
	// a topic after a newer one.
	MonotonicReads Rule = "monotonic-reads"
	// NoLoss: every acknowledged produce to a subscribed topic is
	// consumed.
	NoLoss Rule = "no-loss"
	// NoDuplication: no record is consumed twice.
	NoDuplication Rule = "no-duplication"
	// WellFormed: the history itself is possible (no read of a state
	// nobody wrote, no overlapping writes to one topic, no consumed record
	// nobody produced). A violation here is a bug in the system or in
	// the workload, never an expected staleness.
	WellFormed Rule = "well-formed"
)

// Rules lists every rule, in report order.
var Rules = []Rule{ReadYourWrites, MonotonicReads, NoLoss, NoDuplication, WellFormed}

// Violation is one broken rule with the shortest history excerpt that
// shows it.
type Violation struct {
	Rule    Rule
	Topic   string
	Message string
	Excerpt []Op
}

func (v Violation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: %s", v.Rule, v.Topic, v.Message)
	for _, op := range v.Excerpt {
		b.WriteString("\n    " + op.String())
	}
	return b.String()
}

// Report is the verdict on a history.
type Report struct {
	Ops        int // operations in the history
	Writes     int // successful metadata writes
	Reads      int // successful reads with at least one view
	Views      int // views judged
	Unjudged   int // views skipped after a write of unknown outcome
	Acked      int // acknowledged produces
	Consumed   int // records consumed
	Violations []Violation
}

// Count returns the number of violations of rule r.
func (r Report) Count(rule Rule) int {
	n := 0
	for _, v := range r.Violations {
		if v.Rule == rule {
			n++
		}
	}
	return n
}

// topicState is a topic's metadata after some prefix of its writes.
type topicState struct {
	exists     bool
	partitions int32
	config     string
}

func (s topicState) matches(v View) bool {
	switch v.State {
	case Absent:
		return !s.exists
	case NotAbove:
		return !s.exists || s.partitions <= v.Partitions
	}
	if !s.exists {
		return false
	}
	if v.Partitions > 0 && s.partitions != v.Partitions {
		return false
	}
	return !v.HasConfig || s.config == v.Config
}

// chain is one topic's write history: writes[k-1] produced states[k];
// states[0] is the topic before any write (absent).
type chain struct {
	writes []Op
	states []topicState
	// unknownFrom: the start of the first write of unknown outcome; views
	// of reads ending after it are not judged (-1: none).
	unknownFrom int64
}

// window returns lo, the number of writes completed before a read that
// started at start, and hi, the number of writes started before it ended.
// A correct read reflects a state in [lo, hi].
func (c *chain) window(read Op) (lo, hi int) {
	lo = sort.Search(len(c.writes), func(i int) bool { return c.writes[i].End >= read.Start })
	hi = sort.Search(len(c.writes), func(i int) bool { return c.writes[i].Start >= read.End })
	return lo, hi
}

// judged is a view placed on its topic's chain.
type judged struct {
	op      Op
	view    View
	lo, hi  int
	matches []int // versions whose state matches the view
}

// floor is the oldest version the read may have observed: its oldest
// match no later than the writes that had started when it ended. A view
// that matches several versions (a config value two writes left alone)
// counts as the oldest, so monotonic reads blame only what is certain.
func (j judged) floor() (int, bool) {
	if len(j.matches) > 0 && j.matches[0] <= j.hi {
		return j.matches[0], true
	}
	return 0, false
}

// newest is the newest version the read may have observed.
func (j judged) newest() (int, bool) {
	for i := len(j.matches) - 1; i >= 0; i-- {
		if j.matches[i] <= j.hi {
			return j.matches[i], true
		}
	}
	return 0, false
}

// Check verifies read-your-writes, monotonic reads, no loss and no
// duplication on h. See the package documentation for the model.
func Check(h History) Report {
	rep := Report{Ops: len(h.Ops)}
	chains := buildChains(h, &rep)

	// Read-your-writes, per view; collect views per (client, topic) for
	// monotonic reads.
	type sessionKey struct{ client, topic string }
	sessions := map[sessionKey][]judged{}
	for _, op := range h.Ops {
		// A refused operation (a produce answered UNKNOWN_TOPIC_OR_PARTITION)
		// still observed its topic.
		if op.Outcome == Unknown || len(op.Views) == 0 {
			continue
		}
		rep.Reads++
		for _, v := range op.Views {
			c := chains[v.Topic]
			if c == nil {
				c = &chain{states: []topicState{{}}, unknownFrom: -1}
				chains[v.Topic] = c
			}
			if c.unknownFrom >= 0 && int64(op.End) > c.unknownFrom {
				rep.Unjudged++
				continue
			}
			rep.Views++
			j := judged{op: op, view: v}
			j.lo, j.hi = c.window(op)
			for k, s := range c.states {
				if s.matches(v) {
					j.matches = append(j.matches, k)
				}
			}
			if vio, ok := judgeRYW(c, j); ok {
				rep.Violations = append(rep.Violations, vio)
			}
			key := sessionKey{op.Client, v.Topic}
			sessions[key] = append(sessions[key], j)
		}
	}

	// Monotonic reads: per client and topic, a read must not show a
	// version older than the floor of a read of the same client that
	// ended before it started.
	keys := make([]sessionKey, 0, len(sessions))
	for k := range sessions {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool {
		if keys[a].client != keys[b].client {
			return keys[a].client < keys[b].client
		}
		return keys[a].topic < keys[b].topic
	})
	for _, key := range keys {
		js := sessions[key]
		sort.SliceStable(js, func(a, b int) bool { return js[a].op.Start < js[b].op.Start })
		for i, j2 := range js {
			newest, ok := j2.newest()
			if !ok {
				continue // not a possible view; well-formed reported it
			}
			best, bestFloor := -1, -1
			for p := range i {
				j1 := js[p]
				if j1.op.End >= j2.op.Start || j1.op.ID == j2.op.ID {
					continue
				}
				if f, ok := j1.floor(); ok && f > bestFloor {
					best, bestFloor = p, f
				}
			}
			if best < 0 || newest >= bestFloor {
				continue
			}
			j1 := js[best]
			c := chains[key.topic]
			excerpt := []Op{}
			if bestFloor > 0 {
				excerpt = append(excerpt, c.writes[bestFloor-1])
			}
			excerpt = append(excerpt, j1.op, j2.op)
			rep.Violations = append(rep.Violations, Violation{
				Rule:  MonotonicReads,
				Topic: key.topic,
				Message: fmt.Sprintf("%s saw %q (version ≥ %d) in op #%d, then %q (version ≤ %d) in op #%d",
					key.client, j1.view, bestFloor, j1.op.ID, j2.view, newest, j2.op.ID),
				Excerpt: excerpt,
			})
		}
	}

	checkEnds(h, &rep)
	checkRecords(h, &rep)
	return rep
}

// buildChains orders each topic's successful writes and computes its states.
func buildChains(h History, rep *Report) map[string]*chain {
	chains := map[string]*chain{}
	get := func(t string) *chain {
		c := chains[t]
		if c == nil {
			c = &chain{states: []topicState{{}}, unknownFrom: -1}
			chains[t] = c
		}
		return c
	}
	for _, op := range h.Ops {
		if !op.Kind.IsWrite() {
			continue
		}
		c := get(op.Topic)
		switch op.Outcome {
		case OK:
			c.writes = append(c.writes, op)
			rep.Writes++
		case Unknown:
			if c.unknownFrom < 0 || int64(op.Start) < c.unknownFrom {
				c.unknownFrom = int64(op.Start)
			}
		}
	}
	names := make([]string, 0, len(chains))
	for t := range chains {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		c := chains[t]
		sort.SliceStable(c.writes, func(a, b int) bool { return c.writes[a].Start < c.writes[b].Start })
		s := topicState{}
		for i, w := range c.writes {
			if i > 0 && w.Start < c.writes[i-1].End {
				rep.Violations = append(rep.Violations, Violation{
					Rule: WellFormed, Topic: t,
					Message: "two writes to one topic overlap in time; their order is unknown",
					Excerpt: []Op{c.writes[i-1], w},
				})
			}
			switch w.Kind {
			case CreateTopic:
				if s.exists {
					rep.Violations = append(rep.Violations, Violation{
						Rule: WellFormed, Topic: t, Message: "a create of an existing topic succeeded",
						Excerpt: []Op{w},
					})
				}
				s = topicState{exists: true, partitions: w.Partitions, config: w.Config}
			case DeleteTopic:
				s = topicState{}
			case CreatePartitions:
				s.partitions = w.Partitions
			case AlterConfig:
				s.config = w.Config
			}
			c.states = append(c.states, s)
		}
	}
	return chains
}

// judgeRYW reports a view that reflects no state in its window.
func judgeRYW(c *chain, j judged) (Violation, bool) {
	var below, above = -1, -1
	for _, k := range j.matches {
		if k >= j.lo && k <= j.hi {
			return Violation{}, false
		}
		if k < j.lo {
			below = k
		} else if above < 0 {
			above = k
		}
	}
	switch {
	case below >= 0:
		// The read shows version `below` at best; the write after it
		// had completed before the read started.
		missed := c.writes[below]
		return Violation{
			Rule:  ReadYourWrites,
			Topic: j.view.Topic,
			Message: fmt.Sprintf("op #%d saw %q, the state before op #%d, which completed %v before the read started",
				j.op.ID, j.view, missed.ID, j.op.Start-missed.End),
			Excerpt: []Op{missed, j.op},
		}, true
	case above >= 0:
		w := c.writes[above-1]
		return Violation{
			Rule:  WellFormed,
			Topic: j.view.Topic,
			Message: fmt.Sprintf("op #%d saw %q, a state op #%d made, which started after the read ended",
				j.op.ID, j.view, w.ID),
			Excerpt: []Op{w, j.op},
		}, true
	}
	return Violation{
		Rule: WellFormed, Topic: j.view.Topic,
		Message: fmt.Sprintf("op #%d saw %q, a state no write made", j.op.ID, j.view),
		Excerpt: []Op{j.op},
	}, true
}

// checkEnds: a partition's end offset read after a produce to it was
// acknowledged is beyond the produced offset (read-your-writes for records).
func checkEnds(h History, rep *Report) {
	type tp struct {
		topic string
		p     int32
	}
	acks := map[tp][]Op{}
	for _, op := range h.Ops {
		if op.Kind == Produce && op.Outcome == OK && len(op.Records) == 1 {
			r := op.Records[0]
			acks[tp{r.Topic, r.Partition}] = append(acks[tp{r.Topic, r.Partition}], op)
		}
	}
	for _, op := range h.Ops {
		if op.Kind != ListEndOffsets || op.Outcome != OK {
			continue
		}
		for _, e := range op.Ends {
			var worst *Op
			for i, p := range acks[tp{e.Topic, e.Partition}] {
				if p.End < op.Start && p.Records[0].Offset >= e.Offset {
					if worst == nil || p.Records[0].Offset > worst.Records[0].Offset {
						worst = &acks[tp{e.Topic, e.Partition}][i]
					}
				}
			}
			if worst != nil {
				rep.Violations = append(rep.Violations, Violation{
					Rule: ReadYourWrites, Topic: e.Topic,
					Message: fmt.Sprintf("op #%d listed end offset %d of partition %d after op #%d was acknowledged at offset %d",
						op.ID, e.Offset, e.Partition, worst.ID, worst.Records[0].Offset),
					Excerpt: []Op{*worst, op},
				})
			}
		}
	}
}

// checkRecords: every acknowledged produce to a subscribed topic is
// consumed exactly once, at the offset it was acknowledged at.
func checkRecords(h History, rep *Report) {
	subscribed := map[string]bool{}
	for _, t := range h.Subscribed {
		subscribed[t] = true
	}
	produced := map[string]Op{}
	for _, op := range h.Ops {
		if op.Kind == Produce && len(op.Records) == 1 {
			produced[op.Records[0].Key] = op
			if op.Outcome == OK {
				rep.Acked++
			}
		}
	}
	seen := map[string][]Op{}
	var keys []string
	for _, op := range h.Ops {
		if op.Kind != Consume {
			continue
		}
		for _, r := range op.Records {
			rep.Consumed++
			if len(seen[r.Key]) == 0 {
				keys = append(keys, r.Key)
			}
			seen[r.Key] = append(seen[r.Key], op)
			p, ok := produced[r.Key]
			switch {
			case !ok:
				rep.Violations = append(rep.Violations, Violation{
					Rule: WellFormed, Topic: r.Topic,
					Message: fmt.Sprintf("op #%d consumed key %s at %s[%d]@%d, which nobody produced", op.ID, r.Key, r.Topic, r.Partition, r.Offset),
					Excerpt: []Op{op},
				})
			case p.Outcome == OK && (p.Records[0].Topic != r.Topic || p.Records[0].Partition != r.Partition || p.Records[0].Offset != r.Offset):
				rep.Violations = append(rep.Violations, Violation{
					Rule: NoDuplication, Topic: r.Topic,
					Message: fmt.Sprintf("key %s acknowledged at %s[%d]@%d was consumed at %s[%d]@%d: written twice",
						r.Key, p.Records[0].Topic, p.Records[0].Partition, p.Records[0].Offset, r.Topic, r.Partition, r.Offset),
					Excerpt: []Op{p, op},
				})
			}
		}
	}
	for _, k := range keys {
		if ops := seen[k]; len(ops) > 1 {
			excerpt := []Op{}
			if p, ok := produced[k]; ok {
				excerpt = append(excerpt, p)
			}
			excerpt = append(excerpt, ops[0], ops[1])
			rep.Violations = append(rep.Violations, Violation{
				Rule: NoDuplication, Topic: ops[0].Records[0].Topic,
				Message: fmt.Sprintf("key %s consumed %d times (ops #%d and #%d)", k, len(ops), ops[0].ID, ops[1].ID),
				Excerpt: excerpt,
			})
		}
	}
	if !h.Drained {
		return
	}
	var lost []Op
	for _, op := range h.Ops {
		if op.Kind == Produce && op.Outcome == OK && len(op.Records) == 1 &&
			subscribed[op.Records[0].Topic] && len(seen[op.Records[0].Key]) == 0 {
			lost = append(lost, op)
		}
	}
	for _, op := range lost {
		r := op.Records[0]
		rep.Violations = append(rep.Violations, Violation{
			Rule: NoLoss, Topic: r.Topic,
			Message: fmt.Sprintf("key %s acknowledged at %s[%d]@%d was never consumed", r.Key, r.Topic, r.Partition, r.Offset),
			Excerpt: []Op{op},
		})
	}
}
