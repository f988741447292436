package admin

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
)

// The methods below are kadm's, with one change: they never answer from
// franz-go's metadata cache.
//
// kadm reads topic and broker metadata through kgo's RequestCachedMetadata,
// which serves a cached answer for MetadataMinAge (10ms at the least). A
// cache cannot know about tokens: after another client of the factory
// created partitions or deleted a topic, a read answered from it would show
// the old state, and read-your-writes would fail for reads that start inside
// that window (the checker in integration/checker found such reads). kadm
// bypasses the cache when the context asks for authorized operations, so
// each method adds that to its context; every metadata request then goes to
// a broker, carrying the token. The only visible difference is that the
// answers include authorized operations.
//
// Every kadm method that reads metadata through kadm's own lookups is
// shadowed here (as of kadm v1.20.0). Methods not listed read metadata only
// to route their requests, and franz-go refreshes routes that turn out to
// be wrong.

func fresh(ctx context.Context) context.Context { return kadm.WithAuthorizedOps(ctx) }

// Metadata is kadm.Client.Metadata, never answered from a cache.
func (c *Client) Metadata(ctx context.Context, topics ...string) (kadm.Metadata, error) {
	return c.Client.Metadata(fresh(ctx), topics...)
}

// BrokerMetadata is kadm.Client.BrokerMetadata, never answered from a cache.
func (c *Client) BrokerMetadata(ctx context.Context) (kadm.Metadata, error) {
	return c.Client.BrokerMetadata(fresh(ctx))
}

// ListBrokers is kadm.Client.ListBrokers, never answered from a cache.
func (c *Client) ListBrokers(ctx context.Context) (kadm.BrokerDetails, error) {
	return c.Client.ListBrokers(fresh(ctx))
}

// ListTopics is kadm.Client.ListTopics, never answered from a cache.
func (c *Client) ListTopics(ctx context.Context, topics ...string) (kadm.TopicDetails, error) {
	return c.Client.ListTopics(fresh(ctx), topics...)
}

// ListTopicsWithInternal is kadm.Client.ListTopicsWithInternal, never
// answered from a cache.
func (c *Client) ListTopicsWithInternal(ctx context.Context, topics ...string) (kadm.TopicDetails, error) {
	return c.Client.ListTopicsWithInternal(fresh(ctx), topics...)
}

// ListStartOffsets is kadm.Client.ListStartOffsets; the partitions it asks
// about are never taken from a cache.
func (c *Client) ListStartOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.Client.ListStartOffsets(fresh(ctx), topics...)
}

// ListEndOffsets is kadm.Client.ListEndOffsets; the partitions it asks
// about are never taken from a cache.
func (c *Client) ListEndOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.Client.ListEndOffsets(fresh(ctx), topics...)
}

// ListCommittedOffsets is kadm.Client.ListCommittedOffsets; the partitions
// it asks about are never taken from a cache.
func (c *Client) ListCommittedOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.Client.ListCommittedOffsets(fresh(ctx), topics...)
}

// ListOffsetsAfterMilli is kadm.Client.ListOffsetsAfterMilli; the
// partitions it asks about are never taken from a cache.
func (c *Client) ListOffsetsAfterMilli(ctx context.Context, millisecond int64, topics ...string) (kadm.ListedOffsets, error) {
	return c.Client.ListOffsetsAfterMilli(fresh(ctx), millisecond, topics...)
}

// FetchOffsetsForTopics is kadm.Client.FetchOffsetsForTopics; the
// partitions it reports are never taken from a cache.
func (c *Client) FetchOffsetsForTopics(ctx context.Context, group string, topics ...string) (kadm.OffsetResponses, error) {
	return c.Client.FetchOffsetsForTopics(fresh(ctx), group, topics...)
}

// Lag is kadm.Client.Lag; the partitions it reports are never taken from a
// cache.
func (c *Client) Lag(ctx context.Context, groups ...string) (kadm.DescribedGroupLags, error) {
	return c.Client.Lag(fresh(ctx), groups...)
}

// ApiVersions is kadm.Client.ApiVersions; the brokers it asks are never
// taken from a cache.
func (c *Client) ApiVersions(ctx context.Context) (kadm.BrokersApiVersions, error) { //nolint:revive // kadm's name
	return c.Client.ApiVersions(fresh(ctx))
}

// CreatePartitions is kadm.Client.CreatePartitions; the partition counts it
// adds to are never taken from a cache.
func (c *Client) CreatePartitions(ctx context.Context, add int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.Client.CreatePartitions(fresh(ctx), add, topics...)
}

// UpdatePartitions is kadm.Client.UpdatePartitions; the partition counts it
// compares with are never taken from a cache.
func (c *Client) UpdatePartitions(ctx context.Context, set int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.Client.UpdatePartitions(fresh(ctx), set, topics...)
}

// ValidateCreatePartitions is kadm.Client.ValidateCreatePartitions, never
// from a cache.
func (c *Client) ValidateCreatePartitions(ctx context.Context, add int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.Client.ValidateCreatePartitions(fresh(ctx), add, topics...)
}

// ValidateUpdatePartitions is kadm.Client.ValidateUpdatePartitions, never
// from a cache.
func (c *Client) ValidateUpdatePartitions(ctx context.Context, set int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.Client.ValidateUpdatePartitions(fresh(ctx), set, topics...)
}

// CommitOffsets is kadm.Client.CommitOffsets; the topic ids it commits
// under are never taken from a cache.
func (c *Client) CommitOffsets(ctx context.Context, group string, os kadm.Offsets) (kadm.OffsetResponses, error) {
	return c.Client.CommitOffsets(fresh(ctx), group, os)
}

// CommitOffsetsByID is kadm.Client.CommitOffsetsByID, never from a cache.
func (c *Client) CommitOffsetsByID(ctx context.Context, group string, os kadm.OffsetsByID) (kadm.OffsetResponsesByID, error) {
	return c.Client.CommitOffsetsByID(fresh(ctx), group, os)
}

// ListMaxTimestampOffsets is kadm.Client.ListMaxTimestampOffsets, never
// from a cache.
func (c *Client) ListMaxTimestampOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.Client.ListMaxTimestampOffsets(fresh(ctx), topics...)
}

// DescribeProducers is kadm.Client.DescribeProducers, never from a cache.
func (c *Client) DescribeProducers(ctx context.Context, s kadm.TopicsSet) (kadm.DescribedProducersTopics, error) {
	return c.Client.DescribeProducers(fresh(ctx), s)
}
