package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/producer"
)

// misrouteConfig sizes the misroute recovery measurement.
type misrouteConfig struct {
	Trials  int // address moves per client (local cluster only)
	Repairs int // misroutes repaired after Hold, per client
	Hold    time.Duration
	Timeout time.Duration // per trial
	// Java adds the Apache Kafka 4.4 Java producer (a child JVM).
	Java bool
}

// Trial kinds.
const (
	kindMove   = "move"
	kindRepair = "repair"
)

// misrouteTrial is one address move or one repaired misroute.
type misrouteTrial struct {
	Kind string
	// Detect: the move or misroute → the wrong cluster answered this
	// client's ApiVersions with REBOOTSTRAP_REQUIRED (0: not seen).
	Detect time.Duration
	// Recovery: the move, or the repair of the route → the record
	// produced at the move or misroute acknowledged.
	Recovery time.Duration
	Failed   string
}

// misrouteResult is every trial of every client, and where the records
// ended up.
type misrouteResult struct {
	Clients  []string // in column order: factory, plain kgo, [Java]
	Trials   [][]misrouteTrial
	Right    []int64 // records cluster A holds in the client's topic
	Wrong    []int64 // records cluster B holds in it (must be 0)
	Produced []int64 // records acknowledged
}

// Client indexes in a misrouteResult.
const (
	mFactory = 0
	mPlain   = 1
	mJava    = 2
)

var misrouteNames = []string{"factory", "plain kgo", "Java 4.4 producer"}

// misrouteClientIDs tell the clients' connections apart at the forwarders.
var misrouteClientIDs = []string{"kconsist", "kgo", "java"}

// misrouteEnv is cluster A, reached through an address that can be handed
// to cluster B, and cluster B. Both have a topic per client.
type misrouteEnv interface {
	seed() string // A's own listener: the clients' bootstrap server
	// move gives A's broker a new address and its old one to B; false
	// when the environment cannot move a broker.
	move() (bool, error)
	misroute() // the address A advertises now reaches B
	repair()   // and A again
	count(ctx context.Context, right bool, topic string) (int64, error)
	watch() *rejections
	close()
}

// rejections notes, per client id, when B first refused a connection with
// REBOOTSTRAP_REQUIRED after mark.
type rejections struct {
	mu    sync.Mutex
	conns map[[2]uint64]string // forwarder, connection → client id
	since time.Time
	first map[string]time.Time
	trace *misrouteTrace // nil unless KCONSIST_MISROUTE_TRACE is set
}

func (r *rejections) observer(fw uint64) func(kafkatest.Frame) {
	return func(fr kafkatest.Frame) {
		key := [2]uint64{fw, fr.Conn}
		if r.trace != nil {
			r.trace.frame(r, fw, fr)
		}
		if fr.Request {
			if fr.ClientID != "" {
				r.mu.Lock()
				if _, ok := r.conns[key]; !ok {
					r.conns[key] = fr.ClientID
				}
				r.mu.Unlock()
			}
			return
		}
		if fr.Key != 18 {
			return
		}
		resp, err := fr.ApiVersionsResponse()
		if err != nil || resp.ErrorCode != kerr.RebootstrapRequired.Code {
			return
		}
		now := time.Now()
		r.mu.Lock()
		if id := r.conns[key]; !r.since.IsZero() && r.first[id].IsZero() {
			r.first[id] = now
		}
		r.mu.Unlock()
	}
}

func newRejections() *rejections {
	return &rejections{conns: map[[2]uint64]string{}, first: map[string]time.Time{}, trace: newMisrouteTrace()}
}

func (r *rejections) mark(t time.Time) {
	r.mu.Lock()
	r.since = t
	clear(r.first)
	r.mu.Unlock()
}

// after returns how long after the mark client id was first refused, or 0.
func (r *rejections) after(id string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if at := r.first[id]; !at.IsZero() {
		return at.Sub(r.since)
	}
	return 0
}

// movingListener makes kfake advertise an address that can change while it
// runs (kfake asks its listener for the address on every Metadata answer):
// the broker "moves" to a new address.
type movingListener struct {
	net.Listener
	adv *atomic.Pointer[net.TCPAddr]
}

