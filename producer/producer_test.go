package producer

import (
	"context"
	"reflect"
	"strconv"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
)

// slowWatch is a clusterWatch whose verdict comes when the test says so.
type slowWatch struct {
	release chan struct{}
	gen     atomic.Uint64
}

func (w *slowWatch) Generation() uint64 { return w.gen.Load() }
func (w *slowWatch) Settle(ctx context.Context) uint64 {
	select {
	case <-w.release:
	case <-ctx.Done():
	}
	return w.gen.Load()
}
func (w *slowWatch) Check(bool)                      {}
func (w *slowWatch) OnChange(func()) (cancel func()) { return func() {} }

// settledWatch is a slowWatch whose verdicts come at once.
func settledWatch() *slowWatch {
	w := &slowWatch{release: make(chan struct{})}
	close(w.release)
	return w
}

// fakeSeeds starts a kfake cluster of n brokers with topic "t" of n
// partitions, closed when the test ends, and returns its addresses.
func fakeSeeds(t *testing.T, n int) []string {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(n), kfake.SeedTopics(int32(n), "t"))
	require.NoError(t, err)
	t.Cleanup(kc.Close)
	return kc.ListenAddrs()
}

// TestFlushWaitsForFailedRecords: a record that failed waits for the cluster
// verdict before its callback runs; Flush and Close return only after it
// ran, and a cluster change seen after Close makes no new client. The
// record fails in the client before any dial (larger than the client may
// buffer), so the test runs in a synctest bubble: synctest.Wait returns
// once Close can go no further without the verdict, which proves it waits
// for it rather than sampling a wall-clock window.
func TestFlushWaitsForFailedRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		seeds := []string{"127.0.0.1:1"} // never dialled
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MaxBufferedBytes(1000))
		require.NoError(t, err)
		w := &slowWatch{release: make(chan struct{})}
		var newClients atomic.Int32
		p := newProducer(cl, Bytes(), Bytes()).withFollow(link.Producer{
			Watch:   w,
			Clients: countedClients(seeds, &newClients),
		})
		var calls atomic.Int32
		var got error
		require.NoError(t, p.ProduceAsync(context.Background(), Record[[]byte, []byte]{Topic: "t", Value: make([]byte, 2000)},
			func(_ Result, err error) { got = err; calls.Add(1) }))

		flushed := make(chan error, 1)
		go func() { flushed <- p.Close(context.Background()) }()
		synctest.Wait()
		select {
		case <-flushed:
			t.Fatal("Close returned before the failed record's callback ran")
		default:
		}
		require.Zero(t, calls.Load(), "the callback ran before the verdict")
		w.gen.Add(1) // a cluster change is seen meanwhile
		close(w.release)
		require.NoError(t, <-flushed)
		require.Equal(t, int32(1), calls.Load())
		require.Error(t, got)
		require.ErrorIs(t, got, kgo.ErrClientClosed, "the record is not sent again after Close")
		require.Zero(t, newClients.Load(), "no client is made after Close")
	})
}

type ctxKey struct{}

// bufferedHook records the context franz-go sees on each buffered record.
type bufferedHook struct{ seen chan any }

func (h bufferedHook) OnProduceRecordBuffered(r *kgo.Record) {
	h.seen <- r.Context.Value(ctxKey{})
}

// TestRecordContextIsCallers: franz-go sees the caller's context on the
// record (its values for hooks, its cancellation for a record that waits
// for its topic), as with plain kgo.Produce.
func TestRecordContextIsCallers(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	h := bufferedHook{seen: make(chan any, 2)}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithHooks(h))
	require.NoError(t, err)
	p := newProducer(cl, Bytes(), Bytes())
	defer p.Close(context.Background())

	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	res, err := p.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: []byte("x")})
	require.NoError(t, err)
	require.Equal(t, "t", res.Topic)
	require.Equal(t, "v", <-h.seen, "hooks see the caller's context values")

	// A topic that does not exist: franz-go holds the record until the
	// topic appears or the record's context ends.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	require.NoError(t, p.ProduceAsync(cctx, Record[[]byte, []byte]{Topic: "missing", Value: []byte("x")},
		func(_ Result, err error) { errc <- err }))
	require.Equal(t, "v", <-h.seen)
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the caller's context did not fail the waiting record")
	}
}

