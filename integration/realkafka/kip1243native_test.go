package realkafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/checker"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
)

// nativeFactory is the one place this file makes a factory: native mode
// (tokens only from KIP-1243 response headers), bootstrapping from addrs.
func nativeFactory(t *testing.T, addrs []string, clientID string) *factory.Factory {
	t.Helper()
	f, err := factory.New(factory.BootstrapServers(addrs...), factory.ClientID(clientID),
		factory.Consistency(factory.ModeNative), factory.AutoOffsetReset(factory.ResetEarliest))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	return f
}

// headerTally counts, from the frames a kafkatest.Forwarder sees for one
// client id, the requests by API key and the flexible responses with and
// without header tag 0.
type headerTally struct {
	clientID string

	mu       sync.Mutex
	conns    map[string]bool // forwarder target and connection number
	requests map[int16]int
	flexible map[int16]int
	tagged   map[int16]int
	clusters map[string]int
	errs     []error
}

func newHeaderTally(clientID string) *headerTally {
	return &headerTally{clientID: clientID, conns: map[string]bool{}, requests: map[int16]int{},
		flexible: map[int16]int{}, tagged: map[int16]int{}, clusters: map[string]int{}}
}

func (h *headerTally) observe(fr kafkatest.Frame) {
	h.mu.Lock()
	defer h.mu.Unlock()
	conn := fmt.Sprintf("%s/%d", fr.Target, fr.Conn) // each forwarder numbers its connections from 1
	if fr.Request {
		if fr.ClientID == h.clientID {
			h.conns[conn] = true
			h.requests[fr.Key]++
		}
		return
	}
	if !h.conns[conn] || fr.Key < 0 || fr.Key == 18 { // ApiVersions: header v0
		return
	}
	req := kmsg.RequestForKey(fr.Key)
	if req == nil {
		return
	}
	req.SetVersion(fr.Version)
	if !req.IsFlexible() {
		return
	}
	h.flexible[fr.Key]++
	b := kbin.Reader{Src: fr.Body}
	b.Int32()
	st, ok, err := headerTag0(&b)
	if err != nil {
		h.errs = append(h.errs, err)
		return
	}
	if ok {
		h.tagged[fr.Key]++
		h.clusters[st.clusterID]++
	}
}

func (h *headerTally) snapshot() (conns int, requests, flexible, tagged map[int16]int, clusters map[string]int, errs []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cp := func(m map[int16]int) map[int16]int {
		o := map[int16]int{}
		for k, v := range m {
			o[k] = v
		}
		return o
	}
	cl := map[string]int{}
	for k, v := range h.clusters {
		cl[k] = v
	}
	return len(h.conns), cp(h.requests), cp(h.flexible), cp(h.tagged), cl, append([]error(nil), h.errs...)
}

// agentCluster starts three nodes with the KIP-1243 agent, each
// advertised at a forwarder whose frames of clientID a headerTally counts;
// it returns the forwarders' addresses as bootstrap servers.
func agentCluster(t *testing.T, clientID string, settings ...kafkatest.KIP1243Setting) (*kafkatest.Cluster, []string, *headerTally) {
	t.Helper()
	var fwds []*kafkatest.Forwarder
	opts := []kafkatest.Opt{kafkatest.Nodes(3), kafkatest.KIP1243(settings...)}
	for id := int32(1); id <= 3; id++ {
		fw, err := kafkatest.NewForwarder("")
		require.NoError(t, err)
		t.Cleanup(func() { fw.Close() })
		fwds = append(fwds, fw)
		opts = append(opts, kafkatest.AdvertisedAddr(id, fw.Addr()))
	}
	c := kafkatest.Start(t, opts...)
	tally := newHeaderTally(clientID)
	var seeds []string
	for i, fw := range fwds {
		addr, err := c.ListenerAddr(int32(i + 1))
		require.NoError(t, err)
		fw.SetTarget(addr)
		fw.Observe(tally.observe)
		seeds = append(seeds, fw.Addr())
	}
	return c, seeds, tally
}

