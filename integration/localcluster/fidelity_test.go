package localcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/internal/testkit"
)

// The rules of KIP-1243's server side, checked over raw wire: headers are
// built by hand (helpers_test.go), not by the SDK.

// behindCluster returns a 2-broker cluster whose node 0 is paused behind a
// topic "b" created through node 1 (kfake's controller), the commit offset,
// and node 0's applied offset.
func behindCluster(t *testing.T, opts ...Opt) (*Cluster, int64, int64) {
	t.Helper()
	c := newCluster(t, append([]Opt{Brokers(2)}, opts...)...)
	require.NoError(t, c.PauseApply(0))
	t.Cleanup(func() { _ = c.ResumeApply(0) })
	_, st := dialRaw(t, c.Addrs()[1]).do(createTopicsReq(1, nil, "b"), nil)
	applied, err := c.AppliedOffset(0)
	require.NoError(t, err)
	require.Less(t, applied, st.Token)
	return c, st.Token, applied
}

func produceReq(topic string, acks int16, timeoutMillis int32) *kmsg.ProduceRequest {
	p := kmsg.NewPtrProduceRequest()
	p.SetVersion(9)
	p.Acks, p.TimeoutMillis = acks, timeoutMillis
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pt.Partitions = append(pt.Partitions, pp)
	p.Topics = append(p.Topics, pt)
	return p
}

