package consumer

import (
	"context"
	"maps"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Group is a group consumer's franz-go client as its rebalance callbacks
// (factory.OnPartitionsAssigned, OnPartitionsRevoked, OnPartitionsLost) see
// it: the client whose group is rebalancing. That is the consumer's client,
// or, in the callbacks of a client retired by a cluster change, that
// client; either way it is the factory's, and its requests carry the token.
//
// Group is kgo.Client under another name, so that a callback costs no
// allocation; use its methods rather than converting it.
type Group kgo.Client

// Commit commits the offsets of every record polled from this client so
// far, and waits for the answer. In OnPartitionsRevoked it is the last
// chance to commit the partitions being revoked before another member
// starts on them from the committed offsets: setting OnPartitionsRevoked
// replaces franz-go's own commit on revoke, as with kgo.OnPartitionsRevoked.
// In OnPartitionsLost a commit is bound to fail: the partitions already
// belong to another member.
func (g *Group) Commit(ctx context.Context) error {
	return g.Kgo().CommitUncommittedOffsets(ctx)
}

// Kgo returns the franz-go client, for what Group does not cover
// (kgo.Client.CommitOffsetsSync with offsets of your own, GroupMetadata).
func (g *Group) Kgo() *kgo.Client { return (*kgo.Client)(g) }

// AllowRebalance lets a consumer made with factory.BlockRebalanceOnPoll
// rebalance again: from a poll that returned records until this call, the
// group cannot take partitions away, so that commits and the rebalance
// callbacks never run while records of revoked partitions are being
// processed (franz-go's kgo.Client.AllowRebalance). Call it once the
// records polled are processed, committed if need be; several polls may
// come before it. Without BlockRebalanceOnPoll it does nothing.
//
// Do not wait long: a member that blocks a rebalance past the group's
// rebalance timeout is removed from the group. Close allows the rebalance
// itself, so that leaving the group cannot wait for this call.
func (c *Consumer[K, V]) AllowRebalance() {
	c.Kgo().AllowRebalance()
}

// PauseFetchTopics stops fetching topics until ResumeFetchTopics, and
// returns every topic paused now; with no topics it only returns the
// paused ones. Nothing is skipped: once resumed, a topic is read from where
// polls left it. Records a read took from franz-go before the pause and
// has not returned yet (what a Records loop that stopped early left;
// outside a group, the rest of a Poll's fetch) still come. Pausing topics
// and pausing partitions are independent, as in franz-go: resuming a topic
// leaves its paused partitions paused.
//
// Pauses outlive a cluster change: the client that takes over starts with
// the same topics and partitions paused.
func (c *Consumer[K, V]) PauseFetchTopics(topics ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl.PauseFetchTopics(topics...)
}

// PauseFetchPartitions stops fetching partitions (topic to partitions)
// until ResumeFetchPartitions, and returns every partition paused now; see
// PauseFetchTopics. With none it only returns the paused ones.
func (c *Consumer[K, V]) PauseFetchPartitions(partitions map[string][]int32) map[string][]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cl.PauseFetchPartitions(partitions)
}

// ResumeFetchTopics fetches paused topics again; topics not paused are
// left as they are.
func (c *Consumer[K, V]) ResumeFetchTopics(topics ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cl.ResumeFetchTopics(topics...)
}

// ResumeFetchPartitions fetches paused partitions again; partitions not
// paused are left as they are.
func (c *Consumer[K, V]) ResumeFetchPartitions(partitions map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cl.ResumeFetchPartitions(partitions)
}

// SetOffsets moves consumption of partitions the consumer has now (assigned
// by the group or by Assign) to the offsets given: the next records polled
// from them start there, and records fetched before are dropped, those a
// read took from franz-go and has not returned yet included (called from
// a Records loop's body, the loop's next record is already from the
// offsets set). A SetOffsets from another goroutine while a poll is
// fetching may let that poll return records from before it, as franz-go
// does. As in
// franz-go, a partition not consumed now and a negative offset are skipped;
// an Epoch of -1 skips the check of the offset against the partition's
// leader epoch (kgo.EpochOffset).
//
// In a group, another member may own a partition by the time the offset
// applies: call SetOffsets from the polling goroutine with
// factory.BlockRebalanceOnPoll, before AllowRebalance, or from
// OnPartitionsAssigned (through Group.Kgo). Offsets are positions in one
// cluster: after a cluster change the consumer starts afresh (see the
// factory's ClusterChanged event), not at offsets set here.
func (c *Consumer[K, V]) SetOffsets(offsets map[string]map[int32]kgo.EpochOffset) {
	// franz-go drops what it buffered of these partitions; the records a
	// read took from it and has not returned yet go too, at the next read
	// (the map is copied: the caller may reuse its own). Counted before
	// franz-go moves: a fetch that returns records from the offsets set
	// reads a count that includes this call, and keeps them (see fetch).
	moved := make(map[string]map[int32]kgo.EpochOffset, len(offsets))
	for t, ps := range offsets {
		moved[t] = maps.Clone(ps)
	}
	cl := c.Kgo() // before seekMu: followChange takes seekMu under mu
	c.addSeek(moved)
	cl.SetOffsets(offsets)
}

// seek is a SetOffsets call, or a cluster change (moved nil: every record
// taken goes), waiting for the reading goroutine.
type seek struct {
	gen   uint64 // seekGen after the call
	moved map[string]map[int32]kgo.EpochOffset
}

// addSeek counts a seek and queues it for the reading goroutine.
func (c *Consumer[K, V]) addSeek(moved map[string]map[int32]kgo.EpochOffset) {
	c.seekMu.Lock()
	defer c.seekMu.Unlock()
	c.seeks = append(c.seeks, seek{gen: c.seekGen.Add(1), moved: moved})
}

// dropSeeked drops from rest the records of every partition a SetOffsets
// moved after rest was fetched. Reading goroutine only.
func (c *Consumer[K, V]) dropSeeked() {
	c.seekMu.Lock()
	seeks, gen := c.seeks, c.seekGen.Load()
	c.seeks = nil
	c.seekMu.Unlock()
	for _, s := range seeks {
		switch {
		case s.gen <= c.restGen || c.rest.empty():
		case s.moved == nil:
			c.rest = cursor{}
		default:
			c.rest.drop(s.moved)
		}
	}
	c.restGen = gen
}

// carryPauses pauses on next what is paused on prev, for the client that
// takes over after a cluster change. c.mu held, so no pause or resume runs
// in between.
func carryPauses(prev, next *kgo.Client) {
	if ts := prev.PauseFetchTopics(); len(ts) > 0 {
		next.PauseFetchTopics(ts...)
	}
	if ps := prev.PauseFetchPartitions(nil); len(ps) > 0 {
		next.PauseFetchPartitions(ps)
	}
}