// TestKIP1243NativeOnKafka44 runs three Kafka 4.4.0 nodes taught KIP-1243
// by the agent (kafkatest.KIP1243, hold mode) and a factory in native
// mode, which learns tokens from response headers only: its metadata
// writes (create, create-partitions, alter-config, delete), each read back
// at once from every broker, are never stale, while plain franz-go in the
// same run reads stale answers. Every flexible response the factory reads
// carries tag 0, counted on the wire by forwarders in front of each
// broker, and the factory sends no DescribeQuorum and no ApiVersions
// beyond the one each connection starts with.
func TestKIP1243NativeOnKafka44(t *testing.T) {
	c, seeds, tally := agentCluster(t, "native")
	ctx := testkit.CtxFor(t, 5*time.Minute)
	ids := c.NodeIDs()

	f := nativeFactory(t, seeds, "native")
	fadm, err := f.Admin()
	require.NoError(t, err)
	defer fadm.Close(context.Background())
	fkgo, err := f.KgoClient()
	require.NoError(t, err)
	defer fkgo.Close()
	plain := plainClient(t, c)

	// The one run of this test must show plain franz-go reading stale:
	// it may take more trials on a busy machine.
	sides, retried := runRYW(t, ctx, ids, fadm, fkgo, plain, "native", 150)
	require.Zero(t, retried, "in hold mode no read is answered INCONSISTENT_METADATA")
	conns, requests, flexible, tagged, clusters, errs := tally.snapshot()
	t.Logf("factory on the wire: %d connections; requests %v; flexible responses %d, with tag 0 %d (%v); factory %+v, token %v",
		conns, requests, sum(flexible), sum(tagged), clusters, f.Stats(), f.Token())
	require.Zero(t, sides[0].staleTotal(), "the factory read an answer older than its own write")
	require.Positive(t, sides[1].staleTotal(), "plain franz-go saw no stale answer: the test shows nothing")
	require.Empty(t, errs)
	require.Greater(t, sum(flexible), 100)
	require.Equal(t, flexible, tagged, "every flexible response the factory read carries tag 0")
	require.Equal(t, map[string]int{c.ClusterID(): sum(tagged)}, clusters)
	require.Zero(t, requests[55], "DescribeQuorum probes")
	require.LessOrEqual(t, requests[18], conns, "ApiVersions beyond one per connection")
	require.Positive(t, f.Stats().TokensAdvanced, "the factory learnt tokens from headers")
	require.Equal(t, c.ClusterID(), f.Token().ClusterID())
}

