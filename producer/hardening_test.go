package producer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/internal/wire"
)

// TestMain fails the package's tests if a goroutine outlives them: Close
// joins every goroutine the producer starts.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestFailureCallbacksInOrder: records of one partition that fail, each
// waiting for a cluster verdict, get their callbacks in the order they were
// produced, as franz-go calls promises.
func TestFailureCallbacksInOrder(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchMaxBytes(1000))
	require.NoError(t, err)
	var made atomic.Int32
	p := newProducer(cl, Bytes(), Bytes()).withFollow(link.Producer{Watch: settledWatch(), Clients: countedClients(seeds, &made)})
	defer p.Close(context.Background())

	const n = 300
	var mu sync.Mutex
	var order []int
	ctx := context.Background()
	for i := range n {
		require.NoError(t, p.ProduceAsync(ctx, Record[[]byte, []byte]{Topic: "t", Value: make([]byte, 2000)},
			func(_ Result, err error) {
				if !errors.Is(err, kerr.MessageTooLarge) {
					t.Errorf("record %d: %v, want MESSAGE_TOO_LARGE", i, err)
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			}))
	}
	require.NoError(t, p.Flush(ctx))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, order, n)
	inversions := 0
	for i := 1; i < n; i++ {
		if order[i] < order[i-1] {
			inversions++
		}
	}
	require.Zero(t, inversions, "callbacks out of produce order")
	require.Zero(t, made.Load())
}

// holdClosed holds the promise of every record its client fails with
// ErrClientClosed until release is closed (franz-go runs this hook just
// before the promise).
// passed counts the records let through.
type holdClosed struct {
	release chan struct{}
	passed  *atomic.Int32
}

func (h holdClosed) OnProduceRecordUnbuffered(_ *kgo.Record, err error) {
	if errors.Is(err, kgo.ErrClientClosed) {
		<-h.release
		h.passed.Add(1)
	}
}

// TestFlushWaitsForReplacedClient: when a cluster change replaces the
// client, the old one fails the records it still held as it closes; Flush
// and Close return only after their callbacks ran (they go to the new
// client), and Close only after the goroutine closing the old client ended.
func TestFlushWaitsForReplacedClient(t *testing.T) {
	for _, tc := range []struct {
		name   string
		finish func(*Producer[[]byte, []byte], context.Context) error
	}{
		{"Flush", (*Producer[[]byte, []byte]).Flush},
		{"Close", (*Producer[[]byte, []byte]).Close},
	} {
		t.Run(tc.name, func(t *testing.T) { testReplacedClient(t, tc.finish) })
	}
}

func testReplacedClient(t *testing.T, finish func(*Producer[[]byte, []byte], context.Context) error) {
	seeds := fakeSeeds(t, 1)
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	// Records stay buffered until a flush; one too large fails at once.
	var held atomic.Int32
	old, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ManualFlushing(), kgo.ProducerBatchMaxBytes(1000),
		kgo.WithHooks(holdClosed{release, &held}))
	require.NoError(t, err)
	w := settledWatch()
	var made atomic.Int32
	p := newProducer(old, Bytes(), Bytes()).withFollow(link.Producer{Watch: w, Clients: countedClients(seeds, &made)})
	defer p.Close(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 5
	var calls, failed atomic.Int32
	for range n {
		require.NoError(t, p.ProduceAsync(ctx, Record[[]byte, []byte]{Topic: "t", Value: []byte("small")},
			func(_ Result, err error) {
				if err != nil {
					failed.Add(1)
				}
				calls.Add(1)
			}))
	}
	w.gen.Add(1) // the cluster changed
	// The large record fails on the old client, which makes the producer
	// follow the change; it is sent again on the new client.
	_, err = p.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: make([]byte, 2000)})
	require.NoError(t, err)
	require.Equal(t, int32(1), made.Load())
	require.NotEqual(t, old, p.Kgo())

	finished := make(chan error, 1)
	go func() { finished <- finish(p, ctx) }()
	select {
	case err = <-finished: // too early, unless every callback ran
	case <-time.After(300 * time.Millisecond): // it waits: let the old client go on
		free()
		err = <-finished
	}
	got, passed := calls.Load(), held.Load()
	free()
	require.NoError(t, err)
	require.Equal(t, int32(n), got, "returned before the old client's records were reported")
	require.Zero(t, failed.Load(), "they were sent again on the new client")
	require.Equal(t, int32(n), passed, "returned before the old client had failed its records")
}

// TestInconsistentAttributedToItsPartition: a record is reported as failed
// because of INCONSISTENT_METADATA only when its own partition was answered
// so while it was in flight; an answer for another partition leaves a
// genuine NOT_ENOUGH_REPLICAS as it is.
func TestInconsistentAttributedToItsPartition(t *testing.T) {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	require.NoError(t, err)
	defer kc.Close()
	var marks wire.ProduceMarks
	var markPartition atomic.Int32 // the partition an answer is INCONSISTENT_METADATA for
	kc.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		req := kreq.(*kmsg.ProduceRequest)
		resp := req.ResponseKind().(*kmsg.ProduceResponse)
		// What the wire layer does with such an answer: note the
		// partition, hand kgo NOT_ENOUGH_REPLICAS.
		marks.Mark("t", markPartition.Load())
		for _, rt := range req.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.NotEnoughReplicas.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...), kgo.RecordRetries(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	p := newProducer(cl, String(), String()).withFollow(link.Producer{Marks: &marks})
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	markPartition.Store(1) // a stale broker for partition 1 only
	_, err = p.Produce(ctx, Record[string, string]{Topic: "t", Partition: 0, Value: "v"})
	require.ErrorIs(t, err, kerr.NotEnoughReplicas)
	require.NotErrorIs(t, err, consistency.ErrInconsistentMetadata, "partition 0's error is its own")

	markPartition.Store(0) // now partition 0's answers are the stale ones
	_, err = p.Produce(ctx, Record[string, string]{Topic: "t", Partition: 0, Value: "v"})
	require.ErrorIs(t, err, consistency.ErrInconsistentMetadata)
	require.ErrorIs(t, err, kerr.NotEnoughReplicas)
}
