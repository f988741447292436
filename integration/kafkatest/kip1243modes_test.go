package kafkatest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

const code4321 = 4321

// TestKIP1243ErrorMode: in error mode a request whose token is ahead gets
// INCONSISTENT_METADATA at once, with the configured code and the broker's
// newest offset in its header; a request whose answer has no field for an
// error (an all-topics Metadata, an acks=0 Produce) has its connection
// closed at once, neither served nor executed; ApiVersions v3+ tag 0 is
// read: a token ahead gets INCONSISTENT_METADATA, another cluster
// REBOOTSTRAP_REQUIRED. Over every answer on one connection the header
// tokens never decrease.
func TestKIP1243ErrorMode(t *testing.T) {
	const code = code4321
	c := kafkatest.Start(t, kafkatest.KIP1243(kafkatest.KIP1243Error(0), kafkatest.KIP1243ErrorCode(code)))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cid := c.ClusterID()
	rc, err := dialRaw(c.BootstrapAddrs()[0])
	require.NoError(t, err)
	defer rc.Close()
	last := int64(-1)
	mono := func(st *stamp) {
		t.Helper()
		require.NotNil(t, st)
		require.GreaterOrEqual(t, st.token, last, "header tokens never decrease")
		last = st.token
	}
	_, st, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
	require.NoError(t, err)
	mono(st)
	far := st.token + 1_000_000

	start := time.Now()
	resp, got, err := rc.roundTrip(metadataReq("kip1243-any"), appendState(nil, &cid, far), 10*time.Second)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, int16(code), topicCode(resp, "kip1243-any"))
	require.Less(t, got.token, far, "the header says how far the broker is")
	mono(got)
	require.Less(t, took, 2*time.Second, "answered at once, not held")

	// ApiVersions v3+ carries tag 0 (request header v2): acted on.
	av, _, err := rc.roundTrip(apiVersionsReq(4), appendState(nil, &cid, far), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int16(code), av.(*kmsg.ApiVersionsResponse).ErrorCode, "ApiVersions v4 with a token ahead")
	foreign := kafkatest.NewClusterID()
	av, _, err = rc.roundTrip(apiVersionsReq(3), appendState(nil, &foreign, 0), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, kerr.RebootstrapRequired.Code, av.(*kmsg.ApiVersionsResponse).ErrorCode, "ApiVersions v3 naming another cluster")
	av, _, err = rc.roundTrip(apiVersionsReq(4), appendState(nil, &cid, last), 10*time.Second)
	require.NoError(t, err)
	require.Zero(t, av.(*kmsg.ApiVersionsResponse).ErrorCode, "ApiVersions v4 with a token the broker has")
	require.NotEmpty(t, av.(*kmsg.ApiVersionsResponse).ApiKeys)

	// No place for an error: the connection is closed at once.
	all, err := dialRaw(c.BootstrapAddrs()[0])
	require.NoError(t, err)
	defer all.Close()
	start = time.Now()
	_, _, err = all.roundTrip(metadataReq(), appendState(nil, &cid, far), 10*time.Second)
	requireClosed(t, err, "all-topics Metadata")
	require.Less(t, time.Since(start), 2*time.Second, "closed at once")
	const topic = "kip1243-error-acks0"
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
	require.NoError(t, err)
	defer cl.Close()
	created, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)
	zero, err := dialRaw(c.BootstrapAddrs()[0])
	require.NoError(t, err)
	defer zero.Close()
	_, err = zero.send(produceReq(topic, 0, 30000, "acks0"), tagSection(appendState(nil, &cid, far)))
	require.NoError(t, err)
	_, err = zero.recv(nil, time.Now().Add(10*time.Second))
	requireClosed(t, err, "acks=0 Produce")
	written, err := c.CountRecords(ctx, topic)
	require.NoError(t, err)
	require.Zero(t, written, "the acks=0 Produce was not written")
	t.Logf("INCONSISTENT_METADATA (%d) after %v; all-topics Metadata and acks=0 Produce: connection closed, nothing written", code, took.Round(time.Microsecond))

	// Random tag 0 payloads (a fixed seed, so a failure replays): each
	// request is answered, on the same connection, by the agent's parser
	// serving it as untagged (malformed), refusing it (another cluster),
	// answering 4321 (a token ahead) or serving it (a token behind).
	const seed, n = 1243, 500
	rng := rand.New(rand.NewPCG(seed, seed))
	outcomes := map[string]int{}
	for i := range n {
		var payload []byte
		switch i % 4 {
		case 0: // random bytes
			payload = make([]byte, rng.IntN(40))
			for j := range payload {
				payload[j] = byte(rng.UintN(256))
			}
		case 1: // a valid state, random token, this cluster or none
			id := &cid
			if rng.IntN(2) == 0 {
				id = nil
			}
			payload = appendState(nil, id, int64(rng.Uint64()))
		case 2: // a valid state cut short
			full := appendState(nil, &cid, int64(rng.Uint64()))
			payload = full[:rng.IntN(len(full))]
		case 3: // another cluster
			other := kafkatest.NewClusterID()
			payload = appendState(nil, &other, int64(rng.IntN(100)))
		}
		resp, got, err := rc.roundTrip(metadataReq("kip1243-any"), payload, 10*time.Second)
		require.NoError(t, err, "payload %x", payload)
		mono(got)
		switch code := topicCode(resp, "kip1243-any"); code {
		case 3: // UNKNOWN_TOPIC_OR_PARTITION: served
			outcomes["served"]++
		case 129:
			outcomes["REBOOTSTRAP_REQUIRED"]++
		case code4321:
			outcomes["INCONSISTENT_METADATA"]++
		default:
			t.Fatalf("payload %x: topic error code %d", payload, code)
		}
	}
	t.Logf("%d random tag 0 payloads (seed %d): %v", n, seed, outcomes)

	agentLogged(t, c, 1, "answered INCONSISTENT_METADATA (4321) to METADATA", "")
	agentLogged(t, c, 1, "closed the connection of METADATA", "no place for an error")
	agentLogged(t, c, 1, "closed the connection of PRODUCE", "acks=0")
}

