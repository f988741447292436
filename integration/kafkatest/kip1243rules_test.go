package kafkatest_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// This file holds the raw-wire checks of KIP1243.md's rules that
// TestKIP1243ThreeNodes (hold mode, 8 s bound) and TestKIP1243ErrorMode
// run: requests built by hand, tag 0 written by hand, no SDK code.

// oneRecordBatch encodes a v2 record batch holding one record.
func oneRecordBatch(value []byte) []byte {
	rec := kmsg.Record{Value: value}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // the length varint of 0 is one byte
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: 1, Records: rec.AppendTo(nil)}
	b := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// produceReq is a flexible Produce v9 of one record to topic's partition 0.
func produceReq(topic string, acks int16, timeout int32, value string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 9, acks, timeout
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = oneRecordBatch([]byte(value))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// apiVersionsReq is an ApiVersions request at version (v3+: header v2,
// which carries tag 0).
func apiVersionsReq(version int16) *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kip1243-raw", "1"
	return req
}

// requireClosed checks that err is the connection being closed by the
// broker, not a read that timed out.
func requireClosed(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, "%s: answered instead of closing the connection", what)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "%s: connection left hanging, not closed: %v", what, err)
}

// leaderOf waits until topic's partition 0 has a leader and returns it.
func leaderOf(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int32 {
	t.Helper()
	var leader int32 = -1
	waitFor(t, 30*time.Second, func() bool {
		m, err := adm.Metadata(ctx, topic)
		require.NoError(t, err)
		if p, ok := m.Topics[topic].Partitions[0]; ok && p.Err == nil && p.Leader >= 0 {
			leader = p.Leader
			return true
		}
		return false
	})
	return leader
}

// testNothingServedStale: a request the broker is behind on whose answer
// has no place for an error (all-topics Metadata v12, acks=0 Produce) is
// held for the bound, then its connection is closed; it is never served
// from older metadata nor executed. The old agent served both after its
// stale bound (and wrote the acks=0 record).
func testNothingServedStale(t *testing.T, ctx context.Context, c *kafkatest.Cluster, adm *kadm.Client, bound time.Duration) {
	const topic = "kip1243-nostale"
	cid := c.ClusterID()
	created, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
	leader := leaderOf(t, ctx, adm, topic)
	addr, err := c.ListenerAddr(leader)
	require.NoError(t, err)
	probe, err := dialRaw(addr)
	require.NoError(t, err)
	defer probe.Close()
	_, st, err := probe.roundTrip(metadataReq(), nil, 10*time.Second)
	require.NoError(t, err)
	far := st.token + 1_000_000_000

	all, err := dialRaw(addr)
	require.NoError(t, err)
	defer all.Close()
	start := time.Now()
	_, _, err = all.roundTrip(metadataReq(), appendState(nil, &cid, far), bound+20*time.Second)
	took := time.Since(start)
	requireClosed(t, err, "all-topics Metadata")
	require.GreaterOrEqual(t, took, bound-200*time.Millisecond, "held for the bound first")
	t.Logf("all-topics Metadata v12 far ahead: connection closed after %v", took.Round(time.Millisecond))

	zero, err := dialRaw(addr)
	require.NoError(t, err)
	defer zero.Close()
	start = time.Now()
	_, err = zero.send(produceReq(topic, 0, 30000, "acks0-far-ahead"), tagSection(appendState(nil, &cid, far)))
	require.NoError(t, err)
	_, err = zero.recv(nil, time.Now().Add(bound+20*time.Second))
	took = time.Since(start)
	requireClosed(t, err, "acks=0 Produce")
	require.GreaterOrEqual(t, took, bound-200*time.Millisecond, "held for the bound first")
	count, err := c.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Zero(t, count, "the acks=0 Produce was not written")
	t.Logf("acks=0 Produce far ahead: connection closed after %v, 0 records written", took.Round(time.Millisecond))
	agentLogged(t, c, leader, "closed the connection of METADATA", "no place for an error")
	agentLogged(t, c, leader, "closed the connection of PRODUCE", "acks=0")
}

// testOwnTimeout: a request that carries its own timeout is held no longer
// than that (a Produce with 1 s, a CreateTopics with 2 s), then answered
// INCONSISTENT_METADATA, and not executed. The old agent held both for
// its fixed bound.
func testOwnTimeout(t *testing.T, ctx context.Context, c *kafkatest.Cluster, adm *kadm.Client, bound time.Duration) {
	const topic, newTopic = "kip1243-owntimeout", "kip1243-owntimeout-create"
	cid := c.ClusterID()
	created, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
	leader := leaderOf(t, ctx, adm, topic)
	addr, err := c.ListenerAddr(leader)
	require.NoError(t, err)
	rc, err := dialRaw(addr)
	require.NoError(t, err)
	defer rc.Close()
	_, st, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
	require.NoError(t, err)
	far := st.token + 1_000_000_000

	for _, tc := range []struct {
		name string
		req  kmsg.Request
		own  time.Duration
		code func(kmsg.Response) int16
	}{
		{"Produce", produceReq(topic, -1, 1000, "own-timeout"), time.Second,
			func(r kmsg.Response) int16 { return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode }},
		{"CreateTopics", func() kmsg.Request {
			r := createTopicsReq(newTopic, 1, 3)
			r.TimeoutMillis = 2000
			return r
		}(), 2 * time.Second,
			func(r kmsg.Response) int16 { return r.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode }},
	} {
		start := time.Now()
		resp, got, err := rc.roundTrip(tc.req, appendState(nil, &cid, far), bound+20*time.Second)
		took := time.Since(start)
		require.NoError(t, err, tc.name)
		require.Equal(t, kafkatest.DefaultInconsistentMetadataCode, tc.code(resp), "%s: INCONSISTENT_METADATA", tc.name)
		require.NotNil(t, got)
		require.GreaterOrEqual(t, took, tc.own-200*time.Millisecond, "%s: held for its own timeout", tc.name)
		require.Less(t, took, tc.own+(bound-tc.own)/2, "%s: bound by its own timeout %v, not the agent's %v", tc.name, tc.own, bound)
		t.Logf("%s with timeout %v, token far ahead: INCONSISTENT_METADATA after %v (agent bound %v)", tc.name, tc.own, took.Round(time.Millisecond), bound)
	}
	count, err := c.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Zero(t, count, "the refused Produce was not written")
	m, _, err := rc.roundTrip(metadataReq(newTopic), nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, topicCode(m, newTopic), "the refused CreateTopics created nothing")
}

// testApiVersionsHeld: ApiVersions v4 (header v2) carrying a token a few
// offsets ahead is parked like any request, then answered once the
// broker caught up; the old agent did not read ApiVersions' tag 0.
func testApiVersionsHeld(t *testing.T, c *kafkatest.Cluster, bound time.Duration) {
	cid := c.ClusterID()
	addr, err := c.ListenerAddr(2)
	require.NoError(t, err)
	rc, err := dialRaw(addr)
	require.NoError(t, err)
	defer rc.Close()
	_, st, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
	require.NoError(t, err)
	before := parkedLines(t, c, 2)
	resp, _, err := rc.roundTrip(apiVersionsReq(4), appendState(nil, &cid, st.token+3), 2*bound)
	require.NoError(t, err)
	av := resp.(*kmsg.ApiVersionsResponse)
	require.Zero(t, av.ErrorCode, "answered once caught up: %v", kerr.ErrorForCode(av.ErrorCode))
	require.NotEmpty(t, av.ApiKeys)
	logs, err := c.AgentLog(2)
	require.NoError(t, err)
	require.Equal(t, 1, countLines(logs, "parked ")-before, "it was parked")
	require.True(t, containsLine(logs, "parked API_VERSIONS v4", ""), "the agent parked the ApiVersions: %v", logs)
}

// testTokensNeverDecrease: on one broker, every answer's token is at least
// the one before, over CreateTopics, IncrementalAlterConfigs and
// DeleteTopics (forwarded writes) interleaved with reads, and each write's
// answer covers the write, whose effect the same broker already shows; the
// old agent stamped a forwarded write's answer with the controller's
// offset, so the broker's next answer often had a lower token.
func testTokensNeverDecrease(t *testing.T, c *kafkatest.Cluster, broker int32, leaderDir string) {
	addr, err := c.ListenerAddr(broker)
	require.NoError(t, err)
	rc, err := dialRaw(addr)
	require.NoError(t, err)
	defer rc.Close()
	last, drops := int64(-1), 0
	see := func(what string, st *stamp) {
		require.NotNil(t, st, "%s: tag 0", what)
		if st.token < last {
			drops++
			t.Errorf("%s: token %d after %d on broker %d", what, st.token, last, broker)
		}
		last = max(last, st.token)
	}
	const trials = 10
	for i := range trials {
		topic := "kip1243-mono-" + string(rune('a'+i))
		resp, st, err := rc.roundTrip(createTopicsReq(topic, 1, 3), nil, 40*time.Second)
		require.NoError(t, err)
		require.NoError(t, kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode))
		see("CreateTopics", st)
		off, err := metadataWriteOffset(leaderDir, topic)
		require.NoError(t, err)
		require.GreaterOrEqual(t, st.token, off, "the answer covers the write")
		m, st, err := rc.roundTrip(metadataReq(topic), nil, 10*time.Second)
		require.NoError(t, err)
		require.Zero(t, topicCode(m, topic), "the broker that answered the create knows the topic")
		see("Metadata after CreateTopics", st)
		// IncrementalAlterConfigs: forwarded too, but answered through
		// KafkaApis' own merge of the forwarded part.
		want := fmt.Sprint(3_600_000 + i)
		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		alter.Version = 1
		ar := kmsg.NewIncrementalAlterConfigsRequestResource()
		ar.ResourceType, ar.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		ac := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ac.Name, ac.Value = "retention.ms", kmsg.StringPtr(want)
		ar.Configs = append(ar.Configs, ac)
		alter.Resources = append(alter.Resources, ar)
		aresp, st, err := rc.roundTrip(alter, nil, 40*time.Second)
		require.NoError(t, err)
		require.NoError(t, kerr.ErrorForCode(aresp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode))
		see("IncrementalAlterConfigs", st)
		off, err = metadataRecordOffset(leaderDir, 4, want) // ConfigRecord
		require.NoError(t, err)
		require.GreaterOrEqual(t, st.token, off, "the IncrementalAlterConfigs answer covers the write")
		desc := kmsg.NewPtrDescribeConfigsRequest()
		desc.Version = 4
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeTopic, topic, []string{"retention.ms"}
		desc.Resources = append(desc.Resources, dr)
		dresp0, st, err := rc.roundTrip(desc, nil, 10*time.Second)
		require.NoError(t, err)
		got := ""
		for _, cfg := range dresp0.(*kmsg.DescribeConfigsResponse).Resources[0].Configs {
			if cfg.Value != nil {
				got = *cfg.Value
			}
		}
		require.Equal(t, want, got, "the broker that answered the alter knows it")
		see("DescribeConfigs after IncrementalAlterConfigs", st)
		del := kmsg.NewPtrDeleteTopicsRequest()
		del.Version, del.TimeoutMillis = 6, 30000
		dt := kmsg.NewDeleteTopicsRequestTopic()
		dt.Topic = kmsg.StringPtr(topic)
		del.Topics = append(del.Topics, dt)
		dresp, st, err := rc.roundTrip(del, nil, 40*time.Second)
		require.NoError(t, err)
		require.NoError(t, kerr.ErrorForCode(dresp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode))
		see("DeleteTopics", st)
		m, st, err = rc.roundTrip(metadataReq(topic), nil, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, topicCode(m, topic), "the broker that answered the delete knows it")
		see("Metadata after DeleteTopics", st)
	}
	logs, err := c.AgentLog(broker)
	require.NoError(t, err)
	t.Logf("broker %d: %d creates, alters and deletes, 0 lower tokens (last %d); answers it held until it had applied the write: %d (it logs the first 20)",
		broker, trials, last, countLines(logs, "held the answer to "))
	require.Zero(t, drops)
}
