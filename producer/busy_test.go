package producer

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// busyCap is how many records each producing goroutine of the tests below
// gives the producer after Flush or Close began before it stops on its
// own: about ten times what one gives while a Flush or Close that ends
// runs (the test logs the figure), so a goroutine that reached it shows a
// Flush or Close that waited for records produced after it began.
const busyCap = 1_000_000

// busyWindow is how many records a producing goroutine of a Flush test has
// without their callback at most: it keeps the memory the test takes
// bounded, not the producing, which goes on as fast as outcomes come.
const busyWindow = 256

// busy counts what the goroutines of startBusy did.
type busy struct {
	capped            atomic.Int32
	most              atomic.Int64 // the most records a goroutine gave after started
	given, called     atomic.Int64
	refused, otherErr atomic.Int64
	firstOther        atomic.Pointer[error]
	wg                sync.WaitGroup
}

// startBusy runs n goroutines that produce to topic "t" through p until
// stop is closed or each gave busyCap records after started was closed,
// each with at most window records without their callback (0: no limit;
// the goroutine ends before every callback ran).
func startBusy(p *Producer[[]byte, []byte], n, window int, started, stop <-chan struct{}) *busy {
	b := &busy{}
	value := []byte("v")
	for range n {
		b.wg.Go(func() {
			var slots chan struct{}
			if window > 0 {
				slots = make(chan struct{}, window)
				defer func() { // every callback ran before the goroutine ends
					for range window {
						slots <- struct{}{}
					}
				}()
			}
			after := 0
			for after < busyCap {
				if slots != nil {
					select {
					case <-stop:
						return
					case slots <- struct{}{}:
					}
				} else {
					select {
					case <-stop:
						return
					default:
					}
				}
				select {
				case <-started:
					after++
					if m := b.most.Load(); int64(after) > m {
						b.most.CompareAndSwap(m, int64(after))
					}
				default:
				}
				b.given.Add(1)
				err := p.ProduceAsync(context.Background(), Record[[]byte, []byte]{Topic: "t", Value: value}, func(_ Result, err error) {
					switch {
					case err == nil:
					case kgoClosed(err):
						b.refused.Add(1)
					default:
						b.otherErr.Add(1)
						b.firstOther.CompareAndSwap(nil, &err)
					}
					b.called.Add(1)
					if slots != nil {
						<-slots
					}
				})
				if err != nil {
					panic(err) // a serialization error: cannot happen with Bytes
				}
			}
			b.capped.Add(1)
		})
	}
	return b
}

// busyClient returns a client that buffers few records, so that what a
// Flush or Close waits for (the records given before it) is soon done.
func busyClient(t *testing.T, seeds []string) *kgo.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MaxBufferedRecords(100))
	require.NoError(t, err)
	return cl
}

func kgoClosed(err error) bool { return err != nil && errors.Is(err, kgo.ErrClientClosed) }

// TestCloseWhileOthersProduce: Close of a producer that other goroutines
// keep producing to returns once the records given before it are done; the
// records refused meanwhile fail with kgo.ErrClientClosed and are not
// waited for. (Before, every refused record joined what Close waited to
// drop to zero, so Close ran until its context ended or the producing
// stopped.)
func TestCloseWhileOthersProduce(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	p := newProducer(busyClient(t, seeds), Bytes(), Bytes())
	started, stop := make(chan struct{}), make(chan struct{})
	// Not paced: the goroutines produce as fast as they can, as a closed
	// producer refuses at once.
	b := startBusy(p, 4, 0, started, stop)
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	defer halt()

	// Some records acknowledged first: the producers are in full swing.
	first := make(chan error, 1)
	require.NoError(t, p.ProduceAsync(context.Background(), Record[[]byte, []byte]{Topic: "t", Value: []byte("first")},
		func(_ Result, err error) { first <- err }))
	require.NoError(t, <-first)

	// A deadline only for a failure to show as an error, not a hang.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	close(started)
	err := p.Close(ctx)
	capped := b.capped.Load()
	t.Logf("each goroutine gave at most %d records (of %d) after Close began and before it returned", b.most.Load(), busyCap)
	halt()
	b.wg.Wait()
	require.NoError(t, err)
	require.Zero(t, capped, "Close returned only after the producing goroutines stopped on their own")
	// Every record given had its callback: those given before Close
	// returned by then, the others at once, from their caller.
	require.Equal(t, b.given.Load(), b.called.Load(), "every record given got its callback")
	require.Positive(t, b.refused.Load(), "records given after Close are refused")
	if e := b.firstOther.Load(); e != nil {
		t.Fatalf("a record failed with something else than kgo.ErrClientClosed: %v", *e)
	}
}

// TestFlushWhileOthersProduce: Flush returns once the records produced
// before it are done, while other goroutines keep producing, and every
// record produced before it has had its callback.
func TestFlushWhileOthersProduce(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	p := newProducer(busyClient(t, seeds), Bytes(), Bytes())
	started, stop := make(chan struct{}), make(chan struct{})
	b := startBusy(p, 4, busyWindow, started, stop)
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	defer func() {
		halt()
		b.wg.Wait()
		require.NoError(t, p.Close(context.Background()))
	}()

	var before atomic.Int32
	const n = 100
	for range n {
		require.NoError(t, p.ProduceAsync(context.Background(), Record[[]byte, []byte]{Topic: "t", Value: []byte("before")},
			func(_ Result, err error) {
				if err == nil {
					before.Add(1)
				}
			}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	close(started)
	err := p.Flush(ctx)
	capped, got := b.capped.Load(), before.Load()
	t.Logf("each goroutine gave at most %d records (of %d) after Flush began and before it returned", b.most.Load(), busyCap)
	halt()
	require.NoError(t, err)
	require.Zero(t, capped, "Flush returned only after the producing goroutines stopped on their own")
	require.Equal(t, int32(n), got, "Flush returned before the records produced before it were acknowledged")
	b.wg.Wait()
	require.NoError(t, p.Flush(ctx))
	require.Equal(t, b.given.Load(), b.called.Load())
	require.Zero(t, b.otherErr.Load())
}