// TestKIP1243TokensOff: with tokens off the agent is attached but the
// broker is plain Kafka: no tag 0 in answers, request tokens ignored.
func TestKIP1243TokensOff(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.KIP1243(kafkatest.KIP1243TokensOff(), kafkatest.KIP1243Hold(time.Minute)))
	cid := c.ClusterID()
	rc, err := dialRaw(c.BootstrapAddrs()[0])
	require.NoError(t, err)
	defer rc.Close()
	resp, st, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
	require.NoError(t, err)
	require.Nil(t, st, "no tag 0")
	require.Len(t, resp.(*kmsg.MetadataResponse).Brokers, 1)
	start := time.Now()
	_, st, err = rc.roundTrip(metadataReq("kip1243-any"), appendState(nil, &cid, 1<<40), 10*time.Second)
	require.NoError(t, err)
	require.Nil(t, st)
	require.Less(t, time.Since(start), 10*time.Second, "not held for a minute")
	logs, err := c.AgentLog(1)
	require.NoError(t, err)
	require.Zero(t, countLines(logs, "parked "))
}

// TestKIP1243AgentCannotAttach: an agent that misses a method it hooks
// (as on another Kafka version) leaves the broker alone and says so, and
// kafkatest refuses the cluster instead of testing plain Kafka.
func TestKIP1243AgentCannotAttach(t *testing.T) {
	if testing.Short() {
		t.Skip("kafkatest: real Apache Kafka tests are skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const hook = "org.apache.kafka.network.NoSuchClass#noSuchMethod"
	c, err := kafkatest.StartCluster(ctx, kafkatest.KIP1243(kafkatest.KIP1243RequireHook(hook)))
	require.Nil(t, c)
	require.True(t, errors.Is(err, kafkatest.ErrAgent), "%v", err)
	require.ErrorContains(t, err, "FAILED: this Kafka lacks the methods the agent hooks: "+hook)
	require.ErrorContains(t, err, "the agent stays out of the way")
	t.Logf("%v", err)
}

// TestKIP1243CloseOnMismatch: with mismatch=close a request naming another
// cluster gets no answer: its connection is closed, and nothing is done.
// The same node runs error mode with inconsistent=close: a request whose
// token is ahead has its connection closed too, where another agent would
// answer INCONSISTENT_METADATA, and is not executed. And it waits at most
// 1 ms for a forwarded write: an answer the broker has not applied by
// then is REQUEST_TIMED_OUT, never a success with a token below the write.
func TestKIP1243CloseOnMismatch(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.KIP1243(kafkatest.KIP1243CloseOnMismatch(), kafkatest.KIP1243Error(0),
		kafkatest.KIP1243CloseInsteadOfError(), kafkatest.KIP1243WriteHold(time.Millisecond)))
	cid, foreign := c.ClusterID(), kafkatest.NewClusterID()
	addr := c.BootstrapAddrs()[0]
	rc, err := dialRaw(addr)
	require.NoError(t, err)
	defer rc.Close()
	_, _, err = rc.roundTrip(createTopicsReq("kip1243-closed", 1, 1), appendState(nil, &foreign, 0), 10*time.Second)
	requireClosed(t, err, "CreateTopics naming another cluster")
	ok, err := dialRaw(addr)
	require.NoError(t, err)
	defer ok.Close()
	m, st, err := ok.roundTrip(metadataReq("kip1243-closed"), appendState(nil, &cid, 0), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, cid, *st.clusterID)
	require.Equal(t, int16(3), topicCode(m, "kip1243-closed"), "the topic was not created")
	agentLogged(t, c, 1, "refused CREATE_TOPICS", "closed the connection")

	ahead, err := dialRaw(addr)
	require.NoError(t, err)
	defer ahead.Close()
	_, _, err = ahead.roundTrip(createTopicsReq("kip1243-closed-ahead", 1, 1), appendState(nil, &cid, st.token+1_000_000), 10*time.Second)
	requireClosed(t, err, "CreateTopics with a token ahead, inconsistent=close")
	m, _, err = ok.roundTrip(metadataReq("kip1243-closed-ahead"), nil, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, int16(3), topicCode(m, "kip1243-closed-ahead"), "the topic was not created")
	agentLogged(t, c, 1, "closed the connection of CREATE_TOPICS", "inconsistent=close")

	// writeHoldMs=1: each CreateTopics answer is a success whose token
	// covers the write, or REQUEST_TIMED_OUT (the write done all the same),
	// and the broker's tokens never go down.
	dir, err := c.DataDir(1)
	require.NoError(t, err)
	last, timedOut := int64(-1), 0
	for i := range 10 {
		topic := fmt.Sprintf("kip1243-writehold-%d", i)
		resp, st, err := ok.roundTrip(createTopicsReq(topic, 1, 1), nil, 10*time.Second)
		require.NoError(t, err)
		require.GreaterOrEqual(t, st.token, last, "tokens never decrease")
		last = st.token
		off, err := metadataWriteOffset(dir, topic)
		require.NoError(t, err, "the write happened")
		switch code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code {
		case 0:
			require.GreaterOrEqual(t, st.token, off, "a success covers the write")
		case kerr.RequestTimedOut.Code:
			timedOut++
		default:
			t.Fatalf("%s: %v", topic, kerr.ErrorForCode(code))
		}
	}
	t.Logf("writeHoldMs=1: %d of 10 CreateTopics answered REQUEST_TIMED_OUT, the others with a token covering the write", timedOut)
	require.Positive(t, timedOut, "no answer waited past the 1 ms bound: the test shows nothing")
	agentLogged(t, c, 1, "answered REQUEST_TIMED_OUT to CREATE_TOPICS", "not applied")
}
