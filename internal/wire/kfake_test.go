package wire

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/testkit"
)

const testTopic = "t"

func newInterceptor(t testing.TB, cfg Config) *Interceptor {
	t.Helper()
	i, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

func newClient(t testing.TB, seeds []string, i *Interceptor, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...),
		kgo.Dialer(i.DialContext),
		kgo.RetryBackoffFn(func(int) time.Duration { return 20 * time.Millisecond }),
		// Every retriable produce error waits for a metadata refresh,
		// which MetadataMinAge (default 5s) rate-limits.
		kgo.MetadataMinAge(50 * time.Millisecond),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func produceN(t testing.TB, ctx context.Context, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for k := from; k < from+n; k++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%05d", k)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAll reads topic from the start until want records arrived and
// fails on duplicates.
func consumeAll(t testing.TB, ctx context.Context, seeds []string, i *Interceptor, topic string, want int, opts ...kgo.Opt) {
	t.Helper()
	cl := newClient(t, seeds, i, append([]kgo.Opt{kgo.ClientID("reader"), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)...)
	got := map[string]int{}
	total := 0
	for total < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", total, want, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Errorf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)]++
			total++
		})
	}
	for v, n := range got {
		if n != 1 {
			t.Fatalf("record %s consumed %d times", v, n)
		}
	}
	if len(got) != want {
		t.Fatalf("got %d distinct records, want %d", len(got), want)
	}
}