func (l movingListener) Addr() net.Addr { return l.adv.Load() }

// localEnv is cluster A (kfake, one broker behind two forwarders) and
// cluster B (kfake). At any time one forwarder leads to A and is the
// address A advertises; a move switches A to the other forwarder and hands
// the old address to B.
type localEnv struct {
	a, b         *kfake.Cluster
	realA, realB string
	fw           [2]*kafkatest.Forwarder
	cur          int
	adv          atomic.Pointer[net.TCPAddr]
	rej          *rejections
}

func newLocalEnv(topics []string) (*localEnv, error) {
	e := &localEnv{rej: newRejections()}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	for i := range e.fw {
		fw, err := kafkatest.NewForwarder("")
		if err != nil {
			return nil, err
		}
		e.fw[i] = fw
		fw.Observe(e.rej.observer(uint64(i)))
	}
	adv, err := net.ResolveTCPAddr("tcp", e.fw[0].Addr())
	if err != nil {
		return nil, err
	}
	e.adv.Store(adv)
	e.a, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("bench-cluster-a"), kfake.SeedTopics(1, topics...),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			e.realA = ln.Addr().String()
			return movingListener{ln, &e.adv}, nil
		}))
	if err != nil {
		return nil, err
	}
	e.b, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("bench-cluster-b"), kfake.SeedTopics(1, topics...))
	if err != nil {
		return nil, err
	}
	e.realB = e.b.ListenAddrs()[0]
	e.fw[0].SetTarget(e.realA)
	ok = true
	return e, nil
}

func (e *localEnv) seed() string       { return e.realA }
func (e *localEnv) watch() *rejections { return e.rej }
func (e *localEnv) misroute()          { e.fw[e.cur].SetTarget(e.realB) }
func (e *localEnv) repair()            { e.fw[e.cur].SetTarget(e.realA) }
func (e *localEnv) move() (bool, error) {
	next := 1 - e.cur
	adv, err := net.ResolveTCPAddr("tcp", e.fw[next].Addr())
	if err != nil {
		return false, err
	}
	e.fw[next].SetTarget(e.realA)
	e.adv.Store(adv)
	e.fw[e.cur].SetTarget(e.realB) // closes every connection through it
	e.cur = next
	return true, nil
}

func (e *localEnv) count(ctx context.Context, right bool, topic string) (int64, error) {
	addr := e.realB
	if right {
		addr = e.realA
	}
	return endOffset(ctx, addr, topic)
}

func (e *localEnv) close() {
	for _, fw := range e.fw {
		if fw != nil {
			_ = fw.Close()
		}
	}
	if e.a != nil {
		e.a.Close()
	}
	if e.b != nil {
		e.b.Close()
	}
}

// kafkaEnv is two single-node Apache Kafka 4.4 clusters; A advertises its
// node at a forwarder, which a misroute hands to B's node (of the same id,
// 1). A real broker cannot change its advertised address while it runs,
// so there are no moves here.
type kafkaEnv struct {
	a, b         *kafkatest.Cluster
	realA, realB string
	fw           *kafkatest.Forwarder
	rej          *rejections
}

func newKafkaEnv(ctx context.Context, topics []string, logf func(string, ...any)) (*kafkaEnv, error) {
	e := &kafkaEnv{rej: newRejections()}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	var err error
	if e.fw, err = kafkatest.NewForwarder(""); err != nil {
		return nil, err
	}
	e.fw.Observe(e.rej.observer(0))
	t0 := time.Now()
	if e.a, err = kafkatest.StartCluster(ctx, kafkatest.AdvertisedAddr(1, e.fw.Addr())); err != nil {
		return nil, fmt.Errorf("misroute: cluster A: %w", err)
	}
	if e.b, err = kafkatest.StartCluster(ctx); err != nil {
		return nil, fmt.Errorf("misroute: cluster B: %w", err)
	}
	if e.realA, err = e.a.ListenerAddr(1); err != nil {
		return nil, err
	}
	if e.realB, err = e.b.ListenerAddr(1); err != nil {
		return nil, err
	}
	e.fw.SetTarget(e.realA)
	logf("misroute: Kafka clusters A (%s) and B (%s) ready in %v", e.a.ClusterID(), e.b.ClusterID(), time.Since(t0).Round(time.Millisecond))
	for _, addr := range []string{e.realA, e.realB} {
		if err := createTopics(ctx, addr, topics); err != nil {
			return nil, err
		}
	}
	ok = true
	return e, nil
}

