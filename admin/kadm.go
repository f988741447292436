package admin

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Every method of kadm.Client that takes a context is delegated below, in
// kadm's order of names, and every one hands kadm fresh(ctx): kadm then
// never answers from franz-go's metadata cache, whichever of its methods
// reads metadata today or in a later version. TestEveryKadmMethod fails
// when kadm grows a method that is not here; TestEveryMethodIsFresh fails
// when a method here forgets fresh.
//
// (Generated once from kadm v1.20.0's method set, then kept by hand.)

// AlterAllReplicaLogDirs is [kadm.Client.AlterAllReplicaLogDirs].
func (c *Client) AlterAllReplicaLogDirs(ctx context.Context, alter kadm.AlterReplicaLogDirsReq) (kadm.AlterAllReplicaLogDirsResponses, error) {
	return c.adm.AlterAllReplicaLogDirs(fresh(ctx), alter)
}

// AlterBrokerConfigs is [kadm.Client.AlterBrokerConfigs].
func (c *Client) AlterBrokerConfigs(ctx context.Context, configs []kadm.AlterConfig, brokers ...int32) (kadm.AlterConfigsResponses, error) {
	return c.adm.AlterBrokerConfigs(fresh(ctx), configs, brokers...)
}

// AlterBrokerConfigsState is [kadm.Client.AlterBrokerConfigsState].
func (c *Client) AlterBrokerConfigsState(ctx context.Context, configs []kadm.AlterConfig, brokers ...int32) (kadm.AlterConfigsResponses, error) {
	return c.adm.AlterBrokerConfigsState(fresh(ctx), configs, brokers...)
}

// AlterBrokerReplicaLogDirs is [kadm.Client.AlterBrokerReplicaLogDirs].
func (c *Client) AlterBrokerReplicaLogDirs(ctx context.Context, broker int32, alter kadm.AlterReplicaLogDirsReq) (kadm.AlterReplicaLogDirsResponses, error) {
	return c.adm.AlterBrokerReplicaLogDirs(fresh(ctx), broker, alter)
}

// AlterClientQuotas is [kadm.Client.AlterClientQuotas].
func (c *Client) AlterClientQuotas(ctx context.Context, entries []kadm.AlterClientQuotaEntry) (kadm.AlteredClientQuotas, error) {
	return c.adm.AlterClientQuotas(fresh(ctx), entries)
}

// AlterPartitionAssignments is [kadm.Client.AlterPartitionAssignments].
func (c *Client) AlterPartitionAssignments(ctx context.Context, req kadm.AlterPartitionAssignmentsReq) (kadm.AlterPartitionAssignmentsResponses, error) {
	return c.adm.AlterPartitionAssignments(fresh(ctx), req)
}

// AlterShareGroupOffsets is [kadm.Client.AlterShareGroupOffsets].
func (c *Client) AlterShareGroupOffsets(ctx context.Context, group string, offsets kadm.Offsets) (kadm.AlterShareGroupOffsetsResponses, error) {
	return c.adm.AlterShareGroupOffsets(fresh(ctx), group, offsets)
}

// AlterTopicConfigs is [kadm.Client.AlterTopicConfigs].
func (c *Client) AlterTopicConfigs(ctx context.Context, configs []kadm.AlterConfig, topics ...string) (kadm.AlterConfigsResponses, error) {
	return c.adm.AlterTopicConfigs(fresh(ctx), configs, topics...)
}

// AlterTopicConfigsState is [kadm.Client.AlterTopicConfigsState].
func (c *Client) AlterTopicConfigsState(ctx context.Context, configs []kadm.AlterConfig, topics ...string) (kadm.AlterConfigsResponses, error) {
	return c.adm.AlterTopicConfigsState(fresh(ctx), configs, topics...)
}

// AlterUserSCRAMs is [kadm.Client.AlterUserSCRAMs].
func (c *Client) AlterUserSCRAMs(ctx context.Context, del []kadm.DeleteSCRAM, upsert []kadm.UpsertSCRAM) (kadm.AlteredUserSCRAMs, error) {
	return c.adm.AlterUserSCRAMs(fresh(ctx), del, upsert)
}

// ApiVersions is [kadm.Client.ApiVersions].
func (c *Client) ApiVersions(ctx context.Context) (kadm.BrokersApiVersions, error) {
	return c.adm.ApiVersions(fresh(ctx))
}

