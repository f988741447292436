// Package admin is the admin client of a kconsist factory: a franz-go kadm
// client whose requests carry the factory's consistency token.
//
// It adds nothing to kadm's API and hides nothing: every kadm method is
// available on [Client] with the same signature, rich results and partial
// failures, but Close, which takes a context and returns an error as every
// client of a factory does. What it adds is the guarantee: once
// CreateTopics, DeleteTopics, CreatePartitions, AlterTopicConfigs (or any
// other metadata change) returns, every client of the same factory sees the
// change on every broker, because the change's metadata offset is in the
// shared store and every later request waits for it. On a KIP-1243 cluster
// the offset comes in the response and a broker that has not applied it
// waits, or answers INCONSISTENT_METADATA; on Apache Kafka 4.4 and other
// KRaft clusters the factory learns it from the cluster and holds the
// request itself until the broker has caught up (see the factory package).
// Either way the client retries within franz-go's request retry budget; past
// it, errors satisfy errors.Is(err, consistency.ErrInconsistentMetadata).
// That includes the calls franz-go itself fails at once, those whose group
// or transaction coordinator it could not look up for a request it shards
// (FetchOffsets, DescribeGroups, DeleteGroups, ...): the admin client runs
// them again, within what is left of franz-go's RetryTimeout from the
// first try (see retry.go); a call that partly succeeded is returned as it
// is, and a call that needs no coordinator is franz-go's alone.
//
// One behaviour differs from kadm on purpose: no method answers from
// franz-go's metadata cache, which cannot know about tokens. kadm reads
// topic and broker metadata through kgo's RequestCachedMetadata, which
// serves an answer up to MetadataMinAge old; after another client of the
// factory created partitions or deleted a topic, such an answer shows the
// old state. kadm bypasses the cache when the context asks for authorized
// operations ([kadm.WithAuthorizedOps]), so every method adds that to its
// context and each metadata read goes to a broker, carrying the token. The
// only visible difference is that the answers include authorized
// operations.
//
// [Client] does not expose a *kadm.Client, since calls through one would
// skip that. [Client.Kgo] gives the franz-go client for anything else.
//
// Who owns what: factory.Factory.Admin has the factory's session build the
// franz-go client (its connections stamp and advance the factory's token)
// and hands it to [New] in a link.Admin; from then on the Client owns it,
// and [Client.Close] closes it; the session only counts its requests in
// the factory's Stats.
package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// Client is a kadm client made by a factory (factory.Factory.Admin; the
// zero value is not usable); its methods are kadm's (see the package doc
// for the one difference). Close it when done.
type Client struct {
	adm *kadm.Client
	cl  *kgo.Client
	// budget is cl's retry budget, for the calls franz-go gives up at
	// once (see retry.go).
	budget retryBudget
	// closeOnce closes cl, in the background, then closes closed:
	// franz-go's Close is not safe to run twice at once.
	closeOnce sync.Once
	closed    chan struct{}
}

// New makes an admin client on l.Client, which it owns from then on. It is
// for factory.Factory.Admin, its only caller, which seals l: code outside
// this module cannot name l's type, and a value of it that it reaches all
// the same (the zero value, by type inference; one filled by reflection
// with a client of its own, which carries no token) is not sealed and is
// refused with an error, as is a sealed one without a client.
func New(l link.Admin) (*Client, error) {
	if !l.Sealed() {
		return nil, errors.New("admin: New is for factory.Factory.Admin: the link.Admin given was not made by a factory")
	}
	if l.Client == nil {
		return nil, errors.New("admin: New is for factory.Factory.Admin: no client")
	}
	return &Client{adm: kadm.NewClient(l.Client), cl: l.Client, budget: budgetOf(l.Client), closed: make(chan struct{})}, nil
}

// Kgo returns the underlying franz-go client.
func (c *Client) Kgo() *kgo.Client { return c.cl }

// Close closes the underlying client: requests in flight fail with
// kgo.ErrClientClosed. An admin client is in no group and has nothing to
// hand over, so there is nothing to wait for on the network but franz-go's
// own close (a last client-metrics push, at most about a second). When ctx
// ends first, Close returns its error at once and the closing finishes in
// the background. The closing happens once: another Close waits for it
// (bounded by its own ctx).
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		go func() {
			defer close(c.closed)
			c.cl.Close()
		}()
	})
	select {
	case <-c.closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("admin: close: %w", context.Cause(ctx))
	}
}

// SetTimeoutMillis is [kadm.Client.SetTimeoutMillis]; like kadm's, it is
// not safe to call concurrently with requests.
func (c *Client) SetTimeoutMillis(millis int32) { c.adm.SetTimeoutMillis(millis) }

// fresh makes kadm skip franz-go's metadata cache for every metadata read
// done under ctx.
func fresh(ctx context.Context) context.Context { return kadm.WithAuthorizedOps(ctx) }
