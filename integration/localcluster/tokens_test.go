package localcluster

import (
	"testing"
	"time"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every flexible response header carries {cluster id, applied offset}; a
// mutation's carries its commit offset, which is the log end.
func TestResponseHeadersCarryTokens(t *testing.T) {
	c := newCluster(t, Brokers(1), ClusterID("tokens"))
	end := c.LogEnd()
	require.Equal(t, int64(0), end, "a new cluster's log holds only the cluster id record")

	r := dialRaw(t, c.Addrs()[0])
	_, st := r.do(metadataReq(), nil)
	require.NotNil(t, st, "Metadata v12 has a flexible response header")
	require.Equal(t, "tokens", string(st.ClusterID))
	require.Equal(t, int64(0), st.Token)

	resp, st := r.do(createTopicsReq(3, map[string]string{"retention.ms": "1234"}, "t1"), nil)
	require.Equal(t, int16(0), resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	require.NotNil(t, st)
	// cluster id record, TopicRecord, 3 PartitionRecords, 1 ConfigRecord
	require.Equal(t, int64(5), st.Token, "the header carries the commit offset")
	require.Equal(t, int64(5), c.LogEnd())

	log := c.MetadataLog()
	want := []int16{ClusterIDRecordKey, TopicRecordKey, PartitionRecordKey, PartitionRecordKey, PartitionRecordKey, ConfigRecordKey}
	require.Len(t, log, len(want))
	for i, rec := range log {
		require.Equal(t, int64(i), rec.Offset)
		require.Equal(t, want[i], rec.Value.APIKey(), "record %d", i)
		dec, err := DecodeRecord(rec.Encoded)
		require.NoError(t, err)
		require.Equal(t, rec.Value, dec)
	}
	require.Equal(t, "t1", log[1].Value.(*TopicRecord).Name)
	require.Equal(t, "1234", *log[5].Value.(*ConfigRecord).Value)
	require.Equal(t, int64(5), log[1].BatchEnd)

	// Once applied, plain responses carry the new offset.
	require.NoError(t, c.WaitApplied(testkit.Ctx(t), 0, 5))
	_, st = r.do(metadataReq("t1"), nil)
	require.Equal(t, int64(5), st.Token)

	// ApiVersions keeps its v0 response header: no tag.
	av := kmsg.NewPtrApiVersionsRequest()
	av.SetVersion(3)
	av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
	_, st = r.do(av, nil)
	require.Nil(t, st)
}

// Each mutation API commits its records and answers with the commit offset.
func TestMutationsCommitRecords(t *testing.T) {
	c := newCluster(t, Brokers(1))
	r := dialRaw(t, c.Addrs()[0])
	r.do(createTopicsReq(2, nil, "m"), nil)

	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cpt := kmsg.NewCreatePartitionsRequestTopic()
	cpt.Topic, cpt.Count = "m", 4
	cp.Topics = append(cp.Topics, cpt)

	ac := kmsg.NewPtrAlterConfigsRequest()
	ac.SetVersion(2)
	acr := kmsg.NewAlterConfigsRequestResource()
	acr.ResourceType, acr.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
	acc := kmsg.NewAlterConfigsRequestResourceConfig()
	acc.Name, acc.Value = "cleanup.policy", kmsg.StringPtr("compact")
	acr.Configs = append(acr.Configs, acc)
	ac.Resources = append(ac.Resources, acr)

	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.SetVersion(1)
	iacr := kmsg.NewIncrementalAlterConfigsRequestResource()
	iacr.ResourceType, iacr.ResourceName = kmsg.ConfigResourceTypeTopic, "m"
	for _, kv := range [][2]string{{"retention.ms", "99"}, {"cleanup.policy", ""}} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name = kv[0]
		if kv[1] == "" {
			cfg.Op = kmsg.IncrementalAlterConfigOpDelete
		} else {
			cfg.Value = kmsg.StringPtr(kv[1])
		}
		iacr.Configs = append(iacr.Configs, cfg)
	}
	iac.Resources = append(iac.Resources, iacr)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("m")
	dt.Topics = append(dt.Topics, dtt)

	for _, tc := range []struct {
		name string
		req  kmsg.Request
		want []string // records of the commit
	}{
		{"CreatePartitions", cp, []string{"PartitionRecord(v1) topic-id", "PartitionRecord(v1) topic-id"}},
		{"AlterConfigs", ac, []string{`ConfigRecord(v1) resource-type=2 resource="m" cleanup.policy="compact"`}},
		{"IncrementalAlterConfigs", iac, []string{`retention.ms="99"`, `cleanup.policy=<removed>`}},
		{"DeleteTopics", dt, []string{"RemoveTopicRecord(v1)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.LogEnd()
			_, st := r.do(tc.req, nil)
			require.NotNil(t, st)
			require.Equal(t, before+int64(len(tc.want)), st.Token, "header carries the commit offset")
			require.Equal(t, st.Token, c.LogEnd())
			got := c.MetadataLog()[before+1:]
			require.Len(t, got, len(tc.want))
			for i, w := range tc.want {
				require.Contains(t, Describe(got[i].Value), w)
			}
		})
	}

	// A failed mutation commits nothing and carries the applied offset.
	resp, _ := r.do(createTopicsReq(1, nil, "t"), nil)
	require.Equal(t, int16(0), resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	before := c.LogEnd()
	resp, st := r.do(createTopicsReq(1, nil, "t"), nil)
	require.NotEqual(t, int16(0), resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, before, c.LogEnd())
	applied, err := c.AppliedOffset(0)
	require.NoError(t, err)
	require.Equal(t, applied, st.Token)
}

// A request whose token is above the broker's applied offset waits until
// the broker applies it, then succeeds.
func TestTokenAboveAppliedWaits(t *testing.T) {
	c := newCluster(t, Brokers(2))
	require.NoError(t, c.PauseApply(0))
	ctrl := dialRaw(t, c.Addrs()[1]) // kfake's controller is the last broker
	_, st := ctrl.do(createTopicsReq(1, nil, "w"), nil)
	commit := st.Token

	r1 := dialRaw(t, c.Addrs()[0])
	req := metadataReq("w")
	corr := r1.send(req, &headerState{token: commit})
	eventually(t, "the request to wait", func() bool { return c.Stats().Waits == 1 })
	applied, _ := c.AppliedOffset(0)
	require.Less(t, applied, commit, "still paused, still waiting")

	type result struct {
		resp kmsg.Response
		tok  int64
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, st, err := r1.recv(req, corr)
		res := result{resp: resp, err: err}
		if st != nil {
			res.tok = st.Token
		}
		got <- res
	}()
	select {
	case res := <-got:
		t.Fatalf("answered while the broker was paused: %+v", res)
	default:
	}
	require.NoError(t, c.ResumeApply(0))
	res := <-got
	require.NoError(t, res.err)
	require.GreaterOrEqual(t, res.tok, commit)
	require.Equal(t, map[string]int{"w": 1}, topicNames(res.resp.(*kmsg.MetadataResponse)))
	require.Zero(t, c.Stats().Inconsistent)
}

// In error mode (and when the wait runs out) a request whose token is above
// applied is answered INCONSISTENT_METADATA, with the applied offset in the
// header.
func TestTokenAboveAppliedInconsistent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Opt
		code int16
	}{
		{"error mode", []Opt{ErrorMode(true)}, 1243},
		{"error mode custom code", []Opt{ErrorMode(true), InconsistentMetadataCode(1500)}, 1500},
		{"wait runs out", []Opt{WaitMax(30 * time.Millisecond)}, 1243},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, append(tc.opts, Brokers(2))...)
			require.NoError(t, c.PauseApply(0))
			ctrl := dialRaw(t, c.Addrs()[1])
			_, st := ctrl.do(createTopicsReq(1, nil, "e"), nil)
			commit := st.Token
			applied, _ := c.AppliedOffset(0)

			r1 := dialRaw(t, c.Addrs()[0])
			resp, st := r1.do(metadataReq("e"), &headerState{token: commit})
			topics := resp.(*kmsg.MetadataResponse).Topics
			require.Len(t, topics, 1)
			require.Equal(t, tc.code, topics[0].ErrorCode)
			require.Equal(t, applied, st.Token, "header carries the applied offset, below the request's")
			require.Less(t, st.Token, commit)

			produce := kmsg.NewPtrProduceRequest()
			produce.SetVersion(9)
			produce.Acks = -1
			pt := kmsg.NewProduceRequestTopic()
			pt.Topic = "e"
			pp := kmsg.NewProduceRequestTopicPartition()
			pt.Partitions = append(pt.Partitions, pp)
			produce.Topics = append(produce.Topics, pt)
			presp, _ := r1.do(produce, &headerState{token: commit})
			require.Equal(t, tc.code, presp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
			require.Equal(t, int64(2), c.Stats().Inconsistent)

			// Caught up, the same request is served.
			require.NoError(t, c.ResumeApply(0))
			require.NoError(t, c.WaitApplied(testkit.Ctx(t), 0, commit))
			resp, _ = r1.do(metadataReq("e"), &headerState{token: commit})
			require.Equal(t, int16(0), resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode)
		})
	}
}