// BrokerMetadata is [kadm.Client.BrokerMetadata].
func (c *Client) BrokerMetadata(ctx context.Context) (kadm.Metadata, error) {
	return c.adm.BrokerMetadata(fresh(ctx))
}

// CommitAllOffsets is [kadm.Client.CommitAllOffsets].
func (c *Client) CommitAllOffsets(ctx context.Context, group string, os kadm.Offsets) error {
	return c.adm.CommitAllOffsets(fresh(ctx), group, os)
}

// CommitAllOffsetsByID is [kadm.Client.CommitAllOffsetsByID].
func (c *Client) CommitAllOffsetsByID(ctx context.Context, group string, os kadm.OffsetsByID) error {
	return c.adm.CommitAllOffsetsByID(fresh(ctx), group, os)
}

// CommitOffsets is [kadm.Client.CommitOffsets].
func (c *Client) CommitOffsets(ctx context.Context, group string, os kadm.Offsets) (kadm.OffsetResponses, error) {
	return c.adm.CommitOffsets(fresh(ctx), group, os)
}

// CommitOffsetsByID is [kadm.Client.CommitOffsetsByID].
func (c *Client) CommitOffsetsByID(ctx context.Context, group string, os kadm.OffsetsByID) (kadm.OffsetResponsesByID, error) {
	return c.adm.CommitOffsetsByID(fresh(ctx), group, os)
}

// CreateACLs is [kadm.Client.CreateACLs].
func (c *Client) CreateACLs(ctx context.Context, b *kadm.ACLBuilder) (kadm.CreateACLsResults, error) {
	return c.adm.CreateACLs(fresh(ctx), b)
}

// CreateDelegationToken is [kadm.Client.CreateDelegationToken].
func (c *Client) CreateDelegationToken(ctx context.Context, d kadm.CreateDelegationToken) (kadm.DelegationToken, error) {
	return c.adm.CreateDelegationToken(fresh(ctx), d)
}

// CreatePartitions is [kadm.Client.CreatePartitions].
func (c *Client) CreatePartitions(ctx context.Context, add int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.adm.CreatePartitions(fresh(ctx), add, topics...)
}

// CreateTopic is [kadm.Client.CreateTopic].
func (c *Client) CreateTopic(ctx context.Context, partitions int32, replicationFactor int16, configs map[string]*string, topic string) (kadm.CreateTopicResponse, error) {
	return c.adm.CreateTopic(fresh(ctx), partitions, replicationFactor, configs, topic)
}

// CreateTopics is [kadm.Client.CreateTopics].
func (c *Client) CreateTopics(ctx context.Context, partitions int32, replicationFactor int16, configs map[string]*string, topics ...string) (kadm.CreateTopicResponses, error) {
	return c.adm.CreateTopics(fresh(ctx), partitions, replicationFactor, configs, topics...)
}

// DeleteACLs is [kadm.Client.DeleteACLs].
func (c *Client) DeleteACLs(ctx context.Context, b *kadm.ACLBuilder) (kadm.DeleteACLsResults, error) {
	return c.adm.DeleteACLs(fresh(ctx), b)
}

// DeleteGroup is [kadm.Client.DeleteGroup].
func (c *Client) DeleteGroup(ctx context.Context, group string) (kadm.DeleteGroupResponse, error) {
	return c.adm.DeleteGroup(fresh(ctx), group)
}

// DeleteGroups is [kadm.Client.DeleteGroups].
func (c *Client) DeleteGroups(ctx context.Context, groups ...string) (kadm.DeleteGroupResponses, error) {
	return c.adm.DeleteGroups(fresh(ctx), groups...)
}

// DeleteOffsets is [kadm.Client.DeleteOffsets].
func (c *Client) DeleteOffsets(ctx context.Context, group string, s kadm.TopicsSet) (kadm.DeleteOffsetsResponses, error) {
	return c.adm.DeleteOffsets(fresh(ctx), group, s)
}

// DeleteRecords is [kadm.Client.DeleteRecords].
func (c *Client) DeleteRecords(ctx context.Context, os kadm.Offsets) (kadm.DeleteRecordsResponses, error) {
	return c.adm.DeleteRecords(fresh(ctx), os)
}

