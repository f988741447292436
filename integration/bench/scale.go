package main

// The "How the cost grows" step (issue 42): the same comparisons as the
// other steps, factory against plain franz-go in the same run, but as
// curves over the numbers that grow in production: brokers, topics,
// producers per factory, record size.
//
// Requests are counted at the brokers: the local cluster's gateways count
// every request they read (localcluster.Stats().Requests). What the
// user-facing clients sent is counted by API key with a franz-go hook
// (factory.Hooks on every role); the difference is what the factory's
// own clients sent (the emulator's questions, the cluster watcher, and
// WaitApplied's questions: it asks through a client of the session's own).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
)

// scaleSection is the report section of the step.
const scaleSection = "scale"

// scaleConfig sizes the step's four curves.
type scaleConfig struct {
	// Curve 1: brokers.
	Brokers      []int
	BrokerTrials int            // create + read-on-every-broker trials per client, mode and broker count
	Overhead     overheadConfig // producer comparison at each broker count

	// Curve 2: topics created at once, then waited for.
	TopicBrokers    []int
	Topics          []int
	TopicPartitions int32
	TopicLag        time.Duration // every broker's apply lag
	TopicTrials     int
	PollEvery       time.Duration // the describe-polling workaround's interval

	// Curve 4: time to usable after a create, on the local cluster.
	UsableTrials int
	UsableLag    time.Duration

	// Curve 3: producers sharing one factory.
	Producers       []int
	ProducerRounds  int
	ProducerTotal   int   // records per round, split among the producers
	ProducerLatency int   // one-at-a-time records per round, split among the producers (at least 8 each)
	WidePartitions  int32 // partitions of the topic the heap per partition is measured on

	// Curve 5: record size, on bare kfake.
	Sizes       []int
	SizeBytes   int // bytes of values per consumed topic (records = SizeBytes / size)
	SizeRounds  int // consumer rounds (runConsume rounds them up to whole sets: consumeRounds)
	SizeProduce overheadConfig
}

// scalePlan returns the step's sizes.
func scalePlan(quick bool) scaleConfig {
	if quick {
		return scaleConfig{
			Brokers: []int{3, 6}, BrokerTrials: 2,
			Overhead:     overheadConfig{Rounds: 1, Blocks: 1, Records: 200, Latencies: 10, ValueSize: 1024},
			TopicBrokers: []int{3}, Topics: []int{1, 10}, TopicPartitions: 10, TopicLag: 20 * time.Millisecond, TopicTrials: 1,
			PollEvery: 100 * time.Millisecond, UsableTrials: 1, UsableLag: 20 * time.Millisecond,
			Producers: []int{1, 8}, ProducerRounds: 1, ProducerTotal: 400, ProducerLatency: 40, WidePartitions: 100,
			Sizes: []int{100, 10240}, SizeBytes: 200 << 10, SizeRounds: 1,
			SizeProduce: overheadConfig{Rounds: 1, Blocks: 1, Records: 100, Latencies: 10},
		}
	}
	return scaleConfig{
		Brokers: []int{3, 6, 12, 24}, BrokerTrials: 20,
		Overhead:     overheadConfig{Rounds: 24, Blocks: 6, Records: 5000, Latencies: 150, ValueSize: 1024},
		TopicBrokers: []int{3, 24}, Topics: []int{1, 10, 100, 1000}, TopicPartitions: 10, TopicLag: 50 * time.Millisecond, TopicTrials: 5,
		PollEvery: 100 * time.Millisecond, UsableTrials: 200, UsableLag: 50 * time.Millisecond,
		Producers: []int{1, 8, 64, 256}, ProducerRounds: 8, ProducerTotal: 20000, ProducerLatency: 2000, WidePartitions: 1000,
		Sizes: []int{100, 1024, 10240}, SizeBytes: 20 << 20, SizeRounds: 24,
		SizeProduce: overheadConfig{Rounds: 12, Blocks: 4, Records: 4000, Latencies: 150},
	}
}

// keyCounter is a franz-go hook that counts the requests a client wrote,
// by API key, and their bytes.
type keyCounter struct {
	mu    sync.Mutex
	keys  map[int16]int64
	bytes int64
}