// runRYW makes metadata writes (create, create-partitions, alter-config,
// delete) through the factory's admin client and through plain franz-go,
// and reads each back at once from every broker (all brokers at the same
// time) with the same side's client, for at least 15 trials and until
// plain franz-go has read a stale answer: at most 60 trials, or up to
// lastTrial while a minute of ctx is left. sides[0] is the factory,
// sides[1] plain franz-go.
//
// The reads go to one broker each (kgo.Client.Broker), which kgo never
// retries: an INCONSISTENT_METADATA answer (error mode) reaches the caller
// as consistency.ErrInconsistentMetadata, and the read is sent again, as
// an application asking that broker would; retried counts those.
func runRYW(t *testing.T, ctx context.Context, ids []int32, fadm rywAdmin, fkgo, plain *kgo.Client, prefix string, lastTrial int) (sides []*rywSide, retried int) {
	sides = []*rywSide{
		{name: "factory", adm: fadm, kgo: fkgo},
		{name: "plain kgo", adm: kadm.NewClient(plain), kgo: plain},
	}
	for _, s := range sides {
		s.reads, s.stale = map[string]int{}, map[string]int{}
	}
	// readEach reads from every broker at once, each read as soon after
	// the write's answer as the other: a broker that has not applied the
	// write yet is caught before it does (read one after the other, the
	// last broker was asked two answers later, and on a busy machine had
	// always caught up by then: a run at load 27 saw no stale answer in
	// 720). A factory read answered INCONSISTENT_METADATA is sent again.
	// It returns each broker's verdict, in the order of ids.
	readEach := func(s *rywSide, what string, read func(id int32) (bool, error)) []bool {
		type result struct {
			ok    bool
			err   error
			tries int
		}
		out := make([]result, len(ids))
		var wg sync.WaitGroup
		for i, id := range ids {
			wg.Go(func() {
				for {
					ok, err := read(id)
					if s.name == "factory" && errors.Is(err, consistency.ErrInconsistentMetadata) && ctx.Err() == nil {
						out[i].tries++
						time.Sleep(20 * time.Millisecond)
						continue
					}
					out[i].ok, out[i].err = ok, err
					return
				}
			})
		}
		wg.Wait()
		verdicts := make([]bool, len(ids))
		for i, r := range out {
			retried += r.tries
			require.NoError(t, r.err, "%s: %s from broker %d", s.name, what, ids[i])
			verdicts[i] = r.ok
		}
		return verdicts
	}
	readAll := func(s *rywSide, op, topic string, want func(known bool, parts int) bool) {
		for _, fresh := range readEach(s, op+": Metadata", func(id int32) (bool, error) {
			known, parts, err := topicOn(ctx, s.kgo, id, topic)
			return want(known, parts), err
		}) {
			s.saw(op, fresh)
		}
	}
	// must runs an admin write: the factory's must succeed at once; plain
	// kadm may fail on a stale lookup first, which counts as stale.
	must := func(s *rywSide, op string, call func() error) {
		deadline := time.Now().Add(15 * time.Second)
		for {
			err := call()
			if err == nil {
				return
			}
			unknown := errors.Is(err, kerr.UnknownTopicOrPartition) || strings.Contains(err.Error(), kerr.UnknownTopicOrPartition.Message)
			if s.name == "factory" || time.Now().After(deadline) || !unknown {
				require.NoError(t, err, "%s: %s", s.name, op)
			}
			s.saw(op+" (admin error)", false)
			time.Sleep(100 * time.Millisecond)
		}
	}
	trial := func(s *rywSide, i int) {
		topic := fmt.Sprintf("%s-%d-%s", prefix, i, map[string]string{"factory": "f", "plain kgo": "p"}[s.name])
		must(s, "create", func() error { return createTopic3(ctx, s.adm, topic) })
		readAll(s, "create", topic, func(known bool, _ int) bool { return known })
		must(s, "create-partitions", func() error { return growBy2(ctx, s.adm, topic) })
		readAll(s, "create-partitions", topic, func(_ bool, parts int) bool { return parts == 3 })
		want := strconv.Itoa(3_600_000 + i)
		must(s, "alter-config", func() error { return setRetention(ctx, s.adm, topic, want) })
		for _, fresh := range readEach(s, "alter-config: DescribeConfigs", func(id int32) (bool, error) {
			got, err := configOn(ctx, s.kgo, id, topic, "retention.ms")
			return got == want, err
		}) {
			s.saw("alter-config", fresh)
		}
		must(s, "delete", func() error {
			deleted, err := s.adm.DeleteTopic(ctx, topic)
			if err == nil {
				err = deleted.Err
			}
			return err
		})
		readAll(s, "delete", topic, func(known bool, _ int) bool { return !known })
	}
	// Past maxTrials, trials go on while plain franz-go has read nothing
	// stale, up to lastTrial and while a minute of ctx is left: on a
	// machine at load 27 the brokers applied each write before any read
	// in 60 trials.
	const minTrials, maxTrials = 15, 60
	deadline, _ := ctx.Deadline()
	more := func(i int) bool {
		if i < minTrials {
			return true
		}
		if sides[1].staleTotal() > 0 {
			return false
		}
		return i < maxTrials || (i < lastTrial && time.Until(deadline) > time.Minute)
	}
	i := 0
	for ; more(i); i++ {
		for _, s := range sides {
			trial(s, i)
		}
	}
	for _, s := range sides {
		t.Logf("%-9s: %d stale of %d answers after %d trials: %v (reads %v)", s.name, s.staleTotal(), sumOf(s.reads), i, s.stale, s.reads)
	}
	return sides, retried
}