// DeleteShareGroupOffsets is [kadm.Client.DeleteShareGroupOffsets].
func (c *Client) DeleteShareGroupOffsets(ctx context.Context, group string, topics ...string) (kadm.DeleteShareGroupOffsetsResponses, error) {
	return c.adm.DeleteShareGroupOffsets(fresh(ctx), group, topics...)
}

// DeleteTopic is [kadm.Client.DeleteTopic].
func (c *Client) DeleteTopic(ctx context.Context, topic string) (kadm.DeleteTopicResponse, error) {
	return c.adm.DeleteTopic(fresh(ctx), topic)
}

// DeleteTopics is [kadm.Client.DeleteTopics].
func (c *Client) DeleteTopics(ctx context.Context, topics ...string) (kadm.DeleteTopicResponses, error) {
	return c.adm.DeleteTopics(fresh(ctx), topics...)
}

// DescribeACLs is [kadm.Client.DescribeACLs].
func (c *Client) DescribeACLs(ctx context.Context, b *kadm.ACLBuilder) (kadm.DescribeACLsResults, error) {
	return c.adm.DescribeACLs(fresh(ctx), b)
}

// DescribeAllLogDirs is [kadm.Client.DescribeAllLogDirs].
func (c *Client) DescribeAllLogDirs(ctx context.Context, s kadm.TopicsSet) (kadm.DescribedAllLogDirs, error) {
	return c.adm.DescribeAllLogDirs(fresh(ctx), s)
}

// DescribeBrokerConfigs is [kadm.Client.DescribeBrokerConfigs].
func (c *Client) DescribeBrokerConfigs(ctx context.Context, brokers ...int32) (kadm.ResourceConfigs, error) {
	return c.adm.DescribeBrokerConfigs(fresh(ctx), brokers...)
}

// DescribeBrokerLogDirs is [kadm.Client.DescribeBrokerLogDirs].
func (c *Client) DescribeBrokerLogDirs(ctx context.Context, broker int32, s kadm.TopicsSet) (kadm.DescribedLogDirs, error) {
	return c.adm.DescribeBrokerLogDirs(fresh(ctx), broker, s)
}

// DescribeClientQuotas is [kadm.Client.DescribeClientQuotas].
func (c *Client) DescribeClientQuotas(ctx context.Context, strict bool, entityComponents []kadm.DescribeClientQuotaComponent) (kadm.DescribedClientQuotas, error) {
	return c.adm.DescribeClientQuotas(fresh(ctx), strict, entityComponents)
}

// DescribeConsumerGroups is [kadm.Client.DescribeConsumerGroups].
func (c *Client) DescribeConsumerGroups(ctx context.Context, groups ...string) (kadm.DescribedConsumerGroups, error) {
	return c.adm.DescribeConsumerGroups(fresh(ctx), groups...)
}

// DescribeDelegationTokens is [kadm.Client.DescribeDelegationTokens].
func (c *Client) DescribeDelegationTokens(ctx context.Context, owners ...kadm.Principal) (kadm.DelegationTokens, error) {
	return c.adm.DescribeDelegationTokens(fresh(ctx), owners...)
}

// DescribeGroups is [kadm.Client.DescribeGroups].
func (c *Client) DescribeGroups(ctx context.Context, groups ...string) (kadm.DescribedGroups, error) {
	return c.adm.DescribeGroups(fresh(ctx), groups...)
}

// DescribeProducers is [kadm.Client.DescribeProducers].
func (c *Client) DescribeProducers(ctx context.Context, s kadm.TopicsSet) (kadm.DescribedProducersTopics, error) {
	return c.adm.DescribeProducers(fresh(ctx), s)
}

// DescribeShareGroupOffsets is [kadm.Client.DescribeShareGroupOffsets].
func (c *Client) DescribeShareGroupOffsets(ctx context.Context, groups ...string) (kadm.DescribedShareGroupsOffsets, error) {
	return c.adm.DescribeShareGroupOffsets(fresh(ctx), groups...)
}

// DescribeShareGroups is [kadm.Client.DescribeShareGroups].
func (c *Client) DescribeShareGroups(ctx context.Context, groups ...string) (kadm.DescribedShareGroups, error) {
	return c.adm.DescribeShareGroups(fresh(ctx), groups...)
}

// DescribeTopicConfigs is [kadm.Client.DescribeTopicConfigs].
func (c *Client) DescribeTopicConfigs(ctx context.Context, topics ...string) (kadm.ResourceConfigs, error) {
	return c.adm.DescribeTopicConfigs(fresh(ctx), topics...)
}