func newKeyCounter() *keyCounter { return &keyCounter{keys: map[int16]int64{}} }

func (k *keyCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, _ error) {
	k.mu.Lock()
	k.keys[key]++
	k.bytes += int64(n)
	k.mu.Unlock()
}

// take returns the counts since the last take and starts again.
func (k *keyCounter) take() (map[int16]int64, int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	keys, b := k.keys, k.bytes
	k.keys, k.bytes = map[int16]int64{}, 0
	return keys, b
}

// apiVersionsAt counts the ApiVersions requests that reach lc's kfake
// brokers: the gateways pass ApiVersions through untouched, so the count
// splits what the factory's own clients asked into ApiVersions and the
// rest (DescribeQuorum, which the gateways answer themselves, Metadata).
type apiVersionsAt struct{ n atomic.Int64 }

func countAPIVersions(lc *localcluster.Cluster) *apiVersionsAt {
	a := &apiVersionsAt{}
	kf := lc.Kfake()
	kf.ControlKey(int16(kmsg.ApiVersions), func(kmsg.Request) (kmsg.Response, error, bool) {
		kf.KeepControl()
		a.n.Add(1)
		return nil, nil, false
	})
	return a
}

// phaseCount is what one phase of a trial sent.
type phaseCount struct {
	Total       int64           // requests the gateways read
	APIVersions int64           // of them, ApiVersions (counted at kfake; -1: not counted)
	Client      map[int16]int64 // requests the user-facing clients wrote, by key
	Bytes       int64           // bytes the user-facing clients wrote
}

// internal is what the factory's own clients sent: the gateways' count
// less the user-facing clients'.
func (p phaseCount) internal() int64 {
	n := p.Total
	for _, c := range p.Client {
		n -= c
	}
	return n
}

// internalAPIVersions is how many of the internal requests were
// ApiVersions.
func (p phaseCount) internalAPIVersions() int64 {
	return p.APIVersions - p.Client[int16(kmsg.ApiVersions)]
}

// measurePhase runs fn and counts what reached lc's gateways (and, with
// av, its kfake brokers' ApiVersions) and what kc's client wrote
// meanwhile.
func measurePhase(lc *localcluster.Cluster, av *apiVersionsAt, kc *keyCounter, fn func() error) (phaseCount, time.Duration, error) {
	kc.take()
	before := lc.Stats().Requests
	av0 := av.n.Load()
	start := time.Now()
	err := fn()
	d := time.Since(start)
	keys, b := kc.take()
	return phaseCount{Total: lc.Stats().Requests - before, APIVersions: av.n.Load() - av0, Client: keys, Bytes: b}, d, err
}

// scaleClient is one side of a comparison: an admin path and the franz-go
// client reads go through.
type scaleClient struct {
	name   string
	kgo    *kgo.Client // reads; the factory's admin client's own
	admin  *kadm.Client
	keys   *keyCounter
	f      *factory.Factory // nil for plain kgo
	closer func()
}

// newScaleClients makes a factory admin client and a plain kgo client on
// addrs, each counting its requests by key.
func newScaleClients(addrs []string) (fc, pc scaleClient, err error) {
	fk := newKeyCounter()
	f, err := factory.New(factory.BootstrapServers(addrs...), factory.Hooks(factory.AllRoles, fk))
	if err != nil {
		return fc, pc, err
	}
	adm, err := f.Admin()
	if err != nil {
		f.Close(context.Background())
		return fc, pc, err
	}
	fc = scaleClient{name: "factory", kgo: adm.Kgo(), admin: kadm.NewClient(adm.Kgo()), keys: fk, f: f,
		closer: func() { _ = adm.Close(context.Background()); f.Close(context.Background()) }}
	pk := newKeyCounter()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.WithHooks(pk))
	if err != nil {
		fc.closer()
		return fc, pc, err
	}
	pc = scaleClient{name: "plain kgo", kgo: cl, admin: kadm.NewClient(cl), keys: pk, closer: cl.Close}
	return fc, pc, nil
}