// TestKIP1243NativeVariants runs, for each variant KIP-1243 allows a
// broker (kafkatest.KIP1243Variants: hold; error at once with the newest
// or the judged offset in the INCONSISTENT_METADATA header; error by
// closing the connection), three Kafka 4.4.0 nodes with the agent so
// configured, and on them a native factory's read-your-writes workload
// (runRYW: its writes read back at once from every broker, never stale,
// while plain franz-go in the same run reads stale answers) and the
// read-your-writes / monotonic-reads checker with the factory's clients
// (0 violations), run first. Summed over the variants, plain franz-go must
// have read stale answers and the brokers of the error variants refused
// some of the factory's requests, or the runs show nothing.
func TestKIP1243NativeVariants(t *testing.T) {
	// What the runs show, summed: on real brokers whether a broker is
	// behind at the moment a read arrives is timing (the local cluster's
	// TestReadYourWritesEveryVariant makes brokers lag and hits every
	// variant's path in every run). Each variant must be correct; together
	// they must show plain franz-go reading stale and the error variants
	// refusing the factory's requests.
	var plainStale, refused int
	defer func() {
		if t.Failed() {
			return
		}
		require.Positive(t, plainStale, "plain franz-go saw no stale answer in any variant: the runs show nothing")
		require.Positive(t, refused, "no broker refused a request of the factory in any error variant: the runs show nothing")
	}()
	for _, v := range kafkatest.KIP1243Variants() {
		t.Run(v.Name, func(t *testing.T) {
			clientID := "native-" + v.Name
			c, seeds, tally := agentCluster(t, clientID, v.Settings...)
			ctx := testkit.CtxFor(t, 8*time.Minute)
			f := nativeFactory(t, seeds, clientID)
			fadm, err := f.Admin()
			require.NoError(t, err)
			defer fadm.Close(context.Background())
			fkgo, err := f.KgoClient()
			require.NoError(t, err)
			defer fkgo.Close()
			plain := plainClient(t, c)

			// The checker first: it records an operation that failed instead
			// of stopping, so every variant gets its figures.
			res, err := checker.Run(ctx, checker.Config{Seed: 1243, Mode: checker.ModeFactory, Ops: 1000, Goroutines: 4,
				Addrs: c.BootstrapAddrs(), BypassAdminCache: true})
			require.NoError(t, err)
			rep := res.Report
			t.Logf("%s: checker, factory: ops=%d views=%d unjudged=%d acked=%d violations=%d (read-your-writes %d, monotonic %d) in %v",
				v.Name, res.ClientOps, rep.Views, rep.Unjudged, rep.Acked, len(rep.Violations),
				rep.Count(checker.ReadYourWrites), rep.Count(checker.MonotonicReads), res.Elapsed.Round(time.Millisecond))
			require.GreaterOrEqual(t, res.ClientOps, 1000)
			require.Greater(t, rep.Views, 500)
			unknown := map[string]int{}
			for _, op := range res.History.Ops {
				if op.Outcome == checker.Unknown {
					e := op.Err
					if len(e) > 120 {
						e = e[:120]
					}
					unknown[fmt.Sprintf("%v: %s", op.Kind, e)]++
				}
			}
			t.Logf("%s: checker, operations of unknown outcome: %v", v.Name, unknown)
			for _, viol := range rep.Violations {
				t.Errorf("%s: factory: %v", v.Name, viol)
			}

			// Summed over the variants: no variant needs more trials.
			sides, retried := runRYW(t, ctx, c.NodeIDs(), fadm, fkgo, plain, clientID, 60)
			answered, closed := 0, 0
			for _, id := range c.NodeIDs() {
				lines, err := c.AgentLog(id)
				require.NoError(t, err)
				for _, l := range lines {
					if !strings.Contains(l, " of "+clientID+":") {
						continue
					}
					if strings.HasPrefix(l, "answered INCONSISTENT_METADATA") {
						answered++
					}
					if strings.HasPrefix(l, "closed the connection of") {
						closed++
					}
				}
			}
			conns, requests, flexible, tagged, _, errs := tally.snapshot()
			st := f.Stats()
			t.Logf("%s: factory %+v; reads sent again after ErrInconsistentMetadata: %d; the brokers logged %d INCONSISTENT_METADATA answers and %d closed connections to it (their first 20 each); %d connections, requests %v; flexible responses %d, with tag 0 %d",
				v.Name, st, retried, answered, closed, conns, requests, sum(flexible), sum(tagged))
			require.Zero(t, sides[0].staleTotal(), "the factory read an answer older than its own write")
			require.Empty(t, errs)
			require.Equal(t, flexible, tagged, "every flexible response the factory read carries tag 0")
			plainStale += sides[1].staleTotal()
			switch v.Name {
			case "hold":
				require.Zero(t, answered+closed, "in hold mode no request of the factory is refused")
				require.Zero(t, st.InconsistentMetadata, "in hold mode no request of the factory is refused")
			case "error-close":
				// The factory counts a close under a request beyond the
				// broker's last token as INCONSISTENT_METADATA.
				refused += closed + int(st.InconsistentMetadata)
			default:
				if answered > 0 {
					require.Positive(t, st.InconsistentMetadata, "the factory saw the INCONSISTENT_METADATA answers")
				}
				refused += answered + int(st.InconsistentMetadata)
			}

		})
	}
}

