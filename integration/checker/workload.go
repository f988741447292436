package checker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/integration/localcluster"
)

// ConfigKey is the topic config the workload writes and reads.
const ConfigKey = "retention.ms"

// Config describes one run: one seed, one mode.
type Config struct {
	Seed uint64
	Mode Mode
	// Ops is the number of client operations (admin writes and reads,
	// produces) the workers run, spread over Goroutines; default 500.
	// Consumer polls come on top.
	Ops int
	// Goroutines run operations concurrently; default 4.
	Goroutines int
	// Admins is how many admin clients the workers share (default 2);
	// Producers how many producers (default one per goroutine, so a
	// produce request carries one topic: kfake panics on some produce
	// requests naming two topics it has deleted, see RESULTS.md). There
	// is one group consumer.
	Admins    int
	Producers int
	// LagMax bounds each broker's apply lag, drawn at start and redrawn
	// during the run; default 300ms.
	LagMax time.Duration
	// PauseMax bounds how long one broker stops applying at a time;
	// default LagMax. Zero LagMax means no pauses.
	PauseMax time.Duration
	// OpTimeout bounds each operation; default 10s.
	OpTimeout time.Duration
	// BypassAdminCache makes admin metadata reads (ListTopics and the
	// metadata step of ListEndOffsets) go to a broker every time, through
	// kadm.WithAuthorizedOps, instead of answering from franz-go's
	// per-client metadata cache (kept MetadataMinAge, 10ms here). The
	// cache knows no tokens: within that window it answers a read with
	// the state from before a write. Applies to both modes.
	BypassAdminCache bool
	// DataReadsDuringDelete lets ListEndOffsets and produces target a
	// topic whose delete is in flight. Off by default: the local cluster's
	// data plane (kfake) drops a topic as soon as it receives the delete,
	// before the RemoveTopicRecord is committed, so a broker can answer
	// UNKNOWN_TOPIC_OR_PARTITION under a header token that still shows the
	// topic, and a client's next metadata read shows it again (a
	// monotonic-reads violation no client token can prevent). See
	// RESULTS.md.
	DataReadsDuringDelete bool
	// DrainTimeout bounds how long the consumer may take, after the
	// workers end, to consume every acknowledged record; default 20s.
	DrainTimeout time.Duration

	// Kafka44 makes the local cluster's brokers behave like Apache Kafka
	// 4.4 (localcluster.Native(false)): no tokens in response headers,
	// only the applied offset in ApiVersions and the log's high watermark
	// in DescribeQuorum. The factory, in its default consistency mode
	// (auto), then makes its tokens from those (emulation). The brokers
	// lag and pause as in the default, KIP-1243 mode.
	Kafka44 bool
	// Addrs runs the workload on an existing cluster (a real Kafka, say)
	// instead of starting a local one. There is no chaos schedule there
	// (SetLag and PauseApply need the local cluster; real brokers lag by
	// themselves), and topic and group names carry the mode and seed, so
	// that several runs can share the cluster. Not with Kafka44.
	Addrs []string
	// ReplicationFactor of the topics the workload creates; default 1.
	ReplicationFactor int16
	// Cluster adds options to the local cluster's (after the checker's
	// own, so they win): the KIP-1243 variants a broker may show
	// (localcluster.ErrorMode, BehindAnswer, InconsistentTokenIs,
	// WriteAnswers, WaitMax). Not with Addrs.
	Cluster []localcluster.Opt
}