// spanHook does what tracing hooks (kotel) do: it derives a context from the
// record's and puts it on the record.
type spanHook struct{}

func (spanHook) OnProduceRecordBuffered(r *kgo.Record) {
	r.Context = context.WithValue(r.Context, ctxKey{}, "span")
}

// TestHookReplacesRecordContext: a hook that replaces a record's Context
// does not break the producer (records are acknowledged, callbacks run).
func TestHookReplacesRecordContext(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithHooks(spanHook{}))
	require.NoError(t, err)
	p := newProducer(cl, String(), String())
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 3 {
		res, err := p.Produce(ctx, Record[string, string]{Topic: "t", Value: "v"})
		require.NoError(t, err)
		require.Equal(t, "t", res.Topic)
	}
}

// cancelHook wraps a record's context when it is buffered and cancels what
// it wrapped when the record is unbuffered, which franz-go does before the
// promise runs.
type cancelHook struct{}

type cancelKey struct{}

func (cancelHook) OnProduceRecordBuffered(r *kgo.Record) {
	ctx, cancel := context.WithCancel(r.Context)
	r.Context = context.WithValue(ctx, cancelKey{}, cancel)
}

func (cancelHook) OnProduceRecordUnbuffered(r *kgo.Record, _ error) {
	if cancel, ok := r.Context.Value(cancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// TestFailureUsesCallersContext: after a failure, whether the record
// follows a cluster change depends on the caller's context, not on the one
// a hook left on the record (here cancelled by the hook itself).
func TestFailureUsesCallersContext(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchMaxBytes(1000), kgo.WithHooks(cancelHook{}))
	require.NoError(t, err)
	w := settledWatch()
	p := newProducer(cl, Bytes(), Bytes()).withFollow(link.Producer{
		Watch:   w,
		Clients: clientsFunc(func() (*kgo.Client, error) { return kgo.NewClient(kgo.SeedBrokers(seeds...)) }),
	})
	defer p.Close(context.Background())
	w.gen.Add(1) // the cluster changed: a failed record goes to a new client
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: make([]byte, 2000)})
	require.NoError(t, err, "too large for the first client, sent again on the new one")

	// Only clients whose hooks see records keep the caller's context apart.
	require.True(t, recordHooks(cl))
	bare, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer bare.Close()
	require.False(t, recordHooks(bare))
}

// seeHook checks, for each record a client buffers, that the record's
// Context is the caller's own, not the producer's record state, which a
// hook replacing the Context would lose (see send).
type seeHook struct{ kept, lost *atomic.Int32 }

func (h seeHook) OnProduceRecordBuffered(r *kgo.Record) {
	if _, state := refOf(r.Context); !state && r.Context.Value(callerKey{}) == "caller" {
		h.kept.Add(1)
	} else {
		h.lost.Add(1)
	}
}

type callerKey struct{}

// TestRecordMovesToHookedClient: a record made for a client without record
// hooks that fails and goes to a new client with such hooks carries the
// caller's context there, as hooks expect.
func TestRecordMovesToHookedClient(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchMaxBytes(1000))
	require.NoError(t, err)
	require.False(t, recordHooks(cl))
	var kept, lost atomic.Int32
	w := settledWatch()
	p := newProducer(cl, Bytes(), Bytes()).withFollow(link.Producer{
		Watch: w,
		Clients: clientsFunc(func() (*kgo.Client, error) {
			return kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.WithHooks(seeHook{&kept, &lost}))
		}),
	})
	defer p.Close(context.Background())
	w.gen.Add(1)
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callerKey{}, "caller"), 10*time.Second)
	defer cancel()
	_, err = p.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: make([]byte, 2000)})
	require.NoError(t, err, "too large for the first client, sent again on the new one")
	require.Equal(t, int32(1), kept.Load())
	require.Zero(t, lost.Load())
}

