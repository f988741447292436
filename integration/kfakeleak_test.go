package integration

import (
	"context"
	"crypto/rand"
	"runtime"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestKfakeKeepsClosedClusterLog documents an upstream kfake bug and is
// written so that it can be sent upstream as it is: plain kfake and plain
// kgo, nothing of kconsist. A cluster that a consumer read from stays in
// memory after Close, with its whole log, for as long as the consumer's
// last Fetch would have been held.
//
// A consumer that has read everything sends its next Fetch at the end
// offset; kfake holds it (MinBytes not reached) by registering
// time.AfterFunc(MaxWait, w.cb) (01_fetch.go). w.cb refers to the Cluster
// and w.in to the partition's data. Cluster.Close closes the listeners and
// c.die but does not stop the timers of held fetches, so the runtime's
// timer heap keeps the cluster and its in-memory log (memFS files) reachable
// until each timer fires: up to the consumer's FetchMaxWait (kgo's default
// is 5s), after the cluster's goroutines have all exited. Group timers
// (afterFuncOnLoop) hold it the same way. A process that runs one cluster
// after another (kconsist's bench did) measures later clusters beside the
// logs of earlier ones.
//
// The test asserts what it measures:
//   - with a consumer whose FetchMaxWait is a minute, each of three closed
//     clusters keeps its log live (heap after two GCs grows by at least
//     half of each cluster's payload, and a weak pointer to each Cluster
//     still resolves) once no goroutine of theirs is left;
//   - with a FetchMaxWait of 1s the cluster is freed once that wait is
//     over, which shows it is the held fetch's timer that holds it;
//   - a cluster that was only written to is freed at Close.
//
// When kfake stops held fetches' timers in Close, the first part fails:
// turn it around then (the growth stays below a bound, the weak pointers
// are nil).
func TestKfakeKeepsClosedClusterLog(t *testing.T) {
	const (
		records = 8192
		size    = 1024 // random bytes, uncompressed: the log holds at least records × size
		payload = records * size
	)
	g0 := runtime.NumGoroutine()
	h0 := liveHeap()
	var held []weak.Pointer[kfake.Cluster]
	for i := range 3 {
		held = append(held, kfakeReadAndClose(t, records, size, true, time.Minute))
		waitGoroutines(t, g0)
		h := liveHeap()
		grown := int64(h) - int64(h0)
		t.Logf("after closed cluster %d: live heap %.1f MiB, %+.1f MiB since before the first (payload %.1f MiB per cluster)",
			i+1, mib(h), mib(grown), mib(payload))
		if grown < int64(i+1)*payload/2 {
			t.Errorf("after %d closed clusters the live heap grew by %.1f MiB, less than half their payload (%.1f MiB): kfake no longer keeps a closed cluster's log; turn this test around",
				i+1, mib(grown), mib(int64(i+1)*payload))
		}
	}
	for i, w := range held {
		if w.Value() == nil {
			t.Errorf("closed cluster %d was freed while its consumer's held fetch had most of a minute to wait", i+1)
		}
	}

	t.Run("freed once the held fetch's wait is over", func(t *testing.T) {
		w := kfakeReadAndClose(t, records, size, true, time.Second)
		// The timer fires after 1s; 30s is generous for a loaded machine.
		if !freedWithin(w, 30*time.Second) {
			t.Error("a closed cluster whose consumer's FetchMaxWait is 1s is still live after 30s")
		}
	})
	t.Run("a cluster only written to is freed at Close", func(t *testing.T) {
		w := kfakeReadAndClose(t, records, size, false, time.Minute)
		// No fetch was held: only the cluster's own goroutines, which end
		// at Close, had it. 30s is generous.
		if !freedWithin(w, 30*time.Second) {
			t.Error("a closed cluster that was never read from is still live after 30s")
		}
	})
}

// kfakeReadAndClose starts a one-broker kfake cluster, produces records of
// size random bytes to it with a plain kgo client and, if read, consumes
// them all with the same client (FetchMaxWait maxWait) and waits until the
// cluster got its next Fetch, at the end offset, which it holds. It closes
// client and cluster and returns a weak pointer to the cluster.
func kfakeReadAndClose(t *testing.T, records, size int, read bool, maxWait time.Duration) weak.Pointer[kfake.Cluster] {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	atEnd := make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Fetch), func(r kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range r.(*kmsg.FetchRequest).Topics {
			for _, p := range tp.Partitions {
				if p.FetchOffset >= int64(records) {
					once.Do(func() { close(atEnd) })
				}
			}
		}
		return nil, nil, false
	})
	opts := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("t"), kgo.ProducerBatchCompression(kgo.NoCompression())}
	if read {
		opts = append(opts, kgo.ConsumeTopics("t"), kgo.FetchMaxWait(maxWait), kgo.DisableFetchSessions())
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range records {
		v := make([]byte, size)
		_, _ = rand.Read(v)
		cl.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !read {
		return weak.Make(c)
	}
	for got := 0; got < records; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	select {
	case <-atEnd:
	case <-ctx.Done():
		t.Fatal("the consumer sent no Fetch at the end offset")
	}
	return weak.Make(c)
}

// liveHeap returns the heap in use after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// waitGoroutines waits (up to 30s, generous) until no more than n
// goroutines run: the closed cluster's and client's have exited.
func waitGoroutines(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); runtime.NumGoroutine() > n; {
		if time.Now().After(end) {
			t.Fatalf("%d goroutines still run after 30s, %d before the cluster", runtime.NumGoroutine(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freedWithin collects garbage until w no longer resolves, for at most d.
func freedWithin(w weak.Pointer[kfake.Cluster], d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		runtime.GC()
		if w.Value() == nil {
			return true
		}
	}
	return false
}

func mib[T int64 | uint64 | int](n T) float64 { return float64(n) / (1 << 20) }