func (c *Config) defaults() error {
	if c.Mode == "" {
		c.Mode = ModeFactory
	}
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	if c.Ops == 0 {
		c.Ops = 500
	}
	if c.Goroutines == 0 {
		c.Goroutines = 4
	}
	if c.Admins == 0 {
		c.Admins = 2
	}
	if c.Producers == 0 {
		c.Producers = c.Goroutines
	}
	if c.LagMax == 0 && c.PauseMax == 0 {
		c.LagMax = 300 * time.Millisecond
	}
	if c.PauseMax == 0 {
		c.PauseMax = c.LagMax
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 10 * time.Second
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = 20 * time.Second
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	switch {
	case len(c.Addrs) > 0 && c.Kafka44:
		return fmt.Errorf("checker: Kafka44 configures the local cluster, but Addrs names an existing one")
	case len(c.Addrs) > 0 && len(c.Cluster) > 0:
		return fmt.Errorf("checker: Cluster configures the local cluster, but Addrs names an existing one")
	case c.ReplicationFactor < 1:
		return fmt.Errorf("checker: ReplicationFactor %d: want ≥ 1", c.ReplicationFactor)
	case c.Ops < 0 || c.Goroutines < 1 || c.Admins < 1 || c.Producers < 1:
		return fmt.Errorf("checker: want Ops ≥ 0 and at least one goroutine, admin and producer")
	case c.LagMax < 0 || c.PauseMax < 0 || c.PauseMax > 2*time.Second:
		return fmt.Errorf("checker: want LagMax ≥ 0 and PauseMax in [0, 2s]")
	}
	return nil
}

// Result is one run: its history and the verdict.
type Result struct {
	Config  Config
	History History
	Report  Report
	// ClientOps counts the workers' operations (Config.Ops plus the setup
	// creates); Polls the consumer polls that returned records.
	ClientOps int
	Polls     int
	// LagChanges and Pauses count the chaos schedule's actions.
	LagChanges int
	Pauses     int
	// Elapsed is the whole run; Drain the part spent waiting for the
	// consumer after the workers ended.
	Elapsed time.Duration
	Drain   time.Duration
	// Token is the factory's token at the end (-1: none, and always in
	// ModePlain). On brokers without KIP-1243 a known token shows that
	// the factory made its own (emulation) instead of running plain.
	Token int64
}

// dataTopics are created first and never deleted: the group consumer
// subscribes to them, so every record acknowledged on them must come back.
var dataTopics = []struct {
	name       string
	partitions int32
}{{"data-0", 2}, {"data-1", 1}}

const (
	maxLiveChurn  = 5
	maxPartitions = 6
)

// Run runs the seeded workload with cfg.Mode clients and checks the
// history: on a 3-broker local cluster with random per-broker apply lag
// that it starts, or on the cluster at cfg.Addrs.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	began := time.Now()
	chaosRng := rand.New(rand.NewPCG(cfg.Seed, 0xc4a05))
	addrs, prefix := cfg.Addrs, ""
	var lc *localcluster.Cluster
	if len(addrs) == 0 {
		opts := []localcluster.Opt{localcluster.Brokers(3), localcluster.Native(!cfg.Kafka44)}
		for n := range int32(3) {
			opts = append(opts, localcluster.BrokerLag(n, randDur(chaosRng, cfg.LagMax)))
		}
		opts = append(opts, cfg.Cluster...)
		var err error
		if lc, err = localcluster.New(opts...); err != nil {
			return nil, err
		}
		defer lc.Close()
		addrs = lc.Addrs()
	} else {
		prefix = fmt.Sprintf("%s-s%d-", cfg.Mode, cfg.Seed)
	}

	subscribed := make([]string, len(dataTopics))
	for i, d := range dataTopics {
		subscribed[i] = prefix + d.name
	}
	cls, err := newClients(cfg.Mode, addrs, cfg.Admins, cfg.Producers, fmt.Sprintf("checker-%s%d", prefix, cfg.Seed), subscribed)
	if err != nil {
		return nil, err
	}
	defer cls.close()

	w := &workload{cfg: cfg, cls: cls, rec: &recorder{base: time.Now()}, model: newModel(), prefix: prefix}
	res := &Result{Config: cfg}

	// The group consumer polls from the start; the data topics are
	// created while it is looking for them.
	consCtx, stopConsumer := context.WithCancel(ctx)
	consDone := make(chan struct{})
	go func() { defer close(consDone); w.consume(consCtx) }()
	defer func() { stopConsumer(); <-consDone }()

	for _, d := range dataTopics {
		w.create(ctx, 0, 0, prefix+d.name, d.partitions, true)
	}

	chaosCtx, stopChaos := context.WithCancel(ctx)
	chaosDone := make(chan struct{})
	go func() {
		defer close(chaosDone)
		if lc != nil {
			res.LagChanges, res.Pauses = chaos(chaosCtx, lc, chaosRng, cfg)
		}
	}()

	var wg sync.WaitGroup
	for g := range cfg.Goroutines {
		n := cfg.Ops / cfg.Goroutines
		if g < cfg.Ops%cfg.Goroutines {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.worker(ctx, g, n)
		}()
	}
	wg.Wait()
	stopChaos()
	<-chaosDone

	// Drain: the consumer gets DrainTimeout to consume every record
	// acknowledged on a data topic.
	want := w.ackedOnData()
	drainStart := time.Now()
	drainCtx, cancel := context.WithTimeout(ctx, cfg.DrainTimeout)
	for drainCtx.Err() == nil && !w.consumedAll(want) {
		select {
		case <-drainCtx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	res.Drain = time.Since(drainStart)
	stopConsumer()
	<-consDone
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	h := History{Seed: cfg.Seed, Mode: cfg.Mode, Ops: w.rec.sorted(), Subscribed: subscribed, Drained: true}
	for _, op := range h.Ops {
		if op.Kind == Consume {
			res.Polls++
		} else {
			res.ClientOps++
		}
	}
	res.History = h
	res.Token = cls.token()
	res.Report = Check(h)
	res.Elapsed = time.Since(began)
	return res, nil
}

func randDur(r *rand.Rand, max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	return time.Duration(r.Int64N(int64(max) + 1))
}

// chaos redraws broker lags and pauses one broker at a time, briefly,
// until ctx ends; every broker applies again when it returns.
func chaos(ctx context.Context, lc *localcluster.Cluster, r *rand.Rand, cfg Config) (lagChanges, pauses int) {
	defer func() {
		for n := range int32(3) {
			_ = lc.ResumeApply(n)
		}
	}()
	sleep := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		if !sleep(50*time.Millisecond + randDur(r, 250*time.Millisecond)) {
			return
		}
		node := int32(r.IntN(3))
		if cfg.PauseMax > 0 && r.IntN(8) == 0 {
			d := 20*time.Millisecond + randDur(r, cfg.PauseMax-min(cfg.PauseMax, 20*time.Millisecond))
			_ = lc.PauseApply(node)
			pauses++
			ok := sleep(d)
			_ = lc.ResumeApply(node)
			if !ok {
				return
			}
			continue
		}
		_ = lc.SetLag(node, randDur(r, cfg.LagMax))
		lagChanges++
	}
}

// recorder collects operations from every goroutine.
type recorder struct {
	base time.Time
	mu   sync.Mutex
	ops  []Op
}

func (r *recorder) now() time.Duration { return time.Since(r.base) }

func (r *recorder) add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// sorted returns the history in start order, with ids in that order.
func (r *recorder) sorted() []Op {
	r.mu.Lock()
	ops := append([]Op(nil), r.ops...)
	r.mu.Unlock()
	sort.SliceStable(ops, func(a, b int) bool { return ops[a].Start < ops[b].Start })
	for i := range ops {
		ops[i].ID = i + 1
	}
	return ops
}

// model is what the workload knows of its topics from its own completed
// writes; it only steers the choice of operations, the checker never
// trusts it.
type model struct {
	mu       sync.Mutex
	topics   map[string]*topicModel
	names    []string
	next     int
	configs  int
	consumed map[string]int
}

type topicModel struct {
	data       bool
	live       bool // created (and not deleted) as far as the workload knows
	busy       bool // a write is in flight
	retired    bool // a write ended without an answer: no more writes
	deleting   bool // a delete is in flight
	partitions int32
}

func newModel() *model {
	return &model{topics: map[string]*topicModel{}, consumed: map[string]int{}}
}

type workload struct {
	cfg    Config
	cls    *clients
	rec    *recorder
	model  *model
	prefix string // of every topic name (empty on a local cluster)
}

func (w *workload) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.cfg.OpTimeout)
}