// TestInflightSize: a record's state is a kgo.Record and 16 bytes, the 176
// byte size class, one above the kgo.Record a franz-go caller allocates,
// whatever the caller's context (see inflight). A field more moves it to a
// larger class and costs every buffered record.
func TestInflightSize(t *testing.T) {
	rec := reflect.TypeFor[kgo.Record]().Size()
	require.Equal(t, rec+16, reflect.TypeFor[inflight]().Size())
	require.Equal(t, uintptr(176), reflect.TypeFor[inflight]().Size(), "a Go size class")
}

// TestInflightContext: the Context a record carries on a client without
// record hooks leads back to the record's state and answers as the
// caller's: values, deadline and cancellation included. Given to a client
// other than the one it was made for, it is tagged with that one.
func TestInflightContext(t *testing.T) {
	e := &engine{}
	c := &current{seq: 7}
	for _, ctx := range []context.Context{nil, context.Background()} {
		p := newMember(e, String(), String())
		e.cur.Store(&current{seq: 6})
		r, err := p.prepare(ctx, &Record[string, string]{Topic: "t"}, nil)
		require.NoError(t, err)
		require.Equal(t, context.Background(), r.ctx())
		got, ok := refOf(r.x.rec.Context)
		require.True(t, ok)
		require.Equal(t, r, got)
		require.Equal(t, uint32(6), got.x.client(), "made for the current client")
		e.prime(c, r)
		got, ok = refOf(r.x.rec.Context)
		require.True(t, ok)
		require.Equal(t, r, got)
		require.Equal(t, uint32(7), got.x.client(), "given to another")
		self := r.x.rec.Context
		_, has := self.Deadline()
		require.False(t, has)
		require.Nil(t, self.Done())
		require.NoError(t, self.Err())
		require.Nil(t, self.Value(ctxKey{}))
	}

	at := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.WithValue(context.Background(), ctxKey{}, "v"), at)
	r := newRef((&member{e: e}).tagFor(ctx, 7, 0, nil), nil, "t", nil, nil, nil, 0, time.Time{})
	e.prime(c, r)
	got, ok := refOf(r.x.rec.Context)
	require.True(t, ok)
	require.Equal(t, r, got)
	require.Same(t, r.x, got.x)
	self := r.x.rec.Context
	require.Equal(t, "v", self.Value(ctxKey{}))
	deadline, has := self.Deadline()
	require.True(t, has)
	require.True(t, deadline.Equal(at))
	require.NoError(t, self.Err())
	cancel()
	<-self.Done()
	require.ErrorIs(t, self.Err(), context.Canceled)
	require.ErrorIs(t, r.ctx().Err(), context.Canceled)

	_, ok = refOf(context.Background())
	require.False(t, ok, "a context of no record")
}

// sliceCtx is a context whose dynamic type panics when compared.
type sliceCtx struct {
	context.Context
	v []int
}

// TestPrimeKeepsTag: a record given to the client it was made for, at the
// clock it was made at, keeps the tag it got in its allocation (no store);
// a moved clock or client gives it a new one, and a resent record's own tag
// is updated in place.
func TestPrimeKeepsTag(t *testing.T) {
	var clock atomic.Uint64
	e := &engine{attr: attributor{clock: &clock}}
	e.cur.Store(&current{seq: 3})
	p := newMember(e, String(), String())
	mk := func() ref {
		r, err := p.prepare(context.Background(), &Record[string, string]{Topic: "t"}, nil)
		require.NoError(t, err)
		return r
	}
	r := mk()
	made := r.x.tag
	e.prime(e.cur.Load(), r)
	require.Same(t, made, r.x.tag, "the same client and clock")

	r = mk()
	clock.Add(1)
	e.prime(e.cur.Load(), r)
	require.NotSame(t, made, r.x.tag, "the clock moved")
	require.Equal(t, uint32(1), r.x.tag.inc0)

	r = mk()
	e.prime(&current{seq: 4}, r)
	require.Equal(t, uint32(4), r.x.client(), "another client")

	own := &tag{ctx: context.Background(), resent: true, m: &p.member}
	r = newRef(own, nil, "t", nil, nil, nil, 0, time.Time{})
	e.prime(&current{seq: 5}, r)
	require.Same(t, own, r.x.tag)
	require.Equal(t, uint32(5), own.seq)
}