func createTopics(ctx context.Context, addr string, topics []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return err
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("misroute: create topics on %s: %w", addr, err)
	}
	return nil
}

func (e *kafkaEnv) seed() string       { return e.realA }
func (e *kafkaEnv) watch() *rejections { return e.rej }
func (e *kafkaEnv) misroute()          { e.fw.SetTarget(e.realB) }
func (e *kafkaEnv) repair()            { e.fw.SetTarget(e.realA) }
func (e *kafkaEnv) move() (bool, error) {
	return false, nil
}

func (e *kafkaEnv) count(ctx context.Context, right bool, topic string) (int64, error) {
	addr := e.realB
	if right {
		addr = e.realA
	}
	return endOffset(ctx, addr, topic)
}

func (e *kafkaEnv) close() {
	if e.fw != nil {
		_ = e.fw.Close()
	}
	for _, c := range []*kafkatest.Cluster{e.a, e.b} {
		if c != nil {
			_ = c.Close()
		}
	}
}

func endOffset(ctx context.Context, addr, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return 0, fmt.Errorf("no offset for %s[0]", topic)
	}
	return o.Offset, o.Err
}

// misrouteClient is one benchmarked producer.
type misrouteClient struct {
	topic string
	send  func(ctx context.Context, done func(error))
	close func()
}

// misrouteTopic is client c's topic, in both clusters.
func misrouteTopic(c int) string { return "misroute-" + misrouteClientIDs[c] }

// runMisroute measures misroute recovery on the in-process clusters.
func runMisroute(ctx context.Context, cfg misrouteConfig, logf func(string, ...any)) (*misrouteResult, error) {
	env, err := newLocalEnv(misrouteTopics(cfg))
	if err != nil {
		return nil, err
	}
	defer env.close()
	return misrouteOn(ctx, env, cfg, logf)
}

// runMisrouteKafka measures misroute recovery on two single-node Apache
// Kafka 4.4 clusters, started here and stopped before it returns.
func runMisrouteKafka(ctx context.Context, cfg misrouteConfig, logf func(string, ...any)) (*misrouteResult, error) {
	cfg.Trials = 0 // no moves on real brokers
	env, err := newKafkaEnv(ctx, misrouteTopics(cfg), logf)
	if err != nil {
		return nil, err
	}
	defer env.close()
	return misrouteOn(ctx, env, cfg, logf)
}

func misrouteTopics(cfg misrouteConfig) []string {
	n := 2
	if cfg.Java {
		n = 3
	}
	topics := make([]string, n)
	for c := range topics {
		topics[c] = misrouteTopic(c)
	}
	return topics
}

// startMisrouteClients makes the factory producer, a plain kgo client and,
// with cfg.Java, the Java producer, all with their defaults, bootstrapping
// from seed.
func startMisrouteClients(ctx context.Context, seed string, cfg misrouteConfig) (clients []misrouteClient, err error) {
	defer func() {
		if err != nil {
			for _, c := range clients {
				c.close()
			}
			clients = nil
		}
	}()
	value := []byte("r")
	f, err := factory.New(append([]factory.Opt{factory.BootstrapServers(seed)}, misrouteTraceOpts()...)...)
	if err != nil {
		return nil, err
	}
	p, err := factory.NewProducer(f, producer.Bytes(), producer.Bytes())
	if err != nil {
		f.Close(context.Background())
		return nil, err
	}
	topic := misrouteTopic(mFactory)
	clients = append(clients, misrouteClient{topic: topic,
		send: func(ctx context.Context, done func(error)) {
			if err := p.ProduceAsync(ctx, producer.Record[[]byte, []byte]{Topic: topic, Value: value},
				func(_ producer.Result, err error) { done(err) }); err != nil {
				done(err)
			}
		},
		close: func() {
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = p.Close(cctx)
			f.Close(context.Background())
		}})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed))
	if err != nil {
		return clients, err
	}
	plainTopic := misrouteTopic(mPlain)
	clients = append(clients, misrouteClient{topic: plainTopic,
		send: func(ctx context.Context, done func(error)) {
			cl.Produce(ctx, &kgo.Record{Topic: plainTopic, Value: value}, func(_ *kgo.Record, err error) { done(err) })
		},
		close: cl.Close})
	if !cfg.Java {
		return clients, nil
	}
	j, err := startJavaProducer(ctx, seed, misrouteTopic(mJava))
	if err != nil {
		return clients, err
	}
	clients = append(clients, misrouteClient{topic: misrouteTopic(mJava),
		send:  func(_ context.Context, done func(error)) { j.send(done) },
		close: j.close})
	return clients, nil
}