// --- Curve 1: brokers ---

// brokerTrial is one create followed by a Metadata read of the topic on
// every broker, and the same reads again (every broker now known to have
// applied the create).
type brokerTrial struct {
	Create, Read, Again phaseCount
	CreateDur, ReadDur  time.Duration
	Stale               int // first reads that did not show the topic with a leader for every partition
}

// brokerPoint is the curve's point for one mode and broker count.
type brokerPoint struct {
	Brokers int
	Native  bool
	Trials  [2][]brokerTrial // vFactory, vPlain
	Over    *overheadResult  // emulated only
}

// createThenRead runs one brokerTrial of c on a new topic.
func createThenRead(ctx context.Context, lc *localcluster.Cluster, av *apiVersionsAt, c scaleClient, topic string, brokers int) (brokerTrial, error) {
	var tr brokerTrial
	var err error
	tr.Create, tr.CreateDur, err = measurePhase(lc, av, c.keys, func() error {
		r, err := c.admin.CreateTopic(ctx, 3, int16(min(3, brokers)), nil, topic)
		if err == nil {
			err = r.Err
		}
		return err
	})
	if err != nil {
		return tr, fmt.Errorf("%s: create %s: %w", c.name, topic, err)
	}
	readAll := func(stale *int) error {
		for node := range int32(brokers) {
			req := kmsg.NewPtrMetadataRequest()
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(topic)
			req.Topics = append(req.Topics, t)
			resp, err := c.kgo.Broker(int(node)).Request(ctx, req)
			if err != nil {
				return fmt.Errorf("metadata from broker %d: %w", node, err)
			}
			if !servesTopic(resp.(*kmsg.MetadataResponse), topic, 3) {
				*stale++
			}
		}
		return nil
	}
	tr.Read, tr.ReadDur, err = measurePhase(lc, av, c.keys, func() error { return readAll(&tr.Stale) })
	if err != nil {
		return tr, fmt.Errorf("%s: read %s: %w", c.name, topic, err)
	}
	// The same reads once every broker has applied the create (asked of
	// the cluster in process, not over the wire).
	if err := waitAllApplied(ctx, lc, brokers); err != nil {
		return tr, err
	}
	var again int
	tr.Again, _, err = measurePhase(lc, av, c.keys, func() error { return readAll(&again) })
	if err != nil {
		return tr, fmt.Errorf("%s: read %s again: %w", c.name, topic, err)
	}
	if again > 0 {
		return tr, fmt.Errorf("%s: %d brokers did not show %s on the second read", c.name, again, topic)
	}
	return tr, nil
}

// servesTopic reports whether a Metadata answer lists topic with
// partitions partitions, each with a leader.
func servesTopic(resp *kmsg.MetadataResponse, topic string, partitions int) bool {
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if t.ErrorCode != 0 || len(t.Partitions) != partitions {
			return false
		}
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || p.Leader < 0 {
				return false
			}
		}
		return true
	}
	return false
}

// waitAllApplied waits until every broker of lc has applied the log's end.
func waitAllApplied(ctx context.Context, lc *localcluster.Cluster, brokers int) error {
	end := lc.LogEnd()
	for node := range int32(brokers) {
		if err := lc.WaitApplied(ctx, node, end); err != nil {
			return err
		}
	}
	return nil
}

