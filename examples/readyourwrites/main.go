// Command readyourwrites shows the anomaly kconsist removes and the fix, side
// by side:
//
//	go run ./examples/readyourwrites
//
// It runs the same flow twice: create a topic → produce → consume → create a
// second topic and describe it (ListTopics, ListEndOffsets). Once through a
// kconsist factory, whose clients share a consistency token, and once
// through plain franz-go kgo/kadm clients with their default retries. It
// prints a table: stale reads the application saw, stale answers the
// cluster served, requests held back by the token, errors, and latency of
// each phase.
//
// Where it runs:
//
//   - With no flags, on an embedded local cluster (package
//     integration/localcluster) of three brokers, two of which apply
//     metadata changes 500ms late, like brokers that are busy or far away.
//     By default its brokers behave like Apache Kafka 4.4, the broker users
//     run: no KIP-1243 header tokens, so the factory makes its tokens from
//     KRaft offsets (consistency.mode auto) and holds its own requests
//     until a broker has caught up. With -native they implement KIP-1243:
//     they send tokens and hold requests themselves (or, with -error-mode,
//     answer INCONSISTENT_METADATA). Only this cluster can count the stale
//     answers it serves and the requests it holds.
//   - With -realkafka, on three real Apache Kafka 4.4 nodes started as child
//     JVMs (package integration/kafkatest: Java 17+, and Maven to fetch
//     Kafka once).
//   - With -brokers host:port[,...], on any running cluster, creating and
//     deleting four topics named kconsist-ryw-<random>-*.
//
// The factory flow must read its writes: the command exits non-zero if it
// saw a single stale read, lost a record or got an error, wherever the
// factory held a token. The plain flow is expected to read stale data and
// never fails the run; whether it does in a given run depends on timing.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// exitCode reports err, if any, and returns the process exit code. -h is
// not an error: the usage was printed and that is all that was asked.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2 // the flag package printed the problem and the usage
	}
	fmt.Fprintln(stderr, "readyourwrites:", err)
	return 1
}

// errUsage wraps flag errors that the flag package has already printed.
var errUsage = errors.New("usage")

// settings are the command's flags.
type settings struct {
	brokers     string
	realKafka   bool
	kip1243     bool
	native      bool
	lag         time.Duration
	errorMode   bool
	records     int
	consumeWait time.Duration
	timeout     time.Duration
}