// TestTagShared: records given one after another with the same context, to
// the same client, at the same INCONSISTENT_METADATA clock, share one tag,
// which costs nothing; any difference makes a new one. Contexts that cannot
// be compared are not.
func TestTagShared(t *testing.T) {
	e := &member{}
	ep := newEpoch(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := e.tagFor(ctx, 1, 0, ep)
	require.Same(t, a, e.tagFor(ctx, 1, 0, ep))
	require.Zero(t, testing.AllocsPerRun(100, func() { e.tagFor(ctx, 1, 0, ep) }))
	b := e.tagFor(ctx, 2, 0, ep)
	require.NotSame(t, a, b, "another client")
	require.Equal(t, uint32(2), b.seq)
	c := e.tagFor(ctx, 2, 5, ep)
	require.NotSame(t, b, c, "an INCONSISTENT_METADATA answer between")
	require.Equal(t, uint32(5), c.inc0)
	other, cancelOther := context.WithCancel(context.Background())
	defer cancelOther()
	d := e.tagFor(other, 2, 5, ep)
	require.NotSame(t, c, d, "another context")
	require.Same(t, other, d.ctx)

	bg := e.tagFor(context.Background(), 2, 5, ep)
	require.Same(t, bg, e.tagFor(context.Background(), 2, 5, ep))
	require.Zero(t, testing.AllocsPerRun(100, func() { e.tagFor(context.Background(), 2, 5, ep) }))

	f := e.tagFor(context.Background(), 2, 5, newEpoch(ep))
	require.NotSame(t, bg, f, "another epoch: a Flush began")

	s := sliceCtx{Context: ctx, v: []int{1}}
	require.NotPanics(t, func() {
		x := e.tagFor(s, 2, 5, ep)
		y := e.tagFor(s, 2, 5, ep)
		require.NotSame(t, x, y, "never compared, never shared")
	})
}

// TestUnhookedRecordCancelled: on a client without record hooks, whose
// records carry the producer's state as their Context, the caller's
// context still ends a record that waits for its topic.
func TestUnhookedRecordCancelled(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	require.False(t, recordHooks(cl))
	p := newProducer(cl, Bytes(), Bytes())
	defer p.Close(context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	require.NoError(t, p.ProduceAsync(ctx, Record[[]byte, []byte]{Topic: "missing", Value: []byte("x")},
		func(_ Result, err error) { errc <- err }))
	cancel()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the caller's context did not fail the waiting record")
	}
}

// TestHookedFailureWithoutChange: a record of a client with record hooks
// that fails while the cluster stays the same fails once, with its error,
// on the client it was given to (the layout bit is not part of the client
// number: were it, the record would look moved and be sent again forever).
func TestHookedFailureWithoutChange(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	var kept, lost atomic.Int32
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerBatchMaxBytes(1000), kgo.WithHooks(seeHook{&kept, &lost}))
	require.NoError(t, err)
	w := settledWatch()
	var made atomic.Int32
	p := newProducer(cl, Bytes(), Bytes()).withFollow(link.Producer{
		Watch:   w,
		Clients: countedClients(seeds, &made),
	})
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), callerKey{}, "caller"), 10*time.Second)
	defer cancel()
	_, err = p.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Value: make([]byte, 2000)})
	require.ErrorIs(t, err, kerr.MessageTooLarge)
	require.NoError(t, ctx.Err(), "failed at once, not when the context ended")
	require.Equal(t, int32(1), kept.Load()+lost.Load(), "given to franz-go once")
	require.Equal(t, int32(1), kept.Load())
	require.Zero(t, made.Load(), "no cluster change, no new client")
	require.Equal(t, p.Kgo(), cl)
}

