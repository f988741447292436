package realkafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/session"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// TestWritesThroughLeaderCrash kills the KRaft quorum leader of three
// nodes with SIGKILL, then creates topics through a factory while the
// dead node is still listed in Metadata (until it is fenced, 9 s, Kafka's
// default broker.session.timeout.ms) and the quorum elects a new leader.
// After every create's answer the factory's token must cover the write:
// at least the committed high watermark read from a live node before the
// create was sent (the write's records come after it); and every live
// node, asked at once through the factory, must list the topic. A create
// may also be answered before its offset was learnt, when no live node
// answered DescribeQuorum within the answer's 1 s hold (a loaded machine
// in the election: seen once in a CI clone at load 20): that is allowed
// as the SDK documents it, reported (EventWriteUnlearnt) and owed, so the
// reads that follow wait for it. Then the token must cover the write once
// those reads are answered. (That the question goes to every live broker,
// not only the dead one Metadata may still name controller, is
// internal/session's TestCommittedAsksAnotherBroker.)
// Meanwhile a factory producer and a plain franz-go client send records
// one at a time; every record the factory acknowledged must be in the
// topic once, read back at the end (both counts are logged, with the
// ratio of records each got acknowledged).
//
// Metadata names a random unfenced broker as controller, the dead one
// included; on the code before, the committed offset was asked of that
// broker only, so about one create in three came back with a token below
// its write. It runs on each release of kafkatest.MatrixVersions.
func TestWritesThroughLeaderCrash(t *testing.T) {
	for _, v := range matrixVersions(t) {
		t.Run(v, func(t *testing.T) { writesThroughLeaderCrash(t, v) })
	}
}

func writesThroughLeaderCrash(t *testing.T, version string) {
	c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.Version(version), kafkatest.BrokerConfig("broker.session.timeout.ms", "9000"))
	ctx := testkit.CtxFor(t, 3*time.Minute)
	ev := &events{}
	f, err := factory.New(factory.BootstrapServers(c.BootstrapAddrs()...), factory.ClientID("crash"), factory.WithObserver(ev))
	require.NoError(t, err)
	defer f.Close(context.Background())
	fadm, err := f.Admin()
	require.NoError(t, err)
	defer fadm.Close(context.Background())
	fkgo, err := f.KgoClient()
	require.NoError(t, err)
	defer fkgo.Close()
	plain := plainClient(t, c, kgo.RequestRetries(0))

	// Healthy first: the emulation is verified and tokens flow.
	require.NoError(t, createTopic3(ctx, fadm, "crash-warm"))
	require.Positive(t, f.Token().Offset())
	created, err := fadm.CreateTopic(ctx, 6, 3, nil, "crash-data")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	fprod, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer closeProducer(fprod)
	pprod := plainClient(t, c, kgo.DefaultProduceTopic("crash-data"))
	// Both send one record at a time, round the partitions, from the kill
	// until 20 s after it (acks=all waits for the dead replica until it is
	// fenced and leaves the ISR, 9 s): acknowledged records are counted,
	// each call bounded by 3 s.
	// Each keeps the values it had acknowledged (f… and p…), read back
	// at the end: none may be missing from the topic.
	window, stopProducing := context.WithCancel(ctx)
	var fAcked, pAcked produced
	var producers sync.WaitGroup
	produceLoop := func(acked *produced, prefix string, send func(context.Context, string) error) {
		defer producers.Done()
		for i := 0; window.Err() == nil; i++ {
			v := fmt.Sprintf("%s%d", prefix, i)
			pctx, cancel := context.WithTimeout(window, 3*time.Second)
			start := time.Now()
			if send(pctx, v) == nil {
				acked.values = append(acked.values, v)
				acked.longest = max(acked.longest, time.Since(start))
			}
			cancel()
		}
	}
	producers.Add(2)
	go produceLoop(&fAcked, "f", func(ctx context.Context, v string) error {
		_, err := fprod.Produce(ctx, producer.Record[string, string]{Topic: "crash-data", Key: v, Value: v})
		return err
	})
	go produceLoop(&pAcked, "p", func(ctx context.Context, v string) error {
		return pprod.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr()
	})

	leader := quorumLeader(ctx, t, plain, c.NodeIDs())
	require.NoError(t, c.Kill(leader))
	killed := time.Now()
	live := slices.DeleteFunc(c.NodeIDs(), func(id int32) bool { return id == leader })
	t.Logf("Kafka %s: killed the quorum leader, node %d; live %v", version, leader, live)

	var creates, below, unpaid, stale int
	var longest time.Duration
	// 8 s from the kill (the dead node stays listed ~5 s), and on until
	// five creates were made: on a loaded machine a create on 3.6 takes
	// up to 2 s, and fewer show nothing.
	for i := 0; time.Since(killed) < 8*time.Second || (creates < 5 && time.Since(killed) < 40*time.Second); i++ {
		before := committedOn(ctx, t, plain, live)
		topic := fmt.Sprintf("crash-%d", i)
		start := time.Now()
		created, err := fadm.CreateTopic(ctx, 1, 2, nil, topic)
		if err == nil {
			err = created.Err
		}
		took := time.Since(start)
		require.NoError(t, err, "%s", topic)
		longest = max(longest, took)
		creates++
		if tok := f.Token(); tok.Offset() < before {
			below++
			t.Logf("%s: answered %v after the kill with token %v, below the high watermark %d read before it was sent: owed", topic, time.Since(killed).Round(time.Millisecond), tok, before)
		}
		for _, id := range live {
			known, _, err := topicOn(ctx, fkgo, id, topic)
			require.NoError(t, err, "%s: Metadata from node %d", topic, id)
			if !known {
				stale++
				t.Errorf("%s: node %d does not list the topic the factory just created", topic, id)
			}
		}
		if tok := f.Token(); tok.Offset() < before {
			unpaid++
			t.Errorf("%s: token %v after the reads that followed the create, below the high watermark %d read before it was sent", topic, tok, before)
		}
	}
	select {
	case <-time.After(time.Until(killed.Add(20 * time.Second))):
	case <-ctx.Done():
	}
	stopProducing()
	producers.Wait()
	if below > 0 {
		testkit.WaitFor(ctx, t, "EventWriteUnlearnt for each create answered below its write", func() bool {
			return ev.kinds()[factory.EventWriteUnlearnt] >= below
		})
	}
	t.Logf("Kafka %s: %d creates from the kill (8 s, or until the fifth): %d answered with a token below the write (owed), %d still below after the reads, %d stale reads; longest create %v; events %v",
		version, creates, below, unpaid, stale, longest.Round(time.Millisecond), ev.kinds())
	got := readValues(ctx, t, c, "crash-data")
	fLost, fTwice := fAcked.check(got)
	pLost, pTwice := pAcked.check(got)
	t.Logf("Kafka %s: records acknowledged in the 20 s after the kill, one at a time: factory %d, plain kgo %d (%.2f); "+
		"read back: factory %d lost, %d twice, longest acknowledged produce %v; plain kgo %d lost, %d twice, longest %v",
		version, len(fAcked.values), len(pAcked.values), float64(len(fAcked.values))/float64(max(len(pAcked.values), 1)),
		fLost, fTwice, fAcked.longest.Round(time.Millisecond), pLost, pTwice, pAcked.longest.Round(time.Millisecond))
	require.GreaterOrEqual(t, creates, 5, "too few creates to show anything")
	require.Zero(t, unpaid, "a write's offset was not in the store once the reads after it were answered")
	require.Zero(t, stale)
	require.NotEmpty(t, fAcked.values, "the factory producer had no record acknowledged")
	require.Zero(t, fLost, "records the factory producer acknowledged are missing from the topic")
	require.Zero(t, fTwice, "records the factory producer acknowledged are in the topic twice (idempotence)")
}