// runBrokerPoint measures one broker count in one mode.
func runBrokerPoint(ctx context.Context, cfg scaleConfig, brokers int, native bool, logf func(string, ...any)) (*brokerPoint, error) {
	lc, err := localcluster.New(localcluster.Brokers(brokers), localcluster.Lag(0), localcluster.Native(native),
		localcluster.KfakeOpts(kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(overheadSegmentBytes)})))
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	av := countAPIVersions(lc)
	pt := &brokerPoint{Brokers: brokers, Native: native}
	fc, pc, err := newScaleClients(lc.Addrs())
	if err != nil {
		return nil, err
	}
	defer fc.closer()
	defer pc.closer()
	clients := [2]scaleClient{vFactory: fc, vPlain: pc}
	// Warm-up: connections to every broker, metadata, the emulator's
	// first answers.
	for v, c := range clients {
		if _, err := createThenRead(ctx, lc, av, c, fmt.Sprintf("warm-%d", v), brokers); err != nil {
			return nil, err
		}
	}
	for i := range cfg.BrokerTrials {
		for j := range 2 {
			v := (i + j) % 2 // alternate who goes first
			if err := waitAllApplied(ctx, lc, brokers); err != nil {
				return nil, err
			}
			tr, err := createThenRead(ctx, lc, av, clients[v], fmt.Sprintf("t%d-%d", i, v), brokers)
			if err != nil {
				return nil, err
			}
			pt.Trials[v] = append(pt.Trials[v], tr)
		}
	}
	logf("scale brokers=%d native=%v: requests per create+reads factory %.0f, plain %.0f", brokers, native,
		medianOf(pt.Trials[vFactory], func(t brokerTrial) float64 { return float64(t.Create.Total + t.Read.Total) }),
		medianOf(pt.Trials[vPlain], func(t brokerTrial) float64 { return float64(t.Create.Total + t.Read.Total) }))
	if native {
		return pt, nil
	}
	topic := "scale-overhead"
	r, err := pc.admin.CreateTopic(ctx, int32(brokers), int16(min(3, brokers)), nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", topic, err)
	}
	if err := waitAllApplied(ctx, lc, brokers); err != nil {
		return nil, err
	}
	where := fmt.Sprintf("%d brokers", brokers)
	pt.Over, err = runOverhead(ctx, where, lc.Addrs(), topic, consistency.Unknown(), cfg.Overhead,
		func(ctx context.Context) error { return trim(ctx, lc, topic) }, logf)
	if err != nil {
		return nil, fmt.Errorf("overhead at %d brokers: %w", brokers, err)
	}
	return pt, nil
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	vals := make([]float64, len(xs))
	for i, x := range xs {
		vals[i] = f(x)
	}
	return quantile(vals, 0.5)
}

func quantileOf[T any](xs []T, q float64, f func(T) float64) float64 {
	vals := make([]float64, len(xs))
	for i, x := range xs {
		vals[i] = f(x)
	}
	return quantile(vals, q)
}

// meanKeys is the mean count per trial of each API key in the phases sel
// picks.
func meanKeys(trs []brokerTrial, sel func(brokerTrial) phaseCount) map[int16]float64 {
	out := map[int16]float64{}
	for _, t := range trs {
		for k, n := range sel(t).Client {
			out[k] += float64(n) / float64(len(trs))
		}
	}
	return out
}

// meanInternal is the mean per trial of the internal requests and, of
// them, ApiVersions.
func meanInternal(trs []brokerTrial, sel func(brokerTrial) phaseCount) (all, apiVersions float64) {
	for _, t := range trs {
		all += float64(sel(t).internal())
		apiVersions += float64(sel(t).internalAPIVersions())
	}
	n := float64(max(len(trs), 1))
	return all / n, apiVersions / n
}