func TestKfakeTokensReachEveryRequest(t *testing.T) {
	sc := newSpyCluster(t, 3, kfake.SeedTopics(3, testTopic))
	var next atomic.Int64
	next.Store(100)
	// Every flexible response from a request of "writer" carries a newer
	// token; "reader" and "admin" only ever learn tokens from the store.
	sc.setHooks(spyHooks{token: func(clientID string, _ int16) (int64, bool) {
		if clientID != "writer" {
			return 0, false
		}
		return next.Add(1), true
	}})
	store := consistency.NewMemoryStore()
	rec := &recorder{}
	i := newInterceptor(t, Config{Store: store, Dial: sc.dial, Observer: rec})
	ctx := testkit.Ctx(t)

	writer := newClient(t, sc.seeds(), i, kgo.ClientID("writer"))
	produceN(t, ctx, writer, testTopic, 0, 30)
	if store.Load().IsUnknown() {
		t.Fatal("responses did not advance the store")
	}
	afterWrite := store.Load().Offset()

	admin := kadm.NewClient(newClient(t, sc.seeds(), i, kgo.ClientID("admin")))
	if _, err := admin.ListTopics(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTopics(ctx, 1, 1, nil, "t2"); err != nil {
		t.Fatal(err)
	}
	consumeAll(t, ctx, sc.seeds(), i, testTopic, 30)

	stamped := map[string]map[int16]bool{}
	for _, r := range sc.requests() {
		if r.hasState {
			if r.cluster != "kfake" || r.token < 100 {
				t.Fatalf("request carried %s@%d", r.cluster, r.token)
			}
			if stamped[r.clientID] == nil {
				stamped[r.clientID] = map[int16]bool{}
			}
			stamped[r.clientID][r.key] = true
		}
		if r.clientID != "writer" && r.hasState && r.token < afterWrite {
			t.Fatalf("%s sent %d, older than the shared store's %d", r.clientID, r.token, afterWrite)
		}
	}
	for _, want := range []struct {
		client string
		key    int16
	}{
		{"writer", 0},  // produce
		{"admin", 3},   // metadata (ListTopics)
		{"admin", 19},  // CreateTopics
		{"reader", 1},  // fetch
		{"reader", 3},  // metadata
		{"reader", 18}, // ApiVersions v3+ has a flexible request header
	} {
		if !stamped[want.client][want.key] {
			t.Errorf("%s never sent key %d with a token (stamped: %v)", want.client, want.key, stamped[want.client])
		}
	}
	// Tokens never go backwards: per connection, and in the store.
	for _, conn := range sc.perConn() {
		last := int64(-1)
		for _, r := range conn {
			if !r.hasState {
				if last >= 0 {
					t.Fatalf("conn of %s dropped its token after sending %d", r.clientID, last)
				}
				continue
			}
			if r.token < last {
				t.Fatalf("conn of %s went back from %d to %d", r.clientID, last, r.token)
			}
			last = r.token
		}
	}
	rec.mu.Lock()
	for _, a := range rec.advanced {
		if !a[0].IsUnknown() && a[1].Offset() <= a[0].Offset() {
			t.Errorf("advance %v -> %v", a[0], a[1])
		}
	}
	rec.mu.Unlock()
	if st := i.Stats(); st.RequestsStamped == 0 || st.TokensAdvanced == 0 || st.Misroutes != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestKfakeUnknownStoreSendsNoTag(t *testing.T) {
	sc := newSpyCluster(t, 1, kfake.SeedTopics(1, testTopic))
	store := consistency.NewMemoryStore()
	i := newInterceptor(t, Config{Store: store, Dial: sc.dial})
	ctx := testkit.Ctx(t)
	cl := newClient(t, sc.seeds(), i)
	produceN(t, ctx, cl, testTopic, 0, 5)
	consumeAll(t, ctx, sc.seeds(), i, testTopic, 5)
	if len(sc.requests()) == 0 {
		t.Fatal("spy saw nothing")
	}
	for _, r := range sc.requests() {
		if r.hasState {
			t.Fatalf("key %d carried a token while the store is Unknown", r.key)
		}
	}
	if !store.Load().IsUnknown() || i.Stats().RequestsStamped != 0 {
		t.Fatal("store or stats moved without tokens")
	}
}

// answerInconsistent returns a spy answer hook that answers requests of key
// with every error code set to code and a header token one below the one
// sent, times times (forever when times < 0).
func answerInconsistent(key int16, code int16, times int64) (func(int16, int16, []byte, int64) ([]byte, int64, bool), *atomic.Int64) {
	var answered atomic.Int64
	return func(k, version int16, body []byte, sent int64) ([]byte, int64, bool) {
		if k != key || sent <= 0 {
			return nil, 0, false
		}
		if times >= 0 && answered.Load() >= times {
			return nil, 0, false
		}
		req := kmsg.RequestForKey(k)
		req.SetVersion(version)
		if err := req.ReadFrom(body); err != nil {
			return nil, 0, false
		}
		var resp kmsg.Response
		switch r := req.(type) {
		case *kmsg.ProduceRequest:
			pr := r.ResponseKind().(*kmsg.ProduceResponse)
			for _, tp := range r.Topics {
				rt := kmsg.NewProduceResponseTopic()
				rt.Topic, rt.TopicID = tp.Topic, tp.TopicID
				for _, p := range tp.Partitions {
					rp := kmsg.NewProduceResponseTopicPartition()
					rp.Partition, rp.ErrorCode, rp.BaseOffset = p.Partition, code, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				pr.Topics = append(pr.Topics, rt)
			}
			resp = pr
		case *kmsg.CreateTopicsRequest:
			cr := r.ResponseKind().(*kmsg.CreateTopicsResponse)
			for _, tp := range r.Topics {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = tp.Topic, code
				cr.Topics = append(cr.Topics, rt)
			}
			resp = cr
		case *kmsg.FetchRequest:
			fr := r.ResponseKind().(*kmsg.FetchResponse)
			fr.ErrorCode = code
			resp = fr
		default:
			return nil, 0, false
		}
		resp.SetVersion(version)
		answered.Add(1)
		return resp.AppendTo(nil), sent - 1, true
	}, &answered
}

func TestKfakeInconsistentMetadataThenSuccess(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  int16
	}{
		{"produce", 0},
		{"fetch", 1},
		{"create topics", 19},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newSpyCluster(t, 1, kfake.SeedTopics(2, testTopic))
			const times = 3
			answer, answered := answerInconsistent(tc.key, DefaultInconsistentMetadataCode, times)
			sc.setHooks(spyHooks{answer: answer})
			store := consistency.NewMemoryStore()
			if _, err := store.Advance(consistency.MustOf("kfake", 10)); err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			i := newInterceptor(t, Config{Store: store, Dial: sc.dial, Observer: rec})
			ctx := testkit.Ctx(t)
			cl := newClient(t, sc.seeds(), i)
			switch tc.key {
			case 0, 1:
				produceN(t, ctx, cl, testTopic, 0, 40)
				consumeAll(t, ctx, sc.seeds(), i, testTopic, 40)
			case 19:
				res, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "t-new")
				if err != nil || res.Err != nil {
					t.Fatalf("create: %v %v", err, res.Err)
				}
			}
			if answered.Load() != times {
				t.Fatalf("spy answered %d times, want %d", answered.Load(), times)
			}
			if _, n, _ := rec.counts(); n != times || i.Stats().InconsistentMetadata != times {
				t.Fatalf("observed %d, counted %d, want %d", n, i.Stats().InconsistentMetadata, times)
			}
		})
	}
}