// A request is held no longer than its own timeout when it has one: a
// Produce with a 100 ms timeout to a broker that would wait an hour is
// answered INCONSISTENT_METADATA (the test's context bounds the wait).
func TestHoldBoundIsRequestTimeout(t *testing.T) {
	c, commit, _ := behindCluster(t, WaitMax(time.Hour))
	r := dialRaw(t, c.Addrs()[0])
	resp, st := r.do(produceReq("b", -1, 100), &headerState{token: commit})
	require.Equal(t, int16(1243), resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	require.NotNil(t, st)
	require.Equal(t, int64(1), c.Stats().Waits, "held first, then answered")
	require.Equal(t, int64(1), c.Stats().Inconsistent)
}

// A request whose answer has no place for the error (an all-topics
// Metadata before v13) or that gets no answer (acks=0 Produce) is never
// served from older metadata nor executed: once the wait runs out (or at
// once in ErrorMode) its connection is closed.
func TestBehindWithoutErrorFieldCloses(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Opt
	}{
		{"wait runs out", []Opt{WaitMax(50 * time.Millisecond)}},
		{"error mode", []Opt{ErrorMode(true), WaitMax(time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, commit, _ := behindCluster(t, tc.opts...)

			// An answer queued before is written first.
			r := dialRaw(t, c.Addrs()[0])
			first := metadataReq("b")
			corr := r.send(first, nil)
			r.send(metadataReq(), &headerState{token: commit})
			_, _, err := r.recv(first, corr)
			require.NoError(t, err, "the answer before the close is written")
			r.expectClosed()
			stale := c.Stats().StaleAnswers // the unstamped request's, served as it asked

			r = dialRaw(t, c.Addrs()[0])
			r.send(produceReq("b", 0, 5000), &headerState{token: commit})
			r.expectClosed()
			require.Equal(t, int64(2), c.Stats().ClosedBehind)
			require.Equal(t, stale, c.Stats().StaleAnswers, "nothing answered or written from older metadata")

			// Once caught up, the acks=0 record was never written.
			require.NoError(t, c.ResumeApply(0))
			require.NoError(t, c.WaitApplied(testkit.Ctx(t), 0, commit))
			ends, err := kadm.NewClient(newClient(t, c.Addrs())).ListEndOffsets(testkit.Ctx(t), "b")
			require.NoError(t, err)
			p, ok := ends.Lookup("b", 0)
			require.True(t, ok)
			require.NoError(t, p.Err)
			require.Equal(t, int64(0), p.Offset, "the acks=0 produce was not executed")
		})
	}
}

// Metadata v13 has a top-level error code (KIP-1102): an all-topics request
// the broker is behind on is answered INCONSISTENT_METADATA there.
func TestBehindAllTopicsMetadataV13(t *testing.T) {
	c, commit, _ := behindCluster(t, ErrorMode(true))
	req := metadataReq()
	req.SetVersion(13)
	resp, _ := dialRaw(t, c.Addrs()[0]).do(req, &headerState{token: commit})
	m := resp.(*kmsg.MetadataResponse)
	require.Equal(t, int16(1243), m.ErrorCode)
	require.Empty(t, m.Topics, "nothing served from older metadata")
}

// BehindClose: a broker that never answers INCONSISTENT_METADATA closes the
// connection instead, error field or not.
func TestBehindCloseVariant(t *testing.T) {
	c, commit, _ := behindCluster(t, ErrorMode(true), BehindAnswer(BehindClose))
	for _, req := range []kmsg.Request{metadataReq("b"), produceReq("b", -1, 5000)} {
		r := dialRaw(t, c.Addrs()[0])
		r.send(req, &headerState{token: commit})
		r.expectClosed()
	}
	require.Equal(t, int64(2), c.Stats().ClosedBehind)
	require.Zero(t, c.Stats().Inconsistent)
}

// The header token of an INCONSISTENT_METADATA answer, per variant.
func TestInconsistentTokenVariants(t *testing.T) {
	for _, tc := range []struct {
		tok  InconsistentToken
		want func(commit, applied, end int64) int64
	}{
		{TokenApplied, func(_, applied, _ int64) int64 { return applied }},
		{TokenJudged, func(_, applied, _ int64) int64 { return applied }},
		{TokenFetched, func(_, _, end int64) int64 { return end }},
	} {
		t.Run(tc.tok.String(), func(t *testing.T) {
			c, commit, applied := behindCluster(t, ErrorMode(true), InconsistentTokenIs(tc.tok))
			resp, st := dialRaw(t, c.Addrs()[0]).do(metadataReq("b"), &headerState{token: commit})
			require.Equal(t, int16(1243), resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode)
			require.Equal(t, tc.want(commit, applied, c.LogEnd()), st.Token)
			if tc.tok == TokenFetched {
				require.GreaterOrEqual(t, st.Token, commit, "at or above the request's token")
			}
		})
	}
}

// TokenJudged against TokenApplied: a broker that catches up between
// judging a request and writing its answer (held behind an earlier answer
// on the connection) answers with the offset it judged at, or with the
// one it has when writing.
func TestInconsistentTokenJudgedVersusApplied(t *testing.T) {
	for _, tok := range []InconsistentToken{TokenApplied, TokenJudged} {
		t.Run(tok.String(), func(t *testing.T) {
			c, commit, applied := behindCluster(t, ErrorMode(true), InconsistentTokenIs(tok))
			r := dialRaw(t, c.Addrs()[0])
			// A Fetch that long-polls holds the answers after it: for
			// longer than the steps below take on a loaded machine (300 ms
			// was not always).
			f := kmsg.NewPtrFetchRequest()
			f.SetVersion(12)
			f.MaxWaitMillis, f.MinBytes, f.MaxBytes = 3000, 1, 1<<20
			f.SessionEpoch = -1
			fcorr := r.send(f, nil)
			mreq := metadataReq("b")
			mcorr := r.send(mreq, &headerState{token: commit})
			eventually(t, "the broker to judge the request", func() bool { return c.Stats().Inconsistent == 1 })
			require.NoError(t, c.ResumeApply(0)) // judged already: answered at once, not yet written
			require.NoError(t, c.WaitApplied(testkit.Ctx(t), 0, commit))
			_, _, err := r.recv(f, fcorr)
			require.NoError(t, err)
			resp, st, err := r.recv(mreq, mcorr)
			require.NoError(t, err)
			require.Equal(t, int16(1243), resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode)
			if tok == TokenJudged {
				require.Equal(t, applied, st.Token)
			} else {
				require.GreaterOrEqual(t, st.Token, commit, "the broker's offset when the answer was written")
			}
		})
	}
}

// A write is answered once the answering broker has applied it, with that
// broker's own offset: at or above the commit, and a broker's tokens never
// decrease from one answer to the next.
func TestWriteAnsweredWithOwnAppliedOffset(t *testing.T) {
	// kfake's controller (node 2) answers writes; it applies 100 ms late.
	c := newCluster(t, Brokers(3), BrokerLag(2, 100*time.Millisecond))
	r := dialRaw(t, c.Addrs()[2])
	last := int64(-1)
	check := func(what string, st *headerNote) {
		t.Helper()
		require.GreaterOrEqual(t, st.tok, last, "%s: the broker's tokens never decrease", what)
		last = st.tok
	}
	for i := range 5 {
		topic := "w" + string(rune('a'+i))
		resp, st := r.do(createTopicsReq(1, nil, topic), nil)
		require.Zero(t, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
		require.Equal(t, c.LogEnd(), st.Token, "at or above the write (nothing else was written)")
		applied, err := c.AppliedOffset(2)
		require.NoError(t, err)
		require.GreaterOrEqual(t, applied, st.Token, "the answering broker applied the write before answering")
		check("create", &headerNote{st.Token})
		_, st = r.do(metadataReq(topic), nil)
		check("metadata", &headerNote{st.Token})

		dt := kmsg.NewPtrDeleteTopicsRequest()
		dt.SetVersion(6)
		dtt := kmsg.NewDeleteTopicsRequestTopic()
		dtt.Topic = kmsg.StringPtr(topic)
		dt.Topics = append(dt.Topics, dtt)
		dresp, st := r.do(dt, nil)
		require.Zero(t, dresp.(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode)
		check("delete", &headerNote{st.Token})
		_, st = r.do(metadataReq(), nil)
		check("metadata", &headerNote{st.Token})
	}
	require.Zero(t, c.Stats().WriteTimeouts)
}

type headerNote struct{ tok int64 }

// When the answering broker does not apply the write within the bound
// (here the request's own 100 ms timeout), each resource is answered
// REQUEST_TIMED_OUT with the broker's own offset: never success with a
// token below the write.
func TestWriteNotAppliedInTimeIsTimedOut(t *testing.T) {
	c := newCluster(t, Brokers(3), WaitMax(time.Hour))
	require.NoError(t, c.PauseApply(2))
	defer c.ResumeApply(2)
	req := createTopicsReq(1, nil, "slow")
	req.TimeoutMillis = 100
	resp, st := dialRaw(t, c.Addrs()[2]).do(req, nil)
	require.Equal(t, kerr.RequestTimedOut.Code, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	applied, err := c.AppliedOffset(2)
	require.NoError(t, err)
	require.Equal(t, applied, st.Token)
	require.Less(t, st.Token, c.LogEnd(), "the write is committed")
	require.Equal(t, int64(1), c.Stats().WriteTimeouts)
}

// WritesAtCommit: a write is answered at once with the commit offset,
// which the answering broker may not have applied; its next answer's token
// is lower (the variant a client must survive).
func TestWritesAtCommitVariant(t *testing.T) {
	c := newCluster(t, Brokers(3), WriteAnswers(WritesAtCommit), WaitMax(time.Hour))
	require.NoError(t, c.PauseApply(2))
	defer c.ResumeApply(2)
	r := dialRaw(t, c.Addrs()[2])
	resp, st := r.do(createTopicsReq(1, nil, "fast"), nil)
	require.Zero(t, resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode)
	require.Equal(t, c.LogEnd(), st.Token, "the commit offset")
	_, next := r.do(metadataReq(), nil)
	require.Less(t, next.Token, st.Token, "the broker's next token is lower")
}

// ApiVersions v3+ is sent with request header v2, whose tag 0 KIP-1243
// exempts for no API: a token ahead of the broker is held and then
// answered INCONSISTENT_METADATA, a token it has applied is answered at
// once, another cluster's id is answered REBOOTSTRAP_REQUIRED (KIP-1242's
// error for the same check of ApiVersions' own ClusterId). The answer's
// header is v0: only its ErrorCode tells.
func TestAPIVersionsHeaderState(t *testing.T) {
	c, commit, applied := behindCluster(t, WaitMax(50*time.Millisecond))
	other := "another-cluster"
	own := c.ClusterID()
	for _, tc := range []struct {
		name    string
		version int16
		st      *headerState
		want    int16
		waits   int64
	}{
		{"token ahead, v3", 3, &headerState{token: commit}, 1243, 1},
		{"token ahead, v4, naming the cluster", 4, &headerState{clusterID: &own, token: commit}, 1243, 1},
		{"token applied", 4, &headerState{clusterID: &own, token: applied}, 0, 0},
		{"no token", 4, &headerState{token: -1}, 0, 0},
		{"another cluster", 3, &headerState{clusterID: &other, token: 0}, kerr.RebootstrapRequired.Code, 0},
		{"no tag 0", 4, nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := c.Stats()
			resp, _ := dialRaw(t, c.Addrs()[0]).do(apiVersionsReq(tc.version), tc.st)
			av := resp.(*kmsg.ApiVersionsResponse)
			require.Equal(t, tc.want, av.ErrorCode)
			if tc.want == 0 {
				require.NotEmpty(t, av.ApiKeys, "a served answer lists the versions")
				require.Equal(t, applied, av.FinalizedFeaturesEpoch, "the broker's own applied offset")
			}
			require.Equal(t, tc.waits, c.Stats().Waits-before.Waits, "held before the answer")
		})
	}
}
