// Package admin is the admin client of a kconsist factory: a franz-go kadm
// client whose requests carry the factory's consistency token.
//
// It adds nothing to kadm's API and hides nothing: every kadm method is
// available on [Client] with its rich results and partial failures. What it
// adds is the guarantee: once CreateTopics, DeleteTopics, CreatePartitions,
// AlterTopicConfigs (or any other metadata change) returns, every client of
// the same factory sees the change on every broker of a KIP-1243 cluster,
// because the response's metadata offset is in the shared store and every
// later request carries it. A broker that has not applied it yet waits, or
// answers INCONSISTENT_METADATA, which the client retries within franz-go's
// request retry budget; past it, errors satisfy
// errors.Is(err, consistency.ErrInconsistentMetadata).
//
// One behaviour differs from kadm on purpose: methods that read topic or
// broker metadata never answer from franz-go's metadata cache, which cannot
// know about tokens (see reads.go). Their answers also list authorized
// operations, which is how kadm is told to skip the cache.
package admin

import (
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Client is a kadm client made by a factory. Close it when done.
type Client struct {
	*kadm.Client
	cl *kgo.Client
}

// New wraps cl, a client made by a factory. Most users call
// factory.Factory.Admin instead.
func New(cl *kgo.Client) *Client {
	return &Client{Client: kadm.NewClient(cl), cl: cl}
}

// Kgo returns the underlying franz-go client.
func (c *Client) Kgo() *kgo.Client { return c.cl }

// Close closes the underlying client.
func (c *Client) Close() { c.cl.Close() }