// keysText names the keys of m with their counts, largest first.
func keysText(m map[int16]float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b int16) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	var parts []string
	for _, k := range keys {
		if m[k] >= 0.05 {
			parts = append(parts, fmt.Sprintf("%s %.1f", kmsg.NameForKey(k), m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// --- Curve 2: topics, then WaitApplied ---

const (
	waitFactory = iota // factory CreateTopics, then WaitApplied(token, WaitTopics)
	waitPoll           // plain CreateTopics, then Metadata every PollEvery until every partition has a leader
	numWaiters
)

var waiterNames = [numWaiters]string{"factory `WaitApplied` + `WaitTopics`", "plain kgo, describe every 100 ms"}

type topicTrial struct {
	Create     time.Duration // the CreateTopics call
	Limit      time.Duration // from the create's answer to the last broker applying it
	Wait       time.Duration // from the create's answer to the wait's end
	WaitCPU    time.Duration // process CPU during the wait (clients, cluster, runtime)
	Create0    phaseCount    // requests of the create
	Wait0      phaseCount    // requests during the wait
	Early      bool          // the wait ended before every broker had applied the create
	StaleAfter int           // brokers that did not serve every partition when the wait ended
}

type topicPoint struct {
	Brokers, Topics int
	Trials          [numWaiters][]topicTrial
}

// runTopicCurve measures every topic count at one broker count.
func runTopicCurve(ctx context.Context, cfg scaleConfig, brokers int, logf func(string, ...any)) ([]*topicPoint, error) {
	lc, err := localcluster.New(localcluster.Brokers(brokers), localcluster.Lag(cfg.TopicLag), localcluster.Native(false))
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	av := countAPIVersions(lc)
	fc, pc, err := newScaleClients(lc.Addrs())
	if err != nil {
		return nil, err
	}
	defer fc.closer()
	defer pc.closer()
	clients := [numWaiters]scaleClient{waitFactory: fc, waitPoll: pc}
	var out []*topicPoint
	seq := 0
	// Warm-up at the smallest size.
	for v := range numWaiters {
		if _, err := topicTrialOf(ctx, lc, av, cfg, brokers, v, clients[v], topicNames(&seq, 1)); err != nil {
			return nil, err
		}
	}
	for _, n := range cfg.Topics {
		pt := &topicPoint{Brokers: brokers, Topics: n}
		trials := cfg.TopicTrials
		if n >= 1000 {
			trials = max(1, trials*3/5)
		}
		for i := range trials {
			for j := range numWaiters {
				v := (i + j) % numWaiters
				tr, err := topicTrialOf(ctx, lc, av, cfg, brokers, v, clients[v], topicNames(&seq, n))
				if err != nil {
					return nil, err
				}
				pt.Trials[v] = append(pt.Trials[v], tr)
			}
		}
		logf("scale topics=%d brokers=%d: wait − limit p50 factory %.1f ms (%.0f requests), poll %.1f ms (%.0f requests)", n, brokers,
			medianOf(pt.Trials[waitFactory], func(t topicTrial) float64 { return ms(t.Wait - t.Limit) }),
			medianOf(pt.Trials[waitFactory], func(t topicTrial) float64 { return float64(t.Wait0.Total) }),
			medianOf(pt.Trials[waitPoll], func(t topicTrial) float64 { return ms(t.Wait - t.Limit) }),
			medianOf(pt.Trials[waitPoll], func(t topicTrial) float64 { return float64(t.Wait0.Total) }))
		out = append(out, pt)
	}
	return out, nil
}

// nodeIDs are the node ids of a local cluster of n brokers: 0..n-1.
func nodeIDs(n int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(i)
	}
	return ids
}

func topicNames(seq *int, n int) []string {
	names := make([]string, n)
	for i := range names {
		*seq++
		names[i] = fmt.Sprintf("w%06d", *seq)
	}
	return names
}

// topicTrialOf creates names with waiter v's client, then waits as v does,
// and measures the limit (every broker applied the create) alongside.
// Afterwards it deletes the topics, so kfake's heap does not grow from
// trial to trial, and waits for every broker to apply the deletion.
func topicTrialOf(ctx context.Context, lc *localcluster.Cluster, av *apiVersionsAt, cfg scaleConfig, brokers, v int, c scaleClient, names []string) (topicTrial, error) {
	var tr topicTrial
	if err := waitAllApplied(ctx, lc, brokers); err != nil {
		return tr, err
	}
	var err error
	tr.Create0, tr.Create, err = measurePhase(lc, av, c.keys, func() error {
		rs, err := c.admin.CreateTopics(ctx, cfg.TopicPartitions, int16(min(3, brokers)), nil, names...)
		if err == nil {
			err = rs.Error()
		}
		return err
	})
	if err != nil {
		return tr, fmt.Errorf("%s: create %d topics: %w", c.name, len(names), err)
	}
	created := time.Now()
	end := lc.LogEnd()
	// The limit: the moment the last broker applied the log's end, which
	// is the create's commit (nothing else writes).
	var limitAt atomic.Int64
	var lg sync.WaitGroup
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	defer lcancel()
	for node := range int32(brokers) {
		lg.Go(func() {
			if lc.WaitApplied(lctx, node, end) == nil {
				at := int64(time.Since(created))
				for {
					cur := limitAt.Load()
					if at <= cur || limitAt.CompareAndSwap(cur, at) {
						break
					}
				}
			}
		})
	}
	cpu0, okCPU := processCPU()
	tr.Wait0, _, err = measurePhase(lc, av, c.keys, func() error {
		switch v {
		case waitFactory:
			return c.f.WaitApplied(ctx, c.f.Token(), factory.WaitTopics(names...))
		default:
			return pollDescribe(ctx, c.kgo, names, int(cfg.TopicPartitions), nodeIDs(brokers), cfg.PollEvery)
		}
	})
	tr.Wait = time.Since(created)
	if cpu1, ok := processCPU(); ok && okCPU {
		tr.WaitCPU = cpu1 - cpu0
	}
	if err != nil {
		return tr, fmt.Errorf("%s: wait for %d topics: %w", c.name, len(names), err)
	}
	// Which brokers did not serve every partition when the wait ended?
	for node := range int32(brokers) {
		applied, _ := lc.AppliedOffset(node)
		if applied < end {
			tr.StaleAfter++
		}
	}
	tr.Early = tr.StaleAfter > 0
	lg.Wait()
	tr.Limit = time.Duration(limitAt.Load())
	// Clean up through the plain path; every broker applies it before the
	// next trial starts.
	if _, err := c.admin.DeleteTopics(ctx, names...); err != nil {
		return tr, fmt.Errorf("delete %d topics: %w", len(names), err)
	}
	return tr, waitAllApplied(ctx, lc, brokers)
}

// pollDescribe is the common workaround: ask Metadata for the topics every
// interval until every partition of every topic has a leader. The request
// goes straight to a broker, the next one each time (kgo picks one at
// random): kadm.Metadata would be answered from franz-go's metadata cache
// for MetadataMinAge (5 s by default), not asked again every interval.
func pollDescribe(ctx context.Context, cl *kgo.Client, names []string, partitions int, nodes []int32, every time.Duration) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := 0; ; i++ {
		req := kmsg.NewPtrMetadataRequest()
		for _, n := range names {
			t := kmsg.NewMetadataRequestTopic()
			t.Topic = kmsg.StringPtr(n)
			req.Topics = append(req.Topics, t)
		}
		resp, err := cl.Broker(int(nodes[i%len(nodes)])).Request(ctx, req)
		if err == nil && allLed(resp.(*kmsg.MetadataResponse), names, partitions) {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("polling describe: %w", ctx.Err())
		}
	}
}

// allLed reports whether a Metadata answer lists every topic of names
// with partitions partitions, each with a leader.
func allLed(resp *kmsg.MetadataResponse, names []string, partitions int) bool {
	for _, n := range names {
		if !servesTopic(resp, n, partitions) {
			return false
		}
	}
	return true
}

// --- Curve 5: record size on bare kfake ---

type sizePoint struct {
	Size    int
	Consume *consumeResult
	Produce *overheadResult
}

// trimAt deletes every record of topic on the cluster at addrs.
func trimAt(ctx context.Context, addrs []string, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("trim %s: %w", topic, err)
	}
	resp, err := adm.DeleteRecords(ctx, ends.Offsets())
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("trim %s: %w", topic, err)
	}
	return nil
}