// A request naming another cluster is never processed: the connection is
// closed and the event counted.
func TestClusterIDMismatchClosesConnection(t *testing.T) {
	c := newCluster(t, Brokers(1), ClusterID("mine"))
	for i, tc := range []struct {
		name      string
		clusterID *string
		closed    bool
	}{
		{"other cluster", kmsg.StringPtr("theirs"), true},
		{"same cluster", kmsg.StringPtr("mine"), false},
		{"no cluster id", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.LogEnd()
			r := dialRaw(t, c.Addrs()[0])
			if tc.closed {
				r.send(createTopicsReq(1, nil, "never"), &headerState{clusterID: tc.clusterID, token: 0})
				r.expectClosed()
				require.Equal(t, int64(1), c.Stats().ClusterIDMismatches)
				require.Equal(t, before, c.LogEnd(), "the mutation was not processed")
				return
			}
			resp, _ := r.do(metadataReq(), &headerState{clusterID: tc.clusterID, token: 0})
			require.NotNil(t, resp, "case %d", i)
		})
	}
	require.Equal(t, int64(1), c.Stats().ClusterIDMismatches)
	_ = kerr.UnknownTopicOrPartition
}

// TestAnswerAheadOfImageIsRetriable: kfake drops a topic as soon as it
// handles DeleteTopics, so a broker that has not applied the delete gets a
// "no such topic" answer from kfake for a topic its image still has. Handed
// on under the broker's token, that answer would run ahead of the token (a
// client could see the topic gone, then present again); the broker answers
// LEADER_NOT_AVAILABLE instead, which clients retry.
func TestAnswerAheadOfImageIsRetriable(t *testing.T) {
	c := newCluster(t, Brokers(1), WaitMax(100*time.Millisecond))
	r := dialRaw(t, c.Addrs()[0])
	_, st := r.do(createTopicsReq(1, nil, "doomed"), nil)
	require.NoError(t, c.WaitApplied(testkit.Ctx(t), 0, st.Token))
	require.NoError(t, c.PauseApply(0))
	defer c.ResumeApply(0)

	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(6)
	dtt := kmsg.NewDeleteTopicsRequestTopic()
	dtt.Topic = kmsg.StringPtr("doomed")
	dt.Topics = append(dt.Topics, dtt)
	dresp, st := r.do(dt, nil)
	deleted := c.LogEnd()
	applied, err := c.AppliedOffset(0)
	require.NoError(t, err)
	require.Less(t, applied, deleted, "the broker has not applied the delete")
	require.Equal(t, kerr.RequestTimedOut.Code, dresp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode,
		"committed, but not applied by the answering broker within the bound")
	require.Equal(t, applied, st.Token, "the timeout answer carries the broker's own offset")

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(9)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "doomed"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	resp, st := r.do(lo, nil)
	require.Equal(t, kerr.LeaderNotAvailable.Code, resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode,
		"not gone: the broker's image still has the topic")
	require.Equal(t, applied, st.Token, "the token is the broker's, which does not know the delete")
}
