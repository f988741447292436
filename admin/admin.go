// Package admin is the admin client of a kconsist factory: a franz-go kadm
// client whose requests carry the factory's consistency token.
//
// It adds nothing to kadm's API and hides nothing: every kadm method is
// available on [Client] with the same signature, rich results and partial
// failures. What it adds is the guarantee: once CreateTopics, DeleteTopics,
// CreatePartitions, AlterTopicConfigs (or any other metadata change)
// returns, every client of the same factory sees the change on every
// broker, because the change's metadata offset is in the shared store and
// every later request waits for it. On a KIP-1243 cluster the offset comes
// in the response and a broker that has not applied it waits, or answers
// INCONSISTENT_METADATA; on Apache Kafka 4.4 and other KRaft clusters the
// factory learns it from the cluster and holds the request itself until
// the broker has caught up (see the factory package). Either way the
// client retries within franz-go's request retry budget; past it, errors
// satisfy errors.Is(err, consistency.ErrInconsistentMetadata).
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
package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/bridge"
)

// Client is a kadm client made by a factory (factory.Factory.Admin; the
// zero value is not usable); its methods are kadm's (see the package doc
// for the one difference). Close it when done.
type Client struct {
	adm *kadm.Client
	cl  *kgo.Client
}

// The factory makes a Client through internal/bridge: a constructor here
// would let users wrap a client that carries no token.
func init() {
	bridge.InitAdmin = func(dst any, cl *kgo.Client) { dst.(*Client).init(cl) }
}

func (c *Client) init(cl *kgo.Client) {
	c.adm, c.cl = kadm.NewClient(cl), cl
}

// Kgo returns the underlying franz-go client.
func (c *Client) Kgo() *kgo.Client { return c.cl }

// Close closes the underlying client.
func (c *Client) Close() { c.cl.Close() }

// SetTimeoutMillis is [kadm.Client.SetTimeoutMillis]; like kadm's, it is
// not safe to call concurrently with requests.
func (c *Client) SetTimeoutMillis(millis int32) { c.adm.SetTimeoutMillis(millis) }

// fresh makes kadm skip franz-go's metadata cache for every metadata read
// done under ctx.
func fresh(ctx context.Context) context.Context { return kadm.WithAuthorizedOps(ctx) }