func runSizeCurve(ctx context.Context, cfg scaleConfig, logf func(string, ...any)) ([]*sizePoint, error) {
	var out []*sizePoint
	for _, size := range cfg.Sizes {
		pt, err := func() (*sizePoint, error) {
			kf, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(3, "consume", "produce"),
				kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(overheadSegmentBytes)}))
			if err != nil {
				return nil, err
			}
			defer kf.Close()
			addrs := kf.ListenAddrs()
			cc := consumeConfig{Rounds: cfg.SizeRounds, Records: max(cfg.SizeBytes/size, 100), ValueSize: size}
			if err := fillTopic(ctx, addrs, "consume", cc); err != nil {
				return nil, err
			}
			where := fmt.Sprintf("bare kfake, 3 brokers, %d-byte values", size)
			cons, err := runConsume(ctx, where, addrs, "consume", 3, consistency.Unknown(), cc, logf)
			if err != nil {
				return nil, fmt.Errorf("consume %d B: %w", size, err)
			}
			// The consumed records go before the producer comparison.
			if err := trimAt(ctx, addrs, "consume"); err != nil {
				return nil, err
			}
			oc := cfg.SizeProduce
			oc.ValueSize = size
			if size > 1024 {
				oc.Records = max(oc.Records*1024/size, 100)
			}
			prod, err := runOverhead(ctx, where, addrs, "produce", consistency.Unknown(), oc,
				func(ctx context.Context) error { return trimAt(ctx, addrs, "produce") }, logf)
			if err != nil {
				return nil, fmt.Errorf("produce %d B: %w", size, err)
			}
			return &sizePoint{Size: size, Consume: cons, Produce: prod}, nil
		}()
		if err != nil {
			return nil, err
		}
		out = append(out, pt)
	}
	return out, nil
}