// readCtx is opCtx for admin reads that go through kadm's metadata cache.
func (w *workload) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.cfg.BypassAdminCache {
		ctx = kadm.WithAuthorizedOps(ctx)
	}
	return w.opCtx(ctx)
}

// finish stamps op's end, outcome and token and records it.
func (w *workload) finish(op Op, err error) Op {
	op.End = w.rec.now()
	op.Token = w.cls.token()
	if err != nil {
		op.Err = err.Error()
		if op.Outcome == OK {
			op.Outcome = Unknown
		}
	}
	w.rec.add(op)
	return op
}

// writeErr classifies a write's error: every error leaves the write's
// outcome unknown (a retried create may say TOPIC_ALREADY_EXISTS after
// succeeding), which the checker handles by not judging the topic after.
func writeErr(err, topicErr error) error {
	if err != nil {
		return err
	}
	return topicErr
}

func (w *workload) worker(ctx context.Context, g, n int) {
	r := rand.New(rand.NewPCG(w.cfg.Seed, uint64(g)+1))
	for i := range n {
		if ctx.Err() != nil {
			return
		}
		adm := r.IntN(len(w.cls.admins))
		switch x := r.IntN(100); {
		case x < 8:
			if !w.createChurn(ctx, g, adm, r) {
				w.listTopics(ctx, g, adm, r)
			}
		case x < 13:
			if !w.delete(ctx, g, adm, r) {
				w.listTopics(ctx, g, adm, r)
			}
		case x < 20:
			if !w.addPartitions(ctx, g, adm, r) {
				w.listTopics(ctx, g, adm, r)
			}
		case x < 28:
			if !w.alter(ctx, g, adm, r) {
				w.listTopics(ctx, g, adm, r)
			}
		case x < 48:
			w.listTopics(ctx, g, adm, r)
		case x < 60:
			w.describeConfigs(ctx, g, adm, r)
		case x < 72:
			w.listEnds(ctx, g, adm, r)
		default:
			w.produce(ctx, g, g%len(w.cls.producers), r, i)
		}
	}
}