// misrouteOn runs cfg's trials on env: per client, cfg.Trials moves (if env
// can move a broker) and cfg.Repairs misroutes repaired after cfg.Hold,
// the clients taking turns trial by trial in a rotating order. All clients
// share the clusters and the address: the idle ones are misrouted too, and
// find their way back untimed in the records before their next trial.
func misrouteOn(ctx context.Context, env misrouteEnv, cfg misrouteConfig, logf func(string, ...any)) (*misrouteResult, error) {
	clients, err := startMisrouteClients(ctx, env.seed(), cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	n := len(clients)
	res := &misrouteResult{Clients: misrouteNames[:n], Trials: make([][]misrouteTrial, n),
		Right: make([]int64, n), Wrong: make([]int64, n), Produced: make([]int64, n)}
	// produce sends one record and returns a channel of its outcome.
	produce := func(ctx context.Context, c int) <-chan error {
		ch := make(chan error, 1)
		clients[c].send(ctx, func(err error) {
			if err == nil {
				atomic.AddInt64(&res.Produced[c], 1)
			}
			ch <- err
		})
		return ch
	}
	wait := func(ctx context.Context, ch <-chan error) error {
		select {
		case err := <-ch:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var kinds []string
	for range cfg.Trials {
		kinds = append(kinds, kindMove)
	}
	for range cfg.Repairs {
		kinds = append(kinds, kindRepair)
	}
	rej := env.watch()
	for i, kind := range kinds {
		for k := range n {
			c := (i + k) % n
			tctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			tr, err := misrouteTrialOf(tctx, env, rej, kind, c, cfg, produce, wait)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("misroute %s trial %d (%s): %w", misrouteNames[c], i, kind, err)
			}
			res.Trials[c] = append(res.Trials[c], tr)
		}
	}
	for c := range n {
		if res.Right[c], err = env.count(ctx, true, clients[c].topic); err != nil {
			return nil, fmt.Errorf("misroute: count A: %w", err)
		}
		if res.Wrong[c], err = env.count(ctx, false, clients[c].topic); err != nil {
			return nil, fmt.Errorf("misroute: count B: %w", err)
		}
		for _, kind := range []string{kindMove, kindRepair} {
			if s := res.summary(c, kind); s.N > 0 {
				logf("misroute %s %s: recovery p50 %.0fms p99 %.0fms max %.0fms, failures %d, A %d/%d, B %d", misrouteNames[c], kind,
					s.P50, s.P99, s.Max, s.Failures, res.Right[c], res.Produced[c], res.Wrong[c])
			}
		}
	}
	return res, nil
}

// misrouteTrialOf runs one trial of client c. An error ends the run; a
// record that fails or times out is the trial's failure.
func misrouteTrialOf(ctx context.Context, env misrouteEnv, rej *rejections, kind string, c int, cfg misrouteConfig,
	produce func(context.Context, int) <-chan error, wait func(context.Context, <-chan error) error) (misrouteTrial, error) {
	tr := misrouteTrial{Kind: kind}
	// Steady state first: the client knows A at its current address.
	for range 3 {
		if err := wait(ctx, produce(ctx, c)); err != nil {
			return tr, fmt.Errorf("before the %s: %w", kind, err)
		}
	}
	t0 := time.Now()
	rej.mark(t0)
	rej.trace.start(misrouteClientIDs[c], t0)
	var from time.Time
	defer func() { rej.trace.end(kind, tr, from.Sub(t0)) }()
	switch kind {
	case kindMove:
		if ok, err := env.move(); err != nil || !ok {
			return tr, errors.Join(err, errors.New("this cluster cannot move a broker"))
		}
		from = time.Now()
	case kindRepair:
		env.misroute()
		ch := produce(ctx, c)
		select {
		case err := <-ch:
			if err == nil {
				err = errors.New("acknowledged while misrouted")
			}
			env.repair()
			tr.Failed = short(err)
			return tr, nil
		case <-time.After(cfg.Hold):
		case <-ctx.Done():
			env.repair()
			return tr, ctx.Err()
		}
		env.repair()
		from = time.Now()
		if err := wait(ctx, ch); err != nil {
			tr.Failed = short(err)
		} else {
			tr.Recovery = time.Since(from)
		}
		tr.Detect = rej.after(misrouteClientIDs[c])
		return tr, nil
	}
	if err := wait(ctx, produce(ctx, c)); err != nil {
		tr.Failed = short(err)
	} else {
		tr.Recovery = time.Since(from)
	}
	tr.Detect = rej.after(misrouteClientIDs[c])
	return tr, nil
}

type misrouteSummary struct {
	N, Failures, Detected int
	P50, P99, Max         float64 // recovery, ms
	Mean                  float64
	DetectP50             float64
}

func (r *misrouteResult) summary(c int, kind string) misrouteSummary {
	s := misrouteSummary{}
	var rec, det []float64
	for _, tr := range r.Trials[c] {
		if tr.Kind != kind {
			continue
		}
		s.N++
		if tr.Failed != "" {
			s.Failures++
			continue
		}
		rec = append(rec, ms(tr.Recovery))
		if tr.Detect > 0 {
			s.Detected++
			det = append(det, ms(tr.Detect))
		}
	}
	s.P50, s.P99, s.Max = quantile(rec, 0.5), quantile(rec, 0.99), quantile(rec, 1)
	s.Mean = math.NaN()
	if len(rec) > 0 {
		var sum float64
		for _, x := range rec {
			sum += x
		}
		s.Mean = sum / float64(len(rec))
	}
	s.DetectP50 = quantile(det, 0.5)
	return s
}

// misrouteRatio is the factory's p50 and mean over client c's, as text.
func (r *misrouteResult) misrouteRatio(kind string, c int) string {
	if c >= len(r.Clients) {
		return "–"
	}
	f, o := r.summary(mFactory, kind), r.summary(c, kind)
	if f.N == 0 || o.N == 0 || o.P50 <= 0 || o.Mean <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f (mean %.2f)", f.P50/o.P50, f.Mean/o.Mean)
}

// misrouteMarkdown writes the setting and one row per client and kind of
// trial.
func misrouteMarkdown(w *bytes.Buffer, r *misrouteResult, cfg misrouteConfig, where string) {
	w.WriteString(where)
	fmt.Fprintf(w, "Repetitions: %d moves and %d repaired misroutes (held %v) per client, the clients taking turns trial by trial "+
		"in a rotating order, 3 acknowledged records before each trial; timeout %v per trial. Clients: %s, each with its "+
		"default settings.\n\n", cfg.Trials, cfg.Repairs, cfg.Hold, cfg.Timeout, strings.Join(r.Clients, ", "))
	fmt.Fprintf(w, "| client | trial | trials | recovery p50 ms | p99 ms | max ms | detect p50 ms (seen) | failures | records in A / acknowledged | records in B | factory / plain kgo, p50 | factory / Java, p50 | target |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, kind := range []string{kindMove, kindRepair} {
		for c := range r.Clients {
			s := r.summary(c, kind)
			if s.N == 0 {
				continue
			}
			target, vsPlain, vsJava := "–", "–", "–"
			if c == mFactory {
				vsPlain, vsJava = r.misrouteRatio(kind, mPlain), r.misrouteRatio(kind, mJava)
				ok := s.Failures == 0 && r.Wrong[c] == 0
				if len(r.Clients) > mJava && r.summary(mJava, kind).N > 0 {
					target = yesNo(ok && s.P50 <= r.summary(mJava, kind).P50) + " (p50 ≤ Java's)"
				} else {
					target = yesNo(ok && s.Max < 1000) + " (< 1 s)"
				}
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s (%d) | %d | %d / %d | %d | %s | %s | %s |\n", r.Clients[c], kind, s.N,
				f0(s.P50), f0(s.P99), f0(s.Max), f0(s.DetectP50), s.Detected, s.Failures, r.Right[c], r.Produced[c], r.Wrong[c],
				vsPlain, vsJava, target)
		}
	}
	fmt.Fprintln(w)
}

// localMisrouteWhere describes the in-process setting.
const localMisrouteWhere = "Where: cluster A (kfake, 1 broker, id `bench-cluster-a`) and cluster B (kfake, 1 broker, id " +
	"`bench-cluster-b`), both with a topic per client, and two `kafkatest.Forwarder`s F1, F2, shared by the clients. Each client " +
	"bootstraps from A's own address; A advertises F1 (→ A) for its broker, so produce traffic goes through F1. **A move**: A " +
	"starts advertising F2 (→ A) and F1 is switched to B, closing its connections — the broker got a new address and its old " +
	"one now belongs to a broker of another cluster. The next move swaps the roles of F1 and F2. Measured: from the move to " +
	"the acknowledgement of one record produced right after it (the client reconnects, learns the new address from the seed, " +
	"or first reaches B, is refused by the KIP-1242 check with REBOOTSTRAP_REQUIRED and rebootstraps). **A repaired " +
	"misroute**: the forwarder A advertises is switched to B (closing its connections), one record is produced, and after " +
	"the hold the forwarder is switched back to A. Measured: from the repair to that record's acknowledgement: how soon " +
	"after the route is right the client tries it again. *Detect*: from the move or misroute to B's REBOOTSTRAP_REQUIRED " +
	"answer to the client, as seen by the forwarder. After all trials the records are counted in both clusters.\n\n"

// kafkaMisrouteWhere describes the real-Kafka setting.
const kafkaMisrouteWhere = "Where: two single-node Apache Kafka 4.4 clusters A and B (combined broker+controller JVMs started " +
	"by `integration/kafkatest`), both with a topic per client. A advertises its node 1 at a `kafkatest.Forwarder`, which a " +
	"misroute switches to B's node 1 (closing its connections); the clients bootstrap from A's own listener. **A repaired " +
	"misroute**: the forwarder is switched to B, one record is produced, and after the hold the forwarder is switched back " +
	"to A. Measured: from the repair to that record's acknowledgement. A running Kafka broker cannot change its advertised " +
	"address, so there are no moves here. *Detect*: from the misroute to B's REBOOTSTRAP_REQUIRED answer to the client, as " +
	"seen by the forwarder. After all trials the records are counted in both clusters.\n\n"

// Sections of -misroute-only.
const (
	misrouteSection  = "misroute-local"
	kmisrouteSection = "misroute-realkafka"
)

// misrouteJavaStep returns the step of -misroute-only that runs misroute
// recovery with the Java producer: locally, or on real Kafka.
func misrouteJavaStep(real bool) func(context.Context, options, plan, machine) (string, error) {
	return func(ctx context.Context, o options, p plan, m machine) (string, error) {
		cfg, where, chartName, measure := p.misrouteJava, localMisrouteWhere, "misroute_local_java.png", runMisroute
		if real {
			cfg, where, chartName, measure = p.kmisroute, kafkaMisrouteWhere, "misroute_realkafka_java.png", runMisrouteKafka
		}
		t0 := time.Now()
		res, err := measure(ctx, cfg, o.Logf)
		if err != nil {
			return "", err
		}
		chart, err := misrouteChart(res, o.Charts, chartName)
		if err != nil {
			return "", err
		}
		var tables, body bytes.Buffer
		misrouteMarkdown(&tables, res, cfg, where)
		chartLinks(&tables, o.Out, []string{chart})
		header(&body, o, m, time.Since(t0))
		body.Write(tables.Bytes())
		return body.String(), nil
	}
}