// --- The step ---

type scaleResult struct {
	Cfg       scaleConfig
	Brokers   []*brokerPoint
	Topics    []*topicPoint
	Usable    [numUsable][]usableTrial // 3 brokers
	Producers []*producerPoint
	WideHeap  [2][]float64 // bytes of live heap per 1,000 partitions produced to, per round
	Sizes     []*sizePoint
	Load      [2]string // /proc/loadavg before and after
	Elapsed   time.Duration
}

// runScale is the step: every curve, one after another.
func runScale(ctx context.Context, o options, _ plan, m machine) (string, error) {
	cfg := scalePlan(o.Quick)
	// -scale narrows the ratio intervals of the curves whose points are
	// comparisons over rounds (record size, producers per factory).
	cfg.SizeRounds *= o.Scale
	cfg.SizeProduce.Rounds *= o.Scale
	cfg.ProducerRounds *= o.Scale
	res, err := measureScale(ctx, cfg, o.Logf)
	if err != nil {
		return "", err
	}
	var body bytes.Buffer
	header(&body, o, m, res.Elapsed)
	if err := scaleMarkdown(&body, res, o.Out, o.Charts); err != nil {
		return "", err
	}
	return body.String(), nil
}

func measureScale(ctx context.Context, cfg scaleConfig, logf func(string, ...any)) (*scaleResult, error) {
	t0 := time.Now()
	res := &scaleResult{Cfg: cfg}
	res.Load[0] = loadAvg()
	for _, n := range cfg.Brokers {
		for _, native := range []bool{false, true} {
			pt, err := runBrokerPoint(ctx, cfg, n, native, logf)
			if err != nil {
				return nil, fmt.Errorf("brokers %d (native %v): %w", n, native, err)
			}
			res.Brokers = append(res.Brokers, pt)
		}
	}
	for _, n := range cfg.TopicBrokers {
		pts, err := runTopicCurve(ctx, cfg, n, logf)
		if err != nil {
			return nil, fmt.Errorf("topics at %d brokers: %w", n, err)
		}
		res.Topics = append(res.Topics, pts...)
	}
	var err error
	if res.Usable, err = runUsableCurve(ctx, cfg, 3, logf); err != nil {
		return nil, fmt.Errorf("time to usable: %w", err)
	}
	if res.Producers, res.WideHeap, err = runProducerCurve(ctx, cfg, logf); err != nil {
		return nil, fmt.Errorf("producers: %w", err)
	}
	if res.Sizes, err = runSizeCurve(ctx, cfg, logf); err != nil {
		return nil, fmt.Errorf("record sizes: %w", err)
	}
	res.Load[1] = loadAvg()
	res.Elapsed = time.Since(t0)
	return res, nil
}

var errNoLoad = errors.New("no /proc/loadavg")

// loadAvg is the machine's 1-, 5- and 15-minute load averages.
func loadAvg() string {
	s, err := readLoadAvg()
	if err != nil {
		return "unknown"
	}
	return s
}