// claim picks a topic for a write among those pass accepts and marks it
// busy; the caller must release it.
func (w *workload) claim(r *rand.Rand, pass func(*topicModel) bool) (string, *topicModel, bool) {
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	var cands []string
	for _, name := range w.model.names {
		t := w.model.topics[name]
		if t.live && !t.busy && !t.retired && pass(t) {
			cands = append(cands, name)
		}
	}
	if len(cands) == 0 {
		return "", nil, false
	}
	name := cands[r.IntN(len(cands))]
	t := w.model.topics[name]
	t.busy = true
	return name, t, true
}

func (w *workload) release(t *topicModel, outcome Outcome, apply func()) {
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	t.busy, t.deleting = false, false
	switch outcome {
	case OK:
		apply()
	case Unknown:
		t.retired = true
	}
}

func (w *workload) nextConfig() string {
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	w.model.configs++
	return fmt.Sprint(3_600_000 + w.model.configs)
}

func (w *workload) createChurn(ctx context.Context, g, adm int, r *rand.Rand) bool {
	w.model.mu.Lock()
	live := 0
	for _, t := range w.model.topics {
		if !t.data && (t.live || t.busy) {
			live++
		}
	}
	if live >= maxLiveChurn {
		w.model.mu.Unlock()
		return false
	}
	name := fmt.Sprintf("%st%03d", w.prefix, w.model.next)
	w.model.next++
	w.model.mu.Unlock()
	w.create(ctx, g, adm, name, 1+int32(r.IntN(3)), false)
	return true
}