// TestKIP1243CheckerOnKafka44 runs the read-your-writes and
// monotonic-reads checker (integration/checker) on three nodes taught
// KIP-1243 by the agent: the factory's clients (ModeAuto, which takes the
// brokers' own tokens where they send them) must break no rule over 2,000
// operations; plain kgo/kadm clients run the same workload on the same
// cluster, their count reported.
func TestKIP1243CheckerOnKafka44(t *testing.T) {
	c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.KIP1243())
	ctx := testkit.CtxFor(t, 6*time.Minute)
	counts := map[checker.Mode]checker.Report{}
	for _, mode := range []checker.Mode{checker.ModeFactory, checker.ModePlain} {
		res, err := checker.Run(ctx, checker.Config{Seed: 1243, Mode: mode, Ops: 2000, Goroutines: 4,
			Addrs: c.BootstrapAddrs(), BypassAdminCache: true})
		require.NoError(t, err, "%s", mode)
		rep := res.Report
		t.Logf("%s: ops=%d views=%d unjudged=%d acked=%d consumed=%d violations=%d (read-your-writes %d, monotonic %d) token=%d in %v",
			mode, res.ClientOps, rep.Views, rep.Unjudged, rep.Acked, rep.Consumed, len(rep.Violations),
			rep.Count(checker.ReadYourWrites), rep.Count(checker.MonotonicReads), res.Token, res.Elapsed.Round(time.Millisecond))
		errs := map[string]int{}
		for _, op := range res.History.Ops {
			if op.Outcome == checker.Unknown {
				e := op.Err
				if len(e) > 120 {
					e = e[:120]
				}
				errs[fmt.Sprintf("%v: %s", op.Kind, e)]++
			}
		}
		t.Logf("%s: operations of unknown outcome: %v", mode, errs)
		for e := range errs {
			// What a broker's own failure looks like (a held write
			// forwarded without its buffer answered this).
			require.NotContains(t, e, "UNKNOWN_SERVER_ERROR", "%s", mode)
		}
		require.GreaterOrEqual(t, res.ClientOps, 2000)
		require.Greater(t, rep.Views, 1000, "%s", mode)
		require.Zero(t, rep.Count(checker.WellFormed), "%s: %v", mode, rep.Violations)
		require.Zero(t, rep.Count(checker.NoLoss)+rep.Count(checker.NoDuplication), "%s: %v", mode, rep.Violations)
		counts[mode] = rep
	}
	for _, v := range counts[checker.ModeFactory].Violations {
		t.Errorf("factory: %v", v)
	}
	plain := counts[checker.ModePlain]
	t.Logf("plain kgo on the same cluster: %d read-your-writes and %d monotonic-reads violations over %d views",
		plain.Count(checker.ReadYourWrites), plain.Count(checker.MonotonicReads), plain.Views)
}