// TestCallbacksGetTheirOwnRecord: many records in flight at once, over
// several partitions; each callback runs once, with the partition and
// offset where its own record landed (read back by offset). The promise
// finds a record's state from the *kgo.Record franz-go hands it back, so a
// mix-up there shows as a value under another record's offset.
func TestCallbacksGetTheirOwnRecord(t *testing.T) {
	seeds := fakeSeeds(t, 3)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ProducerLinger(0))
	require.NoError(t, err)
	p := newProducer(cl, String(), String())
	defer p.Close(context.Background())

	const n = 3000
	type landed struct {
		part  int32
		off   int64
		calls atomic.Int32
	}
	results := make([]landed, n)
	var failed atomic.Int32
	ctx := context.Background()
	for i := range n {
		require.NoError(t, p.ProduceAsync(ctx, Record[string, string]{Topic: "t", Key: strconv.Itoa(i), Value: strconv.Itoa(i)},
			func(r Result, err error) {
				if err != nil {
					failed.Add(1)
				}
				results[i].part, results[i].off = r.Partition, r.Offset
				results[i].calls.Add(1)
			}))
	}
	require.NoError(t, p.Flush(ctx))
	require.Zero(t, failed.Load())

	consumer, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer consumer.Close()
	at := map[[2]int64]string{}
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for len(at) < n && fctx.Err() == nil {
		consumer.PollFetches(fctx).EachRecord(func(r *kgo.Record) {
			at[[2]int64{int64(r.Partition), r.Offset}] = string(r.Value)
		})
	}
	require.Len(t, at, n)
	parts := map[int32]bool{}
	for i := range results {
		r := &results[i]
		require.Equal(t, int32(1), r.calls.Load(), "record %d: callback calls", i)
		require.Equal(t, strconv.Itoa(i), at[[2]int64{int64(r.part), r.off}], "record %d reported partition %d offset %d", i, r.part, r.off)
		parts[r.part] = true
	}
	require.Len(t, parts, 3, "records spread over the partitions")
}

// TestNilContext: a nil context means context.Background, as in franz-go.
func TestNilContext(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	p := newProducer(cl, String(), String())
	defer p.Close(context.Background())
	//lint:ignore SA1012 Produce must tolerate a nil context; this test passes one on purpose.
	_, err = p.Produce(nil, Record[string, string]{Topic: "t", Value: "v"})
	require.NoError(t, err)
}

// clientsFunc is a link.ClientMaker that calls itself.
type clientsFunc func() (*kgo.Client, error)

func (f clientsFunc) NewClient() (*kgo.Client, error) { return f() }

// countedClients makes plain clients of seeds for a producer that follows
// changes and counts them in n.
func countedClients(seeds []string, n *atomic.Int32) clientsFunc {
	return func() (*kgo.Client, error) {
		n.Add(1)
		return kgo.NewClient(kgo.SeedBrokers(seeds...))
	}
}

// TestByteSerializers: Bytes() keys and values reach the broker as they
// are, a nil one as null, and only Bytes() is skipped: another serializer
// of byte slices is still called.
func TestByteSerializers(t *testing.T) {
	seeds := fakeSeeds(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	prefixed := SerializerFunc[[]byte](func(_ string, v []byte) ([]byte, error) {
		return append([]byte("x-"), v...), nil
	})
	for _, p := range []*Producer[[]byte, []byte]{
		newProducer(mustClient(t, seeds), Bytes(), Bytes()),
		newProducer(mustClient(t, seeds), prefixed, Bytes()),
		newProducer(mustClient(t, seeds), Bytes(), prefixed),
	} {
		_, err := p.Produce(ctx, Record[[]byte, []byte]{Topic: "t", Key: []byte("k"), Value: []byte("v")})
		require.NoError(t, err)
		_, err = p.Produce(ctx, Record[[]byte, []byte]{Topic: "t"})
		require.NoError(t, err)
		require.NoError(t, p.Close(ctx))
	}
	// Only Bytes() itself is taken without a call: a serializer that
	// wraps it, or another type, is called.
	fast := newProducer(mustClient(t, seeds), Bytes(), prefixed)
	require.True(t, fast.rawKeys)
	require.False(t, fast.rawValues)
	require.NoError(t, fast.Close(ctx))
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	type kv struct{ k, v []byte }
	var got []kv
	for len(got) < 6 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, kv{r.Key, r.Value}) })
	}
	require.Equal(t, []kv{
		{[]byte("k"), []byte("v")}, {nil, nil},
		{[]byte("x-k"), []byte("v")}, {[]byte("x-"), nil},
		{[]byte("k"), []byte("x-v")}, {nil, []byte("x-")},
	}, got)
}

func mustClient(t *testing.T, seeds []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	return cl
}