func (w *workload) create(ctx context.Context, g, adm int, name string, partitions int32, data bool) {
	cfgVal := w.nextConfig()
	t := &topicModel{data: data, busy: true}
	w.model.mu.Lock()
	w.model.topics[name] = t
	w.model.names = append(w.model.names, name)
	w.model.mu.Unlock()

	op := Op{Kind: CreateTopic, Client: fmt.Sprintf("admin-%d", adm), Goroutine: g, Topic: name, Partitions: partitions, Config: cfgVal}
	cctx, cancel := w.opCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	resp, err := w.cls.admins[adm].CreateTopic(cctx, partitions, w.cfg.ReplicationFactor, map[string]*string{ConfigKey: &cfgVal}, name)
	op = w.finish(op, writeErr(err, resp.Err))
	w.release(t, op.Outcome, func() { t.live, t.partitions = true, partitions })
}

func (w *workload) delete(ctx context.Context, g, adm int, r *rand.Rand) bool {
	name, t, ok := w.claim(r, func(t *topicModel) bool { return !t.data })
	if !ok {
		return false
	}
	w.model.mu.Lock()
	t.deleting = true
	w.model.mu.Unlock()
	op := Op{Kind: DeleteTopic, Client: fmt.Sprintf("admin-%d", adm), Goroutine: g, Topic: name}
	cctx, cancel := w.opCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	resp, err := w.cls.admins[adm].DeleteTopic(cctx, name)
	op = w.finish(op, writeErr(err, resp.Err))
	w.release(t, op.Outcome, func() { t.live = false })
	return true
}

func (w *workload) addPartitions(ctx context.Context, g, adm int, r *rand.Rand) bool {
	name, t, ok := w.claim(r, func(t *topicModel) bool { return t.partitions < maxPartitions })
	if !ok {
		return false
	}
	w.model.mu.Lock()
	to := t.partitions + 1
	w.model.mu.Unlock()
	op := Op{Kind: CreatePartitions, Client: fmt.Sprintf("admin-%d", adm), Goroutine: g, Topic: name, Partitions: to}
	cctx, cancel := w.opCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	resps, err := w.cls.admins[adm].UpdatePartitions(cctx, int(to), name)
	var topicErr error
	if err == nil {
		resp, ok := resps[name]
		if !ok {
			topicErr = errors.New("no answer for the topic")
		}
		topicErr = errors.Join(topicErr, resp.Err)
	}
	op = w.finish(op, writeErr(err, topicErr))
	w.release(t, op.Outcome, func() { t.partitions = to })
	return true
}

func (w *workload) alter(ctx context.Context, g, adm int, r *rand.Rand) bool {
	name, t, ok := w.claim(r, func(*topicModel) bool { return true })
	if !ok {
		return false
	}
	v := w.nextConfig()
	op := Op{Kind: AlterConfig, Client: fmt.Sprintf("admin-%d", adm), Goroutine: g, Topic: name, Config: v}
	cctx, cancel := w.opCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	resps, err := w.cls.admins[adm].AlterTopicConfigs(cctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: ConfigKey, Value: &v}}, name)
	var topicErr error
	if err == nil {
		topicErr = errors.New("no answer for the topic")
		for _, resp := range resps {
			if resp.Name == name {
				topicErr = resp.Err
			}
		}
	}
	op = w.finish(op, writeErr(err, topicErr))
	w.release(t, op.Outcome, func() {})
	return true
}

