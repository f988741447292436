package kafkatest_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

const code4321 = 4321

// TestKIP1243ErrorMode: in error mode a request whose token is ahead gets
// INCONSISTENT_METADATA at once, with the configured code; a request whose
// answer has no field for an error (an all-topics Metadata) is held up to
// the stale bound, then served as it is.
func TestKIP1243ErrorMode(t *testing.T) {
	const code, staleHold = code4321, 3 * time.Second
	c := kafkatest.Start(t, kafkatest.KIP1243(kafkatest.KIP1243Error(0), kafkatest.KIP1243ErrorCode(code), kafkatest.KIP1243StaleHold(staleHold)))
	cid := c.ClusterID()
	rc, err := dialRaw(c.BootstrapAddrs()[0])
	require.NoError(t, err)
	defer rc.Close()
	_, st, err := rc.roundTrip(metadataReq(), nil, 10*time.Second)
	require.NoError(t, err)
	require.NotNil(t, st)
	far := st.token + 1_000_000

	start := time.Now()
	resp, got, err := rc.roundTrip(metadataReq("kip1243-any"), appendState(nil, &cid, far), 10*time.Second)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, int16(code), topicCode(resp, "kip1243-any"))
	require.Less(t, got.token, far, "the header says how far the broker is")
	require.Less(t, took, 2*time.Second, "answered at once, not held")

	start = time.Now()
	resp, _, err = rc.roundTrip(metadataReq(), appendState(nil, &cid, far), 3*staleHold)
	stale := time.Since(start)
	require.NoError(t, err)
	require.Len(t, resp.(*kmsg.MetadataResponse).Brokers, 1, "served as it is")
	require.GreaterOrEqual(t, stale, staleHold-200*time.Millisecond)
	require.Less(t, stale, staleHold+5*time.Second)
	t.Logf("INCONSISTENT_METADATA (%d) after %v; all-topics Metadata served after %v", code, took.Round(time.Microsecond), stale.Round(time.Millisecond))
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
		require.NotNil(t, got)
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
	agentLogged(t, c, 1, "served METADATA", "cannot carry INCONSISTENT_METADATA")
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
func TestKIP1243CloseOnMismatch(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.KIP1243(kafkatest.KIP1243CloseOnMismatch()))
	cid, foreign := c.ClusterID(), kafkatest.NewClusterID()
	addr := c.BootstrapAddrs()[0]
	rc, err := dialRaw(addr)
	require.NoError(t, err)
	defer rc.Close()
	_, _, err = rc.roundTrip(createTopicsReq("kip1243-closed", 1, 1), appendState(nil, &foreign, 0), 10*time.Second)
	require.Error(t, err)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed, not left hanging: %v", err)
	ok, err := dialRaw(addr)
	require.NoError(t, err)
	defer ok.Close()
	m, st, err := ok.roundTrip(metadataReq("kip1243-closed"), appendState(nil, &cid, 0), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, cid, *st.clusterID)
	require.Equal(t, int16(3), topicCode(m, "kip1243-closed"), "the topic was not created")
	agentLogged(t, c, 1, "refused CREATE_TOPICS", "closed the connection")
}