// DescribeTransactions is [kadm.Client.DescribeTransactions].
func (c *Client) DescribeTransactions(ctx context.Context, txnIDs ...string) (kadm.DescribedTransactions, error) {
	return c.adm.DescribeTransactions(fresh(ctx), txnIDs...)
}

// DescribeUserSCRAMs is [kadm.Client.DescribeUserSCRAMs].
func (c *Client) DescribeUserSCRAMs(ctx context.Context, users ...string) (kadm.DescribedUserSCRAMs, error) {
	return c.adm.DescribeUserSCRAMs(fresh(ctx), users...)
}

// ElectLeaders is [kadm.Client.ElectLeaders].
func (c *Client) ElectLeaders(ctx context.Context, how kadm.ElectLeadersHow, s kadm.TopicsSet) (kadm.ElectLeadersResults, error) {
	return c.adm.ElectLeaders(fresh(ctx), how, s)
}

// ExpireDelegationToken is [kadm.Client.ExpireDelegationToken].
func (c *Client) ExpireDelegationToken(ctx context.Context, hmac []byte, expiry time.Duration) (expiryTimestamp time.Time, err error) {
	return c.adm.ExpireDelegationToken(fresh(ctx), hmac, expiry)
}

// FetchManyOffsets is [kadm.Client.FetchManyOffsets].
func (c *Client) FetchManyOffsets(ctx context.Context, groups ...string) kadm.FetchOffsetsResponses {
	return c.adm.FetchManyOffsets(fresh(ctx), groups...)
}

// FetchOffsets is [kadm.Client.FetchOffsets].
func (c *Client) FetchOffsets(ctx context.Context, group string) (kadm.OffsetResponses, error) {
	return c.adm.FetchOffsets(fresh(ctx), group)
}

// FetchOffsetsByID is [kadm.Client.FetchOffsetsByID].
func (c *Client) FetchOffsetsByID(ctx context.Context, group string) (kadm.OffsetResponsesByID, error) {
	return c.adm.FetchOffsetsByID(fresh(ctx), group)
}

// FetchOffsetsForTopics is [kadm.Client.FetchOffsetsForTopics].
func (c *Client) FetchOffsetsForTopics(ctx context.Context, group string, topics ...string) (kadm.OffsetResponses, error) {
	return c.adm.FetchOffsetsForTopics(fresh(ctx), group, topics...)
}

// FindGroupCoordinators is [kadm.Client.FindGroupCoordinators].
func (c *Client) FindGroupCoordinators(ctx context.Context, groups ...string) kadm.FindCoordinatorResponses {
	return c.adm.FindGroupCoordinators(fresh(ctx), groups...)
}

// FindShareCoordinators is [kadm.Client.FindShareCoordinators].
func (c *Client) FindShareCoordinators(ctx context.Context, shareGroups ...string) kadm.FindCoordinatorResponses {
	return c.adm.FindShareCoordinators(fresh(ctx), shareGroups...)
}

// FindTxnCoordinators is [kadm.Client.FindTxnCoordinators].
func (c *Client) FindTxnCoordinators(ctx context.Context, txnIDs ...string) kadm.FindCoordinatorResponses {
	return c.adm.FindTxnCoordinators(fresh(ctx), txnIDs...)
}

// Lag is [kadm.Client.Lag].
func (c *Client) Lag(ctx context.Context, groups ...string) (kadm.DescribedGroupLags, error) {
	return c.adm.Lag(fresh(ctx), groups...)
}

// LeaveGroup is [kadm.Client.LeaveGroup].
func (c *Client) LeaveGroup(ctx context.Context, b *kadm.LeaveGroupBuilder) (kadm.LeaveGroupResponses, error) {
	return c.adm.LeaveGroup(fresh(ctx), b)
}

// ListBrokers is [kadm.Client.ListBrokers].
func (c *Client) ListBrokers(ctx context.Context) (kadm.BrokerDetails, error) {
	return c.adm.ListBrokers(fresh(ctx))
}

// ListCommittedOffsets is [kadm.Client.ListCommittedOffsets].
func (c *Client) ListCommittedOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.adm.ListCommittedOffsets(fresh(ctx), topics...)
}