// readTargets picks 1 to 3 topic names, mostly among the newest (where
// staleness shows). Reads served by the data plane skip topics being
// deleted unless Config.DataReadsDuringDelete.
func (w *workload) readTargets(r *rand.Rand, dataPlane bool) []string {
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	names := w.model.names
	if dataPlane && !w.cfg.DataReadsDuringDelete {
		names = nil
		for _, name := range w.model.names {
			if !w.model.topics[name].deleting {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	n := 1 + r.IntN(3)
	var out []string
	seen := map[string]bool{}
	for range n {
		var name string
		if r.IntN(5) == 0 {
			name = names[r.IntN(len(names))]
		} else {
			recent := names[max(0, len(names)-6):]
			name = recent[r.IntN(len(recent))]
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return out
}

func (w *workload) allNames() []string {
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	return append([]string(nil), w.model.names...)
}

func isUnknownTopic(err error) bool { return errors.Is(err, kerr.UnknownTopicOrPartition) }

func (w *workload) listTopics(ctx context.Context, g, adm int, r *rand.Rand) {
	var names []string
	if r.IntN(2) == 0 {
		names = w.readTargets(r, false)
	}
	op := Op{Kind: ListTopics, Client: fmt.Sprintf("admin-%d", adm), Goroutine: g}
	cctx, cancel := w.readCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	tds, err := w.cls.admins[adm].ListTopics(cctx, names...)
	if err == nil {
		if len(names) == 0 {
			names = w.allNames() // every topic the run knows; missing ones are absent
		}
		for _, name := range names {
			td, ok := tds[name]
			switch {
			case !ok || isUnknownTopic(td.Err):
				op.Views = append(op.Views, View{Topic: name, State: Absent})
			case td.Err == nil:
				op.Views = append(op.Views, View{Topic: name, State: Present, Partitions: int32(len(td.Partitions))})
			}
		}
	}
	w.finish(op, err)
}

func (w *workload) describeConfigs(ctx context.Context, g, adm int, r *rand.Rand) {
	names := w.readTargets(r, false)
	if len(names) == 0 {
		w.listTopics(ctx, g, adm, r)
		return
	}
	op := Op{Kind: DescribeConfigs, Client: fmt.Sprintf("admin-%d", adm), Goroutine: g}
	cctx, cancel := w.opCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	rcs, err := w.cls.admins[adm].DescribeTopicConfigs(cctx, names...)
	if err == nil {
		for _, rc := range rcs {
			switch {
			case isUnknownTopic(rc.Err):
				op.Views = append(op.Views, View{Topic: rc.Name, State: Absent})
			case rc.Err == nil:
				v := View{Topic: rc.Name, State: Present}
				for _, c := range rc.Configs {
					if c.Key == ConfigKey && c.Value != nil {
						v.Config, v.HasConfig = *c.Value, true
					}
				}
				op.Views = append(op.Views, v)
			}
		}
	}
	w.finish(op, err)
}

func (w *workload) listEnds(ctx context.Context, g, adm int, r *rand.Rand) {
	names := w.readTargets(r, true)
	if len(names) == 0 {
		w.listTopics(ctx, g, adm, r)
		return
	}
	op := Op{Kind: ListEndOffsets, Client: fmt.Sprintf("admin-%d", adm), Goroutine: g}
	cctx, cancel := w.readCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	listed, err := w.cls.admins[adm].ListEndOffsets(cctx, names...)
	if err == nil {
		for _, name := range names {
			ps, ok := listed[name]
			if !ok {
				op.Views = append(op.Views, View{Topic: name, State: Absent})
				continue
			}
			if p, ok := ps[-1]; ok {
				if isUnknownTopic(p.Err) {
					op.Views = append(op.Views, View{Topic: name, State: Absent})
				}
				continue
			}
			// The partitions come from kadm's metadata read; a partition
			// answered UNKNOWN_TOPIC_OR_PARTITION shows a broker that
			// does not have it yet.
			op.Views = append(op.Views, View{Topic: name, State: Present, Partitions: int32(len(ps))})
			parts := make([]int32, 0, len(ps))
			for p := range ps {
				parts = append(parts, p)
			}
			sort.Slice(parts, func(a, b int) bool { return parts[a] < parts[b] })
			for _, p := range parts {
				lo := ps[p]
				switch {
				case lo.Err == nil:
					op.Ends = append(op.Ends, EndOffset{Topic: name, Partition: p, Offset: lo.Offset})
				case isUnknownTopic(lo.Err):
					op.Views = append(op.Views, View{Topic: name, State: NotAbove, Partitions: p})
				}
			}
		}
	}
	w.finish(op, err)
}

// produce sends one record, mostly to a data topic, else to a live churn
// topic. The producer had to find the topic: success views it present,
// UNKNOWN_TOPIC_OR_PARTITION absent.
func (w *workload) produce(ctx context.Context, g, p int, r *rand.Rand, i int) {
	w.model.mu.Lock()
	var data, churn []string
	for _, name := range w.model.names {
		if t := w.model.topics[name]; t.live && (!t.deleting || w.cfg.DataReadsDuringDelete) {
			if t.data {
				data = append(data, name)
			} else {
				churn = append(churn, name)
			}
		}
	}
	w.model.mu.Unlock()
	var topic string
	switch {
	case len(data) > 0 && (len(churn) == 0 || r.IntN(10) < 7):
		topic = data[r.IntN(len(data))]
	case len(churn) > 0:
		topic = churn[r.IntN(len(churn))]
	default:
		w.listTopics(ctx, g, 0, r)
		return
	}
	key := fmt.Sprintf("s%d-g%d-%d", w.cfg.Seed, g, i)
	op := Op{Kind: Produce, Client: fmt.Sprintf("producer-%d", p), Goroutine: g, Topic: topic}
	cctx, cancel := w.opCtx(ctx)
	defer cancel()
	op.Start = w.rec.now()
	ref, err := w.cls.producers[p].produce(cctx, topic, key)
	op.Records = []RecordRef{ref}
	switch {
	case err == nil:
		op.Views = []View{{Topic: topic, State: Present}}
	case isUnknownTopic(err):
		op.Outcome = Failed
		op.Views = []View{{Topic: topic, State: Absent}}
	}
	if op.Outcome == Failed {
		// Keep the view: a refused produce is still an observation.
		op.End = w.rec.now()
		op.Token = w.cls.token()
		op.Err = err.Error()
		w.rec.add(op)
		return
	}
	w.finish(op, err)
}

// consume polls the group consumer until ctx ends, committing after each
// poll, and records every poll that returned records or an error.
func (w *workload) consume(ctx context.Context) {
	for ctx.Err() == nil {
		op := Op{Kind: Consume, Client: "consumer-0", Goroutine: -1}
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		op.Start = w.rec.now()
		recs, err := w.cls.consumer.poll(pctx)
		cancel()
		if len(recs) == 0 && err == nil {
			continue
		}
		op.Records = recs
		w.model.mu.Lock()
		for _, r := range recs {
			w.model.consumed[r.Key]++
		}
		w.model.mu.Unlock()
		w.finish(op, err)
		if len(recs) > 0 {
			cctx, cancel := context.WithTimeout(ctx, w.cfg.OpTimeout)
			_ = w.cls.consumer.commit(cctx)
			cancel()
		}
	}
}

func (w *workload) ackedOnData() []string {
	w.rec.mu.Lock()
	defer w.rec.mu.Unlock()
	var keys []string
	for _, op := range w.rec.ops {
		if op.Kind == Produce && op.Outcome == OK && len(op.Records) == 1 && w.isData(op.Records[0].Topic) {
			keys = append(keys, op.Records[0].Key)
		}
	}
	return keys
}

func (w *workload) isData(topic string) bool {
	for _, d := range dataTopics {
		if w.prefix+d.name == topic {
			return true
		}
	}
	return false
}

func (w *workload) consumedAll(keys []string) bool {
	w.model.mu.Lock()
	defer w.model.mu.Unlock()
	for _, k := range keys {
		if w.model.consumed[k] == 0 {
			return false
		}
	}
	return true
}