// produced is what one producer of writesThroughLeaderCrash had
// acknowledged: its values, and its longest acknowledged call.
type produced struct {
	values  []string
	longest time.Duration
}

// check counts the acknowledged values missing from got (a topic's
// values, counted) and those in it more than once.
func (p *produced) check(got map[string]int) (lost, twice int) {
	for _, v := range p.values {
		switch n := got[v]; {
		case n == 0:
			lost++
		case n > 1:
			twice++
		}
	}
	return lost, twice
}

// quorumLeader returns the leader of the KRaft quorum, asked of the nodes
// ids in turn until one answers.
func quorumLeader(ctx context.Context, t *testing.T, cl *kgo.Client, ids []int32) int32 {
	t.Helper()
	var last error
	for range 50 {
		for _, id := range ids {
			req := kmsg.NewPtrDescribeQuorumRequest()
			rt := kmsg.NewDescribeQuorumRequestTopic()
			rt.Topic = "__cluster_metadata"
			rt.Partitions = append(rt.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
			req.Topics = append(req.Topics, rt)
			resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
			if err == nil && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 && resp.Topics[0].Partitions[0].LeaderID >= 0 {
				return resp.Topics[0].Partitions[0].LeaderID
			}
			last = err
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no node named the quorum leader: %v", last)
	return -1
}

// committedOn returns the committed high watermark of the metadata log,
// asked of the live nodes in turn until one answers (while the quorum
// elects a new leader none does).
func committedOn(ctx context.Context, t *testing.T, cl *kgo.Client, live []int32) int64 {
	t.Helper()
	var last error
	for range 200 {
		for _, id := range live {
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			hwm, err := session.QuorumHighWatermark(qctx, cl.Broker(int(id)))
			cancel()
			if err == nil {
				return hwm
			}
			last = err
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("no live node answered DescribeQuorum: %v", last)
	return -1
}