func parse(args []string, stderr io.Writer) (settings, error) {
	var s settings
	fs := flag.NewFlagSet("readyourwrites", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: go run ./examples/readyourwrites [flags]

Runs create topic → produce → consume → create and describe, through a
kconsist factory and through plain kgo/kadm, and prints what each saw.
Default: an embedded local cluster that behaves like Apache Kafka 4.4, whose
brokers 1 and 2 apply metadata changes late.

`)
		fs.PrintDefaults()
	}
	fs.StringVar(&s.brokers, "brokers", "", "bootstrap servers of a running cluster (host:port,...) instead of the embedded one")
	fs.BoolVar(&s.realKafka, "realkafka", false, "start 3 real Apache Kafka "+kafkatest.KafkaVersion+" nodes instead of the embedded cluster (needs Java 17+, and Maven unless KAFKA_HOME is set)")
	fs.BoolVar(&s.kip1243, "kip1243", false, "with -realkafka: start the nodes with the KIP-1243 agent (integration/kafkatest/KIP1243.md), so they send tokens and hold requests, and run the factory in native mode (tokens from headers only)")
	fs.BoolVar(&s.native, "native", false, "embedded cluster: brokers implement KIP-1243 and send tokens; without it they behave like Apache Kafka 4.4 and the factory makes tokens from KRaft offsets")
	fs.DurationVar(&s.lag, "lag", 500*time.Millisecond, "embedded cluster: how late brokers 1 and 2 apply metadata changes")
	fs.BoolVar(&s.errorMode, "error-mode", false, "embedded KIP-1243 cluster: lagging brokers answer INCONSISTENT_METADATA (the client retries) instead of holding the request")
	fs.IntVar(&s.records, "records", 10, "records to produce and consume")
	fs.DurationVar(&s.consumeWait, "consume-wait", 10*time.Second, "how long to wait for the produced records to be consumed")
	fs.DurationVar(&s.timeout, "timeout", 2*time.Minute, "bound on the two flows (starting real Kafka is not counted)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return s, err
		}
		return s, fmt.Errorf("%w: %w", errUsage, err)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	case s.records < 1:
		return s, fmt.Errorf("-records %d: want at least 1", s.records)
	case s.lag < 0:
		return s, fmt.Errorf("-lag %v: negative", s.lag)
	case s.consumeWait <= 0 || s.timeout <= 0:
		return s, errors.New("-consume-wait and -timeout must be positive")
	case s.realKafka && s.brokers != "":
		return s, errors.New("-realkafka and -brokers: give one cluster, not two")
	case s.kip1243 && !s.realKafka:
		return s, errors.New("-kip1243 needs -realkafka: it starts real brokers with the KIP-1243 agent (the embedded cluster speaks KIP-1243 with -native)")
	}
	if s.realKafka || s.brokers != "" {
		for _, name := range []string{"lag", "error-mode", "native"} {
			if set[name] {
				return s, fmt.Errorf("-%s applies to the embedded cluster only, not to -realkafka or -brokers", name)
			}
		}
	}
	if s.errorMode && !s.native {
		return s, errors.New("-error-mode needs -native: brokers without KIP-1243 never answer INCONSISTENT_METADATA")
	}
	return s, nil
}

// run is the whole command; main only adds signals and the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	s, err := parse(args, stderr)
	if err != nil {
		return err
	}
	switch {
	case s.brokers != "":
		fmt.Fprintf(stdout, "Cluster at %s.\n\n", s.brokers)
		return sideBySide(ctx, s, stdout, target{seeds: strings.Split(s.brokers, ","), prefix: randomPrefix()})
	case s.realKafka:
		return runRealKafka(ctx, s, stdout)
	}
	return runEmbedded(ctx, s, stdout)
}

func randomPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // never fails
	return "kconsist-ryw-" + hex.EncodeToString(b[:])
}

func runEmbedded(ctx context.Context, s settings, out io.Writer) error {
	lc, err := localcluster.New(localcluster.Brokers(3),
		localcluster.BrokerLag(1, s.lag), localcluster.BrokerLag(2, s.lag),
		localcluster.ErrorMode(s.errorMode), localcluster.Native(s.native),
		// Writes answered at commit, as on Kafka 4.4: a lagging broker is
		// felt by reads, which is what this example shows.
		localcluster.WriteAnswers(localcluster.WritesAtCommit))
	if err != nil {
		return fmt.Errorf("start the local cluster: %w", err)
	}
	defer lc.Close()
	if s.native {
		mode := "hold a request until they catch up"
		if s.errorMode {
			mode = "answer INCONSISTENT_METADATA until they catch up"
		}
		fmt.Fprintf(out, "Embedded local cluster (KIP-1243): 3 brokers, brokers 1 and 2 apply metadata changes %v late\n", s.lag)
		fmt.Fprintf(out, "  and, given a newer token, %s.\n", mode)
	} else {
		fmt.Fprintf(out, "Embedded local cluster behaving like Apache Kafka 4.4 (no KIP-1243): 3 brokers, brokers 1 and 2\n")
		fmt.Fprintf(out, "  apply metadata changes %v late. The factory makes tokens from KRaft offsets and waits itself.\n", s.lag)
	}
	fmt.Fprintf(out, "  bootstrap %s, cluster id %s\n\n", strings.Join(lc.Addrs(), ","), lc.ClusterID())
	return sideBySide(ctx, s, out, target{seeds: lc.Addrs(), prefix: "ryw", lc: lc})
}

func runRealKafka(ctx context.Context, s settings, out io.Writer) error {
	fmt.Fprintf(out, "Starting 3 Apache Kafka %s nodes on loopback (child JVMs; Kafka is fetched by Maven on first use)...\n", kafkatest.KafkaVersion)
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	opts := []kafkatest.Opt{kafkatest.Nodes(3)}
	if s.kip1243 {
		fmt.Fprintln(out, "  with the KIP-1243 agent: brokers send tokens and hold a request until they catch up")
		opts = append(opts, kafkatest.KIP1243())
	}
	c, err := kafkatest.StartCluster(sctx, opts...)
	if err != nil {
		if errors.Is(err, kafkatest.ErrMissingTool) {
			return fmt.Errorf("-realkafka runs Apache Kafka as Java processes: %w", err)
		}
		return fmt.Errorf("start Apache Kafka: %w", err)
	}
	defer c.Close()
	fmt.Fprintf(out, "  started in %s: bootstrap %s, cluster id %s\n", ms(time.Since(start)), strings.Join(c.BootstrapAddrs(), ","), c.ClusterID())
	// The first produce on a fresh cluster takes about 2s, whoever sends
	// it; a warm-up keeps that out of the first column.
	fmt.Fprintln(out, "  warming up (one uncounted plain run)...")
	wctx, wcancel := context.WithTimeout(ctx, s.timeout)
	defer wcancel()
	warm := s
	warm.records = 1
	if _, err := plainFlow(wctx, warm, c.BootstrapAddrs(), randomPrefix()+"-warmup"); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	fmt.Fprintln(out)
	return sideBySide(ctx, s, out, target{seeds: c.BootstrapAddrs(), prefix: randomPrefix(), realKafka: true, native: s.kip1243})
}

// target is the cluster both flows run on.
type target struct {
	seeds     []string
	prefix    string                // topic name prefix
	lc        *localcluster.Cluster // the embedded cluster, which counts; or nil
	realKafka bool
	native    bool // the factory takes tokens from headers only (ModeNative)
}

func sideBySide(ctx context.Context, s settings, out io.Writer, t target) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	printFlow(out, s)
	fres, err := measured(t.lc, func() (*result, error) { return factoryFlow(ctx, s, t.seeds, t.prefix+"-factory", t.native) })
	if err != nil {
		return err
	}
	pres, err := measured(t.lc, func() (*result, error) { return plainFlow(ctx, s, t.seeds, t.prefix+"-plain") })
	if err != nil {
		return err
	}
	printTable(out, fres, pres)
	printLegend(out, t.lc != nil)
	return verdict(out, s, t, fres, pres)
}

func printFlow(out io.Writer, s settings) {
	fmt.Fprintf(out, "Flow: create topic (3 partitions) → produce %d records → consume them →\n", s.records)
	fmt.Fprintln(out, "      create a second topic (2 partitions) → describe it 3× (ListTopics, ListEndOffsets).")
	fmt.Fprintln(out)
}

// measured runs flow and, on the embedded cluster, records what the
// cluster counted meanwhile.
func measured(lc *localcluster.Cluster, flow func() (*result, error)) (*result, error) {
	if lc == nil {
		return flow()
	}
	before := lc.Stats()
	res, err := flow()
	if err != nil {
		return nil, err
	}
	after := lc.Stats()
	res.staleServed = after.StaleAnswers - before.StaleAnswers
	res.held = after.Waits - before.Waits
	res.clusterStats = true
	return res, nil
}

// result is what one flow saw.
type result struct {
	name        string
	stale       []string // stale reads the application saw, described
	errs        []string // errors the application got, described
	produced    int
	consumed    int
	retried     uint64 // INCONSISTENT_METADATA answers retried (factory)
	metadataReq int64
	requests    int64
	phases      [4]time.Duration
	tokenKnown  bool
	token       string // readable form, f.Token().String()
	tokenText   string // the form to hand over, f.Token().Encode()
	offReason   error  // why the factory made no tokens (EventConsistencyOff)
	limited     error  // what the factory could not cover (EventConsistencyLimited)

	clusterStats bool  // the next two are known
	staleServed  int64 // answers the cluster changed because a broker lagged
	held         int64 // requests the cluster held until the broker caught up
}

var phaseNames = [4]string{"create", "produce", "consume", "create+describe"}

func (r *result) total() time.Duration {
	var d time.Duration
	for _, p := range r.phases {
		d += p
	}
	return d
}

func (r *result) staleOrErr(what string, err error) {
	if isUnknownTopic(err) {
		r.stale = append(r.stale, fmt.Sprintf("%s: %v", what, err))
	}
	r.errs = append(r.errs, fmt.Sprintf("%s: %v", what, err))
}

func isUnknownTopic(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID)
}

// requestCounter counts the requests a client writes, and its Metadata
// requests apart: a client that retries a topic it cannot find asks for
// metadata again and again.
type requestCounter struct{ all, metadata atomic.Int64 }

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	c.all.Add(1)
	if key == kmsg.Metadata.Int16() {
		c.metadata.Add(1)
	}
}

// adminClient is what a flow asks of an admin client: *kadm.Client for the
// plain flow, *admin.Client (which reads past franz-go's metadata cache) for
// the factory's.
type adminClient interface {
	CreateTopic(ctx context.Context, partitions int32, replicationFactor int16, configs map[string]*string, topic string) (kadm.CreateTopicResponse, error)
	DeleteTopics(ctx context.Context, topics ...string) (kadm.DeleteTopicResponses, error)
	ListTopics(ctx context.Context, topics ...string) (kadm.TopicDetails, error)
	ListEndOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error)
}

// clients are the operations a flow needs, made either by a factory or
// plainly.
type clients struct {
	admin   adminClient
	produce func(ctx context.Context, topic, key, value string) error
	// consume polls topic from the start until want distinct keys arrived
	// or wait passed, reporting fetch errors to onErr.
	consume func(ctx context.Context, topic string, want int, wait time.Duration, onErr func(error)) (int, error)
	close   func()
}

func factoryFlow(ctx context.Context, s settings, seeds []string, prefix string, native bool) (*result, error) {
	counter := &requestCounter{}
	var (
		offMu      sync.Mutex
		offErr     error
		limitedErr error
	)
	observer := factory.ObserverFunc(func(ev factory.Event) {
		offMu.Lock()
		defer offMu.Unlock()
		switch ev.Kind {
		case factory.EventConsistencyOff:
			offErr = ev.Err
		case factory.EventConsistencyLimited:
			limitedErr = ev.Err
		}
	})
	mode := factory.ModeAuto
	if native {
		mode = factory.ModeNative
	}
	f, err := factory.New(factory.BootstrapServers(seeds...), factory.ClientID("readyourwrites-factory"),
		factory.Consistency(mode), factory.WithObserver(observer), factory.KgoOpts(kgo.WithHooks(counter)))
	if err != nil {
		return nil, err
	}
	defer f.Close(context.Background())
	adm, err := f.Admin()
	if err != nil {
		return nil, err
	}
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	if err != nil {
		adm.Close(context.Background())
		return nil, err
	}
	c := clients{
		admin: adm,
		produce: func(ctx context.Context, topic, key, value string) error {
			_, err := p.Produce(ctx, producer.Record[string, string]{Topic: topic, Key: key, Value: value})
			return err
		},
		consume: func(ctx context.Context, topic string, want int, wait time.Duration, onErr func(error)) (int, error) {
			cons, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(topic),
				factory.AutoOffsetReset(factory.ResetEarliest))
			if err != nil {
				return 0, err
			}
			defer cons.Close(context.Background())
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			seen := map[string]bool{}
			for len(seen) < want && ctx.Err() == nil {
				recs, err := cons.Poll(ctx, 0)
				if err != nil && ctx.Err() == nil {
					for _, e := range unjoin(err) {
						onErr(e)
					}
				}
				for _, r := range recs {
					seen[r.Key] = true
				}
			}
			return len(seen), nil
		},
		close: func() {
			_ = p.Close(context.Background())
			adm.Close(context.Background())
		},
	}
	res, err := flow(ctx, s, "factory (kconsist)", prefix, c)
	if err != nil {
		return nil, err
	}
	tok := f.Token()
	res.tokenKnown = !tok.IsUnknown()
	res.token, res.tokenText = tok.String(), tok.Encode()
	offMu.Lock()
	res.offReason, res.limited = offErr, limitedErr
	offMu.Unlock()
	res.retried = f.Stats().InconsistentMetadata
	res.requests = counter.all.Load()
	res.metadataReq = counter.metadata.Load()
	return res, nil
}

func plainFlow(ctx context.Context, s settings, seeds []string, prefix string) (*result, error) {
	counter := &requestCounter{}
	base := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("readyourwrites-plain"), kgo.WithHooks(counter)}
	admCl, err := kgo.NewClient(base...)
	if err != nil {
		return nil, err
	}
	prodCl, err := kgo.NewClient(base...)
	if err != nil {
		admCl.Close()
		return nil, err
	}
	c := clients{
		admin: kadm.NewClient(admCl),
		produce: func(ctx context.Context, topic, key, value string) error {
			return prodCl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}).FirstErr()
		},
		consume: func(ctx context.Context, topic string, want int, wait time.Duration, onErr func(error)) (int, error) {
			cl, err := kgo.NewClient(append(base, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
			if err != nil {
				return 0, err
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			seen := map[string]bool{}
			for len(seen) < want && ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				fs.EachError(func(t string, p int32, err error) {
					if ctx.Err() == nil {
						onErr(fmt.Errorf("fetch %s[%d]: %w", t, p, err))
					}
				})
				fs.EachRecord(func(r *kgo.Record) { seen[string(r.Key)] = true })
			}
			return len(seen), nil
		},
		close: func() {
			prodCl.Close()
			admCl.Close()
		},
	}
	res, err := flow(ctx, s, "plain kgo/kadm", prefix, c)
	if err != nil {
		return nil, err
	}
	res.requests = counter.all.Load()
	res.metadataReq = counter.metadata.Load()
	return res, nil
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// flow runs create → produce → consume → create+describe with c, then
// deletes its topics and closes c. Only a cancelled ctx is an error: what
// the brokers answer is the result.
func flow(ctx context.Context, s settings, name, prefix string, c clients) (*result, error) {
	defer c.close()
	r := &result{name: name}
	orders, invoices := prefix+"-orders", prefix+"-invoices"
	defer func() {
		// Best effort: the topics are the run's own.
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = c.admin.DeleteTopics(dctx, orders, invoices)
	}()

	start := time.Now()
	if err := createTopic(ctx, c.admin, orders, 3); err != nil {
		r.staleOrErr("CreateTopics", err)
	}
	r.phases[0] = time.Since(start)

	start = time.Now()
	for i := range s.records {
		if err := c.produce(ctx, orders, fmt.Sprint("key-", i), "value"); err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: produce: %w", name, ctx.Err())
			}
			r.staleOrErr(fmt.Sprintf("Produce record %d", i), err)
			continue
		}
		r.produced++
	}
	r.phases[1] = time.Since(start)

	start = time.Now()
	if r.produced > 0 {
		n, err := c.consume(ctx, orders, r.produced, s.consumeWait, func(err error) { r.staleOrErr("Poll", err) })
		if err != nil {
			return nil, fmt.Errorf("%s: consume: %w", name, err)
		}
		r.consumed = n
	}
	r.phases[2] = time.Since(start)

	start = time.Now()
	if err := createTopic(ctx, c.admin, invoices, 2); err != nil {
		r.staleOrErr("CreateTopics", err)
	}
	for range 3 {
		describe(ctx, c.admin, invoices, 2, r)
	}
	r.phases[3] = time.Since(start)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%s: %w", name, ctx.Err())
	}
	return r, nil
}

func createTopic(ctx context.Context, adm adminClient, topic string, partitions int32) error {
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil {
		return err
	}
	return resp.Err
}

// describe reads topic the way a dashboard would, right after creating it,
// and records every answer that does not show it as created.
func describe(ctx context.Context, adm adminClient, topic string, partitions int, r *result) {
	topics, err := adm.ListTopics(ctx, topic)
	switch {
	case err != nil:
		r.staleOrErr("ListTopics", err)
	case !topics.Has(topic):
		r.stale = append(r.stale, "ListTopics: the new topic is missing")
	case topics[topic].Err != nil:
		r.staleOrErr("ListTopics", topics[topic].Err)
	case len(topics[topic].Partitions) != partitions:
		r.stale = append(r.stale, fmt.Sprintf("ListTopics: %d partitions, created %d", len(topics[topic].Partitions), partitions))
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	switch {
	case err != nil:
		r.staleOrErr("ListEndOffsets", err)
	case len(ends[topic]) != partitions:
		r.stale = append(r.stale, fmt.Sprintf("ListEndOffsets: %d partitions, created %d", len(ends[topic]), partitions))
	}
}
