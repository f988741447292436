package factory

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
)

// RebalanceFunc is called at a rebalance of a group consumer with the
// client whose group rebalances and the partitions concerned (topic to
// partitions, a map the function may keep or change). It runs in franz-go's
// group goroutine, never concurrently with another RebalanceFunc of the
// consumer, and holds up the rebalance until it returns: it must finish
// within the group's rebalance timeout, and must not Close the consumer.
// ctx ends when the client closes.
type RebalanceFunc func(ctx context.Context, g *consumer.Group, partitions map[string][]int32)

// rebalanceConfig holds the consumer options of this file.
type rebalanceConfig struct {
	assigned, revoked, lost RebalanceFunc
	block                   bool
}

// OnPartitionsAssigned calls fn when the group assigns partitions to a
// consumer, before they are fetched (franz-go's kgo.OnPartitionsAssigned).
// A consumer option, for clients with a group.id.
func OnPartitionsAssigned(fn RebalanceFunc) ConsumerOpt {
	return rebalanceOpt("OnPartitionsAssigned", fn, func(r *rebalanceConfig) { r.assigned = fn })
}

// OnPartitionsRevoked calls fn when partitions are taken from a consumer
// in a rebalance, and when it leaves the group (Close); once fn returns,
// no poll returns records of them (franz-go's kgo.OnPartitionsRevoked).
//
// fn replaces the commit the consumer otherwise makes at that point, as in
// franz-go: commit in fn (g.Commit) whatever another member must not read
// again. A consumer option, for clients with a group.id.
func OnPartitionsRevoked(fn RebalanceFunc) ConsumerOpt {
	return rebalanceOpt("OnPartitionsRevoked", fn, func(r *rebalanceConfig) { r.revoked = fn })
}

// OnPartitionsLost calls fn when a consumer finds its partitions are
// already another member's: it was removed from the group (its session
// timed out, a fatal group error), so committing them is bound to fail
// (franz-go's kgo.OnPartitionsLost). Without it nothing is called then.
// A consumer option, for clients with a group.id.
func OnPartitionsLost(fn RebalanceFunc) ConsumerOpt {
	return rebalanceOpt("OnPartitionsLost", fn, func(r *rebalanceConfig) { r.lost = fn })
}

// BlockRebalanceOnPoll keeps the group from rebalancing from the moment a
// poll returns records until Consumer.AllowRebalance, so that the records
// being processed are never revoked meanwhile and the rebalance callbacks
// never run concurrently with their processing (franz-go's
// kgo.BlockRebalanceOnPoll; the Java consumer behaves so within poll).
// Process quickly: a member that holds up a rebalance past the rebalance
// timeout is removed from the group. A consumer option, for clients with
// a group.id (a bare franz-go client made by KgoClient calls its own
// AllowRebalance).
func BlockRebalanceOnPoll() ConsumerOpt {
	return consumerOnly(func(c *config) { c.rebalance.block = true })
}

// rebalanceOpt is a consumer option setting one callback.
func rebalanceOpt(key string, fn RebalanceFunc, set func(*rebalanceConfig)) ConsumerOpt {
	return consumerOnly(func(c *config) {
		if fn == nil {
			c.fail("%s: nil function", key)
			return
		}
		set(&c.rebalance)
	})
}

// rebalanceOpts returns the franz-go options of c's rebalance settings for
// the client of every role that takes a consumer's options (roleTable): a
// consumer, a GroupTransactSession, a bare franz-go client. Other roles
// never get them (given to New, they are part of every client's base).
func (c *config) rebalanceOpts() ([]kgo.Opt, error) {
	if !c.role.consumes() {
		return nil, nil
	}
	r := c.rebalance
	var opts []kgo.Opt
	var set []string
	wrap := func(fn RebalanceFunc) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(ctx context.Context, cl *kgo.Client, ps map[string][]int32) {
			fn(ctx, (*consumer.Group)(cl), ps)
		}
	}
	if r.assigned != nil {
		opts = append(opts, kgo.OnPartitionsAssigned(wrap(r.assigned)))
		set = append(set, "OnPartitionsAssigned")
	}
	if r.revoked != nil {
		opts = append(opts, kgo.OnPartitionsRevoked(wrap(r.revoked)))
		set = append(set, "OnPartitionsRevoked")
	}
	if r.lost != nil {
		opts = append(opts, kgo.OnPartitionsLost(wrap(r.lost)))
		set = append(set, "OnPartitionsLost")
	}
	if r.block {
		opts = append(opts, kgo.BlockRebalanceOnPoll())
		set = append(set, "BlockRebalanceOnPoll")
	}
	if len(set) > 0 && c.consume.groupID == "" {
		return nil, fmt.Errorf("%s: needs group.id (a consumer without a group has no rebalances)", strings.Join(set, ", "))
	}
	return opts, nil
}