func TestKfakeInconsistentMetadataForever(t *testing.T) {
	t.Run("admin gets the typed error", func(t *testing.T) {
		sc := newSpyCluster(t, 1)
		answer, answered := answerInconsistent(19, DefaultInconsistentMetadataCode, -1)
		sc.setHooks(spyHooks{answer: answer})
		store := consistency.NewMemoryStore()
		if _, err := store.Advance(consistency.MustOf("kfake", 10)); err != nil {
			t.Fatal(err)
		}
		i := newInterceptor(t, Config{Store: store, Dial: sc.dial})
		cl := newClient(t, sc.seeds(), i, kgo.RequestRetries(3))
		_, err := kadm.NewClient(cl).CreateTopics(testkit.Ctx(t), 1, 1, nil, "never")
		if !errors.Is(err, consistency.ErrInconsistentMetadata) {
			t.Fatalf("err = %v, want ErrInconsistentMetadata", err)
		}
		if n := answered.Load(); n < 2 {
			t.Fatalf("only %d attempts before giving up", n)
		}
	})
	t.Run("produce fails after its record retries", func(t *testing.T) {
		sc := newSpyCluster(t, 1, kfake.SeedTopics(1, testTopic))
		answer, answered := answerInconsistent(0, DefaultInconsistentMetadataCode, -1)
		sc.setHooks(spyHooks{answer: answer})
		store := consistency.NewMemoryStore()
		if _, err := store.Advance(consistency.MustOf("kfake", 10)); err != nil {
			t.Fatal(err)
		}
		rec := &recorder{}
		i := newInterceptor(t, Config{Store: store, Dial: sc.dial, Observer: rec})
		cl := newClient(t, sc.seeds(), i, kgo.RecordRetries(3))
		err := cl.ProduceSync(testkit.Ctx(t), &kgo.Record{Topic: testTopic, Value: []byte("x")}).FirstErr()
		// kgo reports the code it was given; the producer wrapper turns it
		// into ErrInconsistentMetadata with the Observer's knowledge.
		if !errors.Is(err, kerr.NotEnoughReplicas) && !errors.Is(err, kgo.ErrRecordRetries) {
			t.Fatalf("err = %v", err)
		}
		if _, n, _ := rec.counts(); n < 3 || answered.Load() < 3 {
			t.Fatalf("observed %d answers of %d", n, answered.Load())
		}
	})
}

// TestKfakeInconsistentWithMessagesRetried, end to end: a broker answers
// DescribeConfigs for 50 topics once with INCONSISTENT_METADATA and an
// error message per topic, its header token the request's (it caught up
// by the time it answered, which the KIP allows). kadm gets every topic's
// configs: the answer was retried, not reported as UNKNOWN_SERVER_ERROR.
func TestKfakeInconsistentWithMessagesRetried(t *testing.T) {
	var topics []string
	for k := range 50 {
		topics = append(topics, fmt.Sprintf("t%d", k))
	}
	sc := newSpyCluster(t, 1, kfake.SeedTopics(1, topics...))
	var answered atomic.Int64
	msg := "The broker's cluster metadata is behind the client's consistency token; retry."
	sc.setHooks(spyHooks{answer: func(key, version int16, body []byte, sent int64) ([]byte, int64, bool) {
		if kmsg.Key(key) != kmsg.DescribeConfigs || sent <= 0 || answered.Load() >= 1 {
			return nil, 0, false
		}
		req := kmsg.NewPtrDescribeConfigsRequest()
		req.SetVersion(version)
		if err := req.ReadFrom(body); err != nil {
			return nil, 0, false
		}
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		for _, r := range req.Resources {
			rr := kmsg.NewDescribeConfigsResponseResource()
			rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = r.ResourceType, r.ResourceName, DefaultInconsistentMetadataCode, &msg
			resp.Resources = append(resp.Resources, rr)
		}
		resp.SetVersion(version)
		answered.Add(1)
		return resp.AppendTo(nil), sent, true
	}})
	store := consistency.NewMemoryStore()
	if _, err := store.Advance(consistency.MustOf("kfake", 10)); err != nil {
		t.Fatal(err)
	}
	i := newInterceptor(t, Config{Store: store, Dial: sc.dial})
	cl := newClient(t, sc.seeds(), i)
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(testkit.Ctx(t), topics...)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if answered.Load() != 1 {
		t.Fatalf("the broker answered INCONSISTENT_METADATA %d times, want 1: the test shows nothing", answered.Load())
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			t.Fatalf("%s: %v", rc.Name, rc.Err)
		}
	}
	if len(rcs) != len(topics) {
		t.Fatalf("%d topics described, want %d", len(rcs), len(topics))
	}
	if n := i.Stats().InconsistentMetadata; n != 1 {
		t.Fatalf("INCONSISTENT_METADATA answers counted: %d, want 1", n)
	}
}