// ListConfigResources is [kadm.Client.ListConfigResources].
func (c *Client) ListConfigResources(ctx context.Context, resourceTypes ...kadm.ConfigResourceType) (kadm.ListedConfigResources, error) {
	return c.adm.ListConfigResources(fresh(ctx), resourceTypes...)
}

// ListEndOffsets is [kadm.Client.ListEndOffsets].
func (c *Client) ListEndOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.adm.ListEndOffsets(fresh(ctx), topics...)
}

// ListGroups is [kadm.Client.ListGroups].
func (c *Client) ListGroups(ctx context.Context, filterStates ...string) (kadm.ListedGroups, error) {
	return c.adm.ListGroups(fresh(ctx), filterStates...)
}

// ListGroupsByType is [kadm.Client.ListGroupsByType].
func (c *Client) ListGroupsByType(ctx context.Context, types []string, filterStates ...string) (kadm.ListedGroups, error) {
	return c.adm.ListGroupsByType(fresh(ctx), types, filterStates...)
}

// ListLatestRemoteOffsets is [kadm.Client.ListLatestRemoteOffsets].
func (c *Client) ListLatestRemoteOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.adm.ListLatestRemoteOffsets(fresh(ctx), topics...)
}

// ListLocalLogStartOffsets is [kadm.Client.ListLocalLogStartOffsets].
func (c *Client) ListLocalLogStartOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.adm.ListLocalLogStartOffsets(fresh(ctx), topics...)
}

// ListMaxTimestampOffsets is [kadm.Client.ListMaxTimestampOffsets].
func (c *Client) ListMaxTimestampOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.adm.ListMaxTimestampOffsets(fresh(ctx), topics...)
}

// ListOffsetsAfterMilli is [kadm.Client.ListOffsetsAfterMilli].
func (c *Client) ListOffsetsAfterMilli(ctx context.Context, millisecond int64, topics ...string) (kadm.ListedOffsets, error) {
	return c.adm.ListOffsetsAfterMilli(fresh(ctx), millisecond, topics...)
}

// ListPartitionReassignments is [kadm.Client.ListPartitionReassignments].
func (c *Client) ListPartitionReassignments(ctx context.Context, s kadm.TopicsSet) (kadm.ListPartitionReassignmentsResponses, error) {
	return c.adm.ListPartitionReassignments(fresh(ctx), s)
}

// ListStartOffsets is [kadm.Client.ListStartOffsets].
func (c *Client) ListStartOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error) {
	return c.adm.ListStartOffsets(fresh(ctx), topics...)
}

// ListTopics is [kadm.Client.ListTopics].
func (c *Client) ListTopics(ctx context.Context, topics ...string) (kadm.TopicDetails, error) {
	return c.adm.ListTopics(fresh(ctx), topics...)
}

// ListTopicsWithInternal is [kadm.Client.ListTopicsWithInternal].
func (c *Client) ListTopicsWithInternal(ctx context.Context, topics ...string) (kadm.TopicDetails, error) {
	return c.adm.ListTopicsWithInternal(fresh(ctx), topics...)
}

// ListTransactions is [kadm.Client.ListTransactions].
func (c *Client) ListTransactions(ctx context.Context, producerIDs []int64, filterStates []string) (kadm.ListedTransactions, error) {
	return c.adm.ListTransactions(fresh(ctx), producerIDs, filterStates)
}

// ListTransactionsByTxPattern is [kadm.Client.ListTransactionsByTxPattern].
func (c *Client) ListTransactionsByTxPattern(ctx context.Context, producerIDs []int64, filterStates []string, txIDPattern string) (kadm.ListedTransactions, error) {
	return c.adm.ListTransactionsByTxPattern(fresh(ctx), producerIDs, filterStates, txIDPattern)
}

// Metadata is [kadm.Client.Metadata].
func (c *Client) Metadata(ctx context.Context, topics ...string) (kadm.Metadata, error) {
	return c.adm.Metadata(fresh(ctx), topics...)
}

// OffetForLeaderEpoch is [kadm.Client.OffetForLeaderEpoch].
//
// Deprecated: kadm deprecates it too.
func (c *Client) OffetForLeaderEpoch(ctx context.Context, r kadm.OffsetForLeaderEpochRequest) (kadm.OffsetsForLeaderEpochs, error) {
	return c.adm.OffetForLeaderEpoch(fresh(ctx), r)
}

