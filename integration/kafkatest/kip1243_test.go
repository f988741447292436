package kafkatest_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// holdBound is the agent's hold bound in TestKIP1243ThreeNodes: long
// enough that a request sleeping on a request-handler thread for it would
// stand out, short enough for a test.
const holdBound = 8 * time.Second

func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12 // flexible
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func createTopicsReq(topic string, partitions int32, rf int16) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7 // flexible
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, partitions, rf
	req.Topics = append(req.Topics, rt)
	return req
}

// topicCode returns the error code Metadata gave for topic (-2 if absent).
func topicCode(resp kmsg.Response, topic string) int16 {
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil && *t.Topic == topic {
			return t.ErrorCode
		}
	}
	return -2
}

// TestKIP1243ThreeNodes runs three unmodified Kafka 4.4.0 nodes with the
// KIP-1243 agent and checks, from the wire, what a KIP-1243 server must do.
func TestKIP1243ThreeNodes(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.KIP1243(kafkatest.KIP1243Hold(holdBound)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cid := c.ClusterID()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
	require.NoError(t, err)
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	// A plain franz-go client produces and consumes through the agent,
	// and every flexible response it reads carries tag 0.
	t.Run("PlainClientEveryResponseTagged", func(t *testing.T) {
		const topic, n = "kip1243-plain", 300
		tap := newWireTap()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...), tap.dialer(), kgo.ClientID("plain"))
		require.NoError(t, err)
		defer cl.Close()
		created, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, topic)
		require.NoError(t, err)
		require.NoError(t, created.Err)
		for i := range n {
			cl.Produce(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
		require.NoError(t, cl.Flush(ctx))
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...), tap.dialer(), kgo.ClientID("plain-consumer"),
			kgo.ConsumeTopics(topic), kgo.ConsumerGroup("kip1243-plain-group"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cons.Close()
		seen := map[string]bool{}
		for len(seen) < n {
			fs := cons.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "consumed %d of %d", len(seen), n)
			fs.EachError(func(_ string, _ int32, err error) { require.NoError(t, err) })
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
		require.NoError(t, cons.CommitUncommittedOffsets(ctx))
		count, err := c.CountRecords(ctx, topic)
		require.NoError(t, err)
		require.Equal(t, int64(n), count, "every record produced once")

		// A few admin reads through the tapped client too.
		tadm := kadm.NewClient(cl)
		_, err = tadm.ListEndOffsets(ctx, topic)
		require.NoError(t, err)
		_, err = tadm.DescribeTopicConfigs(ctx, topic)
		require.NoError(t, err)
		_, err = tadm.DescribeGroups(ctx, "kip1243-plain-group")
		require.NoError(t, err)
		_, err = tadm.ListTopics(ctx)
		require.NoError(t, err)

		got := tap.counts()
		t.Logf("requests: %s", byName(got.requests))
		t.Logf("flexible responses: %s (%d)", byName(got.flexible), total(got.flexible))
		t.Logf("with tag 0:         %s (%d); cluster ids %v; highest token %d", byName(got.tagged), total(got.tagged), got.clusterIDs, got.maxToken)
		require.Empty(t, got.errs)
		require.GreaterOrEqual(t, total(got.flexible), 20)
		require.Equal(t, got.flexible, got.tagged, "every flexible response carries tag 0")
		require.Equal(t, map[string]int{cid: total(got.tagged)}, got.clusterIDs, "every tag names this cluster")
		require.Positive(t, got.maxToken)
		for _, key := range []int16{0, 1, 2, 3, 15, 19, 32} { // Produce, Fetch, ListOffsets, Metadata, DescribeGroups, CreateTopics, DescribeConfigs
			require.Positive(t, got.tagged[key], "%s answered with tag 0", kmsg.NameForKey(key))
		}
	})

	// The answer to a forwarded write (CreateTopics on a broker that is
	// not the controller) carries a token that covers the write: at least
	// the offset of its TopicRecord in the metadata log, although the
	// broker itself may not have applied it yet.
	t.Run("ForwardedWriteCovered", func(t *testing.T) {
		dq := kmsg.NewPtrDescribeQuorumRequest()
		dqt := kmsg.NewDescribeQuorumRequestTopic()
		dqt.Topic = "__cluster_metadata"
		dqt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
		dq.Topics = append(dq.Topics, dqt)
		quorum := func() (leader int32, hwm int64) {
			resp, err := dq.RequestWith(ctx, admCl)
			require.NoError(t, err)
			p := resp.Topics[0].Partitions[0]
			require.NoError(t, kerr.ErrorForCode(p.ErrorCode))
			return p.LeaderID, p.HighWatermark
		}
		leader, _ := quorum()
		var other int32
		for _, id := range c.NodeIDs() {
			if id != leader {
				other = id
				break
			}
		}
		addr, err := c.ListenerAddr(other)
		require.NoError(t, err)
		rc, err := dialRaw(addr)
		require.NoError(t, err)
		defer rc.Close()
		leaderDir, err := c.DataDir(leader)
		require.NoError(t, err)
		readers := map[int32]*rawConn{}
		for _, id := range c.NodeIDs() {
			a, err := c.ListenerAddr(id)
			require.NoError(t, err)
			r, err := dialRaw(a)
			require.NoError(t, err)
			defer r.Close()
			readers[id] = r
		}

		const trials = 10
		ahead, staleWith, staleWithout := 0, 0, 0
		for i := range trials {
			topic := fmt.Sprintf("kip1243-fwd-%d", i)
			_, before := quorum()
			resp, st, err := rc.roundTrip(createTopicsReq(topic, 1, 3), nil, 30*time.Second)
			require.NoError(t, err)
			require.NoError(t, kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode))
			require.NotNil(t, st, "the CreateTopics answer carries tag 0")
			// What the broker itself had applied as it answered: the token of
			// an answer it builds from its own state right after.
			_, own, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
			require.NoError(t, err)
			_, after := quorum()
			off, err := metadataWriteOffset(leaderDir, topic)
			require.NoError(t, err)
			t.Logf("%s on broker %d (controller %d): write at offset %d, answer's token %d, broker's next own token %d, HWM %d before, %d after",
				topic, other, leader, off, st.token, own.token, before, after)
			require.Equal(t, cid, *st.clusterID)
			require.GreaterOrEqual(t, st.token, off, "the token covers the write")
			require.Less(t, st.token, after, "the token is a committed offset")
			if own.token < off {
				ahead++
			}
			require.GreaterOrEqual(t, own.token, st.token, "the broker's next answer has no lower token")
			// Read-your-writes on the wire: Metadata carrying the token, sent
			// to every broker, knows the topic; without it, some may not.
			for _, id := range c.NodeIDs() {
				r := readers[id]
				plain, _, err := r.roundTrip(metadataReq(topic), nil, 10*time.Second)
				require.NoError(t, err)
				if topicCode(plain, topic) != 0 {
					staleWithout++
				}
				with, _, err := r.roundTrip(metadataReq(topic), appendState(nil, &cid, st.token), 2*holdBound)
				require.NoError(t, err)
				if topicCode(with, topic) != 0 {
					staleWith++
				}
			}
		}
		t.Logf("%d trials: the broker had not applied the write itself when it answered in %d; Metadata without the token stale %d of %d, with it %d of %d",
			trials, ahead, staleWithout, trials*3, staleWith, trials*3)
		require.Zero(t, staleWith, "a read carrying the write's token saw it on every broker")
		require.Zero(t, ahead, "the broker answered the write only once it had applied it")

		testTokensNeverDecrease(t, c, other, leaderDir)
	})

	// A write held until the broker catches up is then forwarded to the
	// controller like any other: the handler must not have freed its
	// buffer when it parked it.
	t.Run("HeldWriteForwarded", func(t *testing.T) {
		const topic = "kip1243-held-write"
		addr, err := c.ListenerAddr(3)
		require.NoError(t, err)
		rc, err := dialRaw(addr)
		require.NoError(t, err)
		defer rc.Close()
		_, st, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
		require.NoError(t, err)
		before := parkedLines(t, c, 3)
		// A few offsets ahead: the controller's no-op records (every
		// 500ms) bring the broker there soon.
		start := time.Now()
		resp, got, err := rc.roundTrip(createTopicsReq(topic, 1, 3), appendState(nil, &cid, st.token+3), 2*holdBound)
		took := time.Since(start)
		require.NoError(t, err)
		code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
		require.Zero(t, code, "held, then created: %v", kerr.ErrorForCode(code))
		require.GreaterOrEqual(t, got.token, st.token+3)
		require.Equal(t, 1, parkedLines(t, c, 3)-before, "it was parked")
		t.Logf("CreateTopics carrying token %d (broker at %d) parked and created in %v; answer's token %d", st.token+3, st.token, took.Round(time.Millisecond), got.token)
	})

	t.Run("NothingServedStale", func(t *testing.T) { testNothingServedStale(t, ctx, c, adm, holdBound) })
	t.Run("OwnTimeout", func(t *testing.T) { testOwnTimeout(t, ctx, c, adm, holdBound) })
	t.Run("ApiVersionsHeld", func(t *testing.T) { testApiVersionsHeld(t, c, holdBound) })

	// Requests held for a token far ahead are parked, not slept on: with
	// num.io.threads=2 (kafkatest's default) and ten held requests, an
	// untagged Metadata and a Produce from another client answer as fast
	// as before; after the bound each held request gets
	// INCONSISTENT_METADATA.
	t.Run("HeldRequestsStarveNoOne", func(t *testing.T) {
		const topic, held = "kip1243-starve", 10
		created, err := adm.CreateTopic(ctx, 1, 3, nil, topic)
		require.NoError(t, err)
		require.NoError(t, created.Err)
		other, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...), kgo.ClientID("bystander"), kgo.DefaultProduceTopic(topic))
		require.NoError(t, err)
		defer other.Close()
		var leader int32 = -1
		for leader < 0 {
			m, err := adm.Metadata(ctx, topic)
			require.NoError(t, err)
			if p, ok := m.Topics[topic].Partitions[0]; ok && p.Err == nil {
				leader = p.Leader
			}
		}
		addr, err := c.ListenerAddr(leader)
		require.NoError(t, err)
		// Each call is bounded by 20s; its error is checked after its
		// time, so a starved call shows how long it waited.
		untaggedMetadata := func() (time.Duration, error) {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			start := time.Now()
			resp, err := metadataReq(topic).RequestWith(rctx, other.Broker(int(leader)))
			if err == nil && topicCode(resp, topic) != 0 {
				err = kerr.ErrorForCode(topicCode(resp, topic))
			}
			return time.Since(start), err
		}
		produce := func() (time.Duration, error) {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			start := time.Now()
			err := other.ProduceSync(rctx, &kgo.Record{Value: []byte("bystander")}).FirstErr()
			return time.Since(start), err
		}
		var baseMeta, baseProduce time.Duration
		// The first produce also gets a producer id and waits for the
		// new partition's followers: warm up before the baseline.
		_, err = produce()
		require.NoError(t, err)
		for range 5 {
			m, err := untaggedMetadata()
			require.NoError(t, err)
			p, err := produce()
			require.NoError(t, err)
			baseMeta, baseProduce = max(baseMeta, m), max(baseProduce, p)
		}

		probe, err := dialRaw(addr)
		require.NoError(t, err)
		defer probe.Close()
		_, st, err := probe.roundTrip(metadataReq(topic), nil, 10*time.Second)
		require.NoError(t, err)
		far := st.token + 1_000_000_000
		before := parkedLines(t, c, leader)

		type answer struct {
			code int16
			st   *stamp
			took time.Duration
			err  error
		}
		answers := make(chan answer, held)
		sent := time.Now()
		for range held {
			rc, err := dialRaw(addr)
			require.NoError(t, err)
			defer rc.Close()
			_, err = rc.send(metadataReq(topic), tagSection(appendState(nil, &cid, far)))
			require.NoError(t, err)
			go func() {
				resp := metadataReq(topic).ResponseKind()
				resp.SetVersion(12)
				st, err := rc.recv(resp, time.Now().Add(3*holdBound))
				answers <- answer{code: topicCode(resp, topic), st: st, took: time.Since(sent), err: err}
			}()
		}
		// Wait until the broker says it took at least two of them off the
		// queue: as many as it has request-handler threads
		// (num.io.threads=2), which would all be busy if a held request
		// kept its thread.
		waitFor(t, 30*time.Second, func() bool { return parkedLines(t, c, leader)-before >= 2 })
		parkedNow, parkedAfter := parkedLines(t, c, leader)-before, time.Since(sent)
		meta, metaErr := untaggedMetadata()
		prod, prodErr := produce()
		t.Logf("baseline (max of 5, after a warm-up): Metadata %v, Produce %v; with %d of %d requests parked (%v after sending): Metadata %v, Produce %v",
			baseMeta.Round(time.Microsecond), baseProduce.Round(time.Microsecond), parkedNow, held, parkedAfter.Round(time.Millisecond),
			meta.Round(time.Microsecond), prod.Round(time.Microsecond))
		// Had the held requests slept on the two handler threads, both
		// would wait out most of the 8s bound. 2s leaves room for a loaded
		// 2-core machine while being a quarter of that bound.
		require.Less(t, meta, 2*time.Second, "an untagged Metadata waited behind held requests")
		require.Less(t, prod, 2*time.Second, "a Produce waited behind held requests")
		require.NoError(t, metaErr)
		require.NoError(t, prodErr)
		// Once all ten are parked, again.
		waitFor(t, 5*time.Second, func() bool { return parkedLines(t, c, leader)-before >= held })
		meta, metaErr = untaggedMetadata()
		prod, prodErr = produce()
		t.Logf("with all %d parked: Metadata %v, Produce %v", held, meta.Round(time.Microsecond), prod.Round(time.Microsecond))
		require.Less(t, meta, 2*time.Second, "an untagged Metadata waited behind held requests")
		require.Less(t, prod, 2*time.Second, "a Produce waited behind held requests")
		require.NoError(t, metaErr)
		require.NoError(t, prodErr)
		require.Less(t, time.Since(sent), holdBound, "the bystanders were measured while the ten were still held")

		for range held {
			a := <-answers
			require.NoError(t, a.err)
			require.Equal(t, kafkatest.DefaultInconsistentMetadataCode, a.code, "INCONSISTENT_METADATA after the bound")
			require.Equal(t, cid, *a.st.clusterID)
			require.Less(t, a.st.token, far)
			require.GreaterOrEqual(t, a.took, holdBound-200*time.Millisecond, "held for the bound")
			require.Less(t, a.took, holdBound+5*time.Second, "answered soon after the bound")
			t.Logf("held request answered %d after %v (token in header %d)", a.code, a.took.Round(time.Millisecond), a.st.token)
		}
		require.Equal(t, held, parkedLines(t, c, leader)-before, "each held request was parked once")
	})

	// A request naming another cluster is not processed: CreateTopics is
	// answered REBOOTSTRAP_REQUIRED and no topic appears.
	t.Run("ForeignClusterID", func(t *testing.T) {
		const topic = "kip1243-foreign"
		foreign := kafkatest.NewClusterID()
		addr, err := c.ListenerAddr(2)
		require.NoError(t, err)
		rc, err := dialRaw(addr)
		require.NoError(t, err)
		defer rc.Close()
		resp, st, err := rc.roundTrip(createTopicsReq(topic, 1, 3), appendState(nil, &foreign, 0), 10*time.Second)
		require.NoError(t, err)
		code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
		require.Equal(t, kerr.RebootstrapRequired.Code, code, "got %v", kerr.ErrorForCode(code))
		require.NotNil(t, st)
		require.Equal(t, cid, *st.clusterID, "the answer names the broker's own cluster")
		// The connection stays usable, and the topic was never created.
		for _, id := range c.NodeIDs() {
			a, err := c.ListenerAddr(id)
			require.NoError(t, err)
			r, err := dialRaw(a)
			require.NoError(t, err)
			m, _, err := r.roundTrip(metadataReq(topic), appendState(nil, &cid, st.token), 2*holdBound)
			r.Close()
			require.NoError(t, err)
			require.Equal(t, kerr.UnknownTopicOrPartition.Code, topicCode(m, topic), "broker %d knows no such topic", id)
		}
		m, _, err := rc.roundTrip(metadataReq(topic), nil, 10*time.Second)
		require.NoError(t, err)
		require.Equal(t, kerr.UnknownTopicOrPartition.Code, topicCode(m, topic))
		logs := agentLogged(t, c, 2, "refused CREATE_TOPICS", "names cluster "+foreign)
		require.True(t, containsLine(logs, "refused CREATE_TOPICS", "names cluster "+foreign), "the agent logged the refusal")

		// An all-topics Metadata v12 has no field for the error: the
		// connection is closed instead of answering an empty success.
		all, err := dialRaw(addr)
		require.NoError(t, err)
		defer all.Close()
		_, _, err = all.roundTrip(metadataReq(), appendState(nil, &foreign, 0), 10*time.Second)
		require.Error(t, err)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed, not left hanging: %v", err)
	})

	// A tag 0 that does not decode is ignored (the request is served) and
	// logged once; a header whose tag overruns the frame is Kafka's own
	// parse error, which closes that connection only.
	t.Run("TruncatedTag0", func(t *testing.T) {
		const topic = "kip1243-plain"
		addr, err := c.ListenerAddr(3)
		require.NoError(t, err)
		rc, err := dialRaw(addr)
		require.NoError(t, err)
		defer rc.Close()
		// ClusterId says 22 bytes; 5 follow and no token.
		bad := append([]byte{23}, "short"...)
		for range 2 {
			resp, st, err := rc.roundTrip(metadataReq(topic), bad, 10*time.Second)
			require.NoError(t, err)
			require.Zero(t, topicCode(resp, topic), "served as if untagged")
			require.NotNil(t, st)
		}
		logs := agentLogged(t, c, 3, "ignored a malformed header tag 0", "")
		require.Equal(t, 1, countLines(logs, "ignored a malformed header tag 0"), "logged once: %v", logs)

		// The tag claims 200 bytes; the frame ends first.
		over := []byte{1, 0, 200, 1}
		cut, err := dialRaw(addr)
		require.NoError(t, err)
		defer cut.Close()
		_, err = cut.send(metadataReq(topic), over)
		require.NoError(t, err)
		_, err = cut.recv(nil, time.Now().Add(10*time.Second))
		require.Error(t, err, "Kafka closes a connection whose header does not parse")
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed, not left hanging: %v", err)
		resp, _, err := rc.roundTrip(metadataReq(topic), nil, 10*time.Second)
		require.NoError(t, err)
		require.Zero(t, topicCode(resp, topic), "the broker serves other connections")
	})

	// A restarted node comes back with the agent, checked by Restart.
	t.Run("Restart", func(t *testing.T) {
		require.NoError(t, c.Restart(3))
		addr, err := c.ListenerAddr(3)
		require.NoError(t, err)
		rc, err := dialRaw(addr)
		require.NoError(t, err)
		defer rc.Close()
		_, st, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
		require.NoError(t, err)
		require.NotNil(t, st)
		require.Equal(t, cid, *st.clusterID)
		logs, err := c.AgentLog(3)
		require.NoError(t, err)
		require.Equal(t, 2, countLines(logs, "READY"), "one READY per run")
	})
}

// parkedLines counts the agent's "parked" lines on node id.
func parkedLines(t *testing.T, c *kafkatest.Cluster, id int32) int {
	logs, err := c.AgentLog(id)
	require.NoError(t, err)
	return countLines(logs, "parked ")
}

func countLines(lines []string, prefix string) (n int) {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// agentLogged waits (up to 10 s) until node id's agent has logged a line
// starting with prefix and containing part, and returns its lines. The
// agent may write a line after the answer or the close it reports, so a
// test that reads the log at once can miss it.
func agentLogged(t *testing.T, c *kafkatest.Cluster, id int32, prefix, part string) []string {
	t.Helper()
	var logs []string
	waitFor(t, 10*time.Second, func() bool {
		var err error
		logs, err = c.AgentLog(id)
		require.NoError(t, err)
		return containsLine(logs, prefix, part)
	})
	return logs
}

func containsLine(lines []string, prefix, part string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, part) {
			return true
		}
	}
	return false
}

// waitFor polls cond every 50ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("condition not met within %v", d)
		}
	}
}