// OffsetForLeaderEpoch is [kadm.Client.OffsetForLeaderEpoch].
func (c *Client) OffsetForLeaderEpoch(ctx context.Context, r kadm.OffsetForLeaderEpochRequest) (kadm.OffsetsForLeaderEpochs, error) {
	return c.adm.OffsetForLeaderEpoch(fresh(ctx), r)
}

// RenewDelegationToken is [kadm.Client.RenewDelegationToken].
func (c *Client) RenewDelegationToken(ctx context.Context, hmac []byte, renewTime time.Duration) (expiryTimestamp time.Time, err error) {
	return c.adm.RenewDelegationToken(fresh(ctx), hmac, renewTime)
}

// UpdateFeatures is [kadm.Client.UpdateFeatures].
func (c *Client) UpdateFeatures(ctx context.Context, validateOnly bool, updates ...kadm.FeatureUpdate) (kadm.UpdatedFeatures, error) {
	return c.adm.UpdateFeatures(fresh(ctx), validateOnly, updates...)
}

// UpdatePartitions is [kadm.Client.UpdatePartitions].
func (c *Client) UpdatePartitions(ctx context.Context, set int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.adm.UpdatePartitions(fresh(ctx), set, topics...)
}

// ValidateAlterBrokerConfigs is [kadm.Client.ValidateAlterBrokerConfigs].
func (c *Client) ValidateAlterBrokerConfigs(ctx context.Context, configs []kadm.AlterConfig, brokers ...int32) (kadm.AlterConfigsResponses, error) {
	return c.adm.ValidateAlterBrokerConfigs(fresh(ctx), configs, brokers...)
}

// ValidateAlterBrokerConfigsState is [kadm.Client.ValidateAlterBrokerConfigsState].
func (c *Client) ValidateAlterBrokerConfigsState(ctx context.Context, configs []kadm.AlterConfig, brokers ...int32) (kadm.AlterConfigsResponses, error) {
	return c.adm.ValidateAlterBrokerConfigsState(fresh(ctx), configs, brokers...)
}

// ValidateAlterClientQuotas is [kadm.Client.ValidateAlterClientQuotas].
func (c *Client) ValidateAlterClientQuotas(ctx context.Context, entries []kadm.AlterClientQuotaEntry) (kadm.AlteredClientQuotas, error) {
	return c.adm.ValidateAlterClientQuotas(fresh(ctx), entries)
}

// ValidateAlterTopicConfigs is [kadm.Client.ValidateAlterTopicConfigs].
func (c *Client) ValidateAlterTopicConfigs(ctx context.Context, configs []kadm.AlterConfig, topics ...string) (kadm.AlterConfigsResponses, error) {
	return c.adm.ValidateAlterTopicConfigs(fresh(ctx), configs, topics...)
}

// ValidateAlterTopicConfigsState is [kadm.Client.ValidateAlterTopicConfigsState].
func (c *Client) ValidateAlterTopicConfigsState(ctx context.Context, configs []kadm.AlterConfig, topics ...string) (kadm.AlterConfigsResponses, error) {
	return c.adm.ValidateAlterTopicConfigsState(fresh(ctx), configs, topics...)
}

// ValidateCreatePartitions is [kadm.Client.ValidateCreatePartitions].
func (c *Client) ValidateCreatePartitions(ctx context.Context, add int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.adm.ValidateCreatePartitions(fresh(ctx), add, topics...)
}

// ValidateCreateTopics is [kadm.Client.ValidateCreateTopics].
func (c *Client) ValidateCreateTopics(ctx context.Context, partitions int32, replicationFactor int16, configs map[string]*string, topics ...string) (kadm.CreateTopicResponses, error) {
	return c.adm.ValidateCreateTopics(fresh(ctx), partitions, replicationFactor, configs, topics...)
}

// ValidateUpdatePartitions is [kadm.Client.ValidateUpdatePartitions].
func (c *Client) ValidateUpdatePartitions(ctx context.Context, set int, topics ...string) (kadm.CreatePartitionsResponses, error) {
	return c.adm.ValidateUpdatePartitions(fresh(ctx), set, topics...)
}

// WriteTxnMarkers is [kadm.Client.WriteTxnMarkers].
func (c *Client) WriteTxnMarkers(ctx context.Context, markers ...kadm.TxnMarkers) (kadm.TxnMarkersResponses, error) {
	return c.adm.WriteTxnMarkers(fresh(ctx), markers...)
}
