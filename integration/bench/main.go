// Command bench measures what kconsist costs and what it buys, against plain
// franz-go in the same run, and writes the results into BENCHMARKS.md (between
// its GENERATED markers, leaving the rest of the file alone) with PNG charts.
//
//	go run ./integration/bench              # local cluster: overhead, read-your-writes, misroute (< 10 min)
//	go run ./integration/bench -quick       # the same, small (< 1 min); the package test runs it
//	go run ./integration/bench -realkafka   # also the overhead on 3 Apache Kafka 4.4 nodes (needs java, mvn)
//	go run ./integration/bench -realkafka -local=false   # only real Kafka
//	go run ./integration/bench -realkafka-ryw -local=false   # read-your-writes and emulated-token overhead on real Kafka
//	go run ./integration/bench -scale 3     # three times the overhead rounds: narrower intervals, longer run
//	go run ./integration/bench -consume-only [-realkafka]   # only the consumer comparison
//	go run ./integration/bench -misroute-only [-realkafka]  # only misroute recovery, with the Java producer
//
// Everything runs on loopback, in-process (the local cluster, kfake) or as
// child JVMs (real Kafka) that are stopped before the command exits.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/integration/localcluster"
)

// options say what to run and where the results go.
type options struct {
	Quick     bool
	Scale     int // multiplies the overhead rounds and blocks
	Local     bool
	RealKafka bool
	Out       string // BENCHMARKS.md
	Charts    string // directory of the PNG charts
	Command   string // as typed, for the report
	Logf      func(string, ...any)

	// ConsumeOnly runs the consumer comparison alone (on the local
	// cluster and, with RealKafka, on real Kafka).
	ConsumeOnly bool
	// MisrouteOnly runs misroute recovery alone, the Java producer
	// included (locally and, with RealKafka, on real Kafka).
	MisrouteOnly bool
	// RealKafkaRYW runs read-your-writes and the overhead with emulated
	// tokens on 3 real Kafka nodes (section realkafka-ryw).
	RealKafkaRYW bool
}

// overheadSegmentBytes is kfake's segment size in the overhead cluster. kfake
// keeps each partition's log in an in-memory file that grows by doubling up
// to the segment size (100 MiB by default): the copies of a growing file
// land on whichever client is producing at that moment and made single
// bursts vary by 2x. Small segments keep that cost small and even; both
// clients share the cluster and the setting.
const overheadSegmentBytes = 2 << 20

// plan sizes every measurement.
type plan struct {
	overhead, kafka overheadConfig
	ryw             rywConfig
	misroute        misrouteConfig
	// misrouteJava, kmisroute: -misroute-only, locally and on real Kafka.
	misrouteJava, kmisroute misrouteConfig

	consume, kconsume consumeConfig
	kryw              rywConfig // -realkafka-ryw
}

// planFor returns the plan of a run; scale (at least 1) multiplies the
// rounds and blocks of both overhead measurements.
func planFor(quick bool, scale int) plan {
	p := plan{
		overhead:     overheadConfig{Rounds: 480, Blocks: 80, Records: 50000, Latencies: 1000, ValueSize: 1024},
		kafka:        overheadConfig{Rounds: 120, Blocks: 20, Records: 20000, Latencies: 300, ValueSize: 1024},
		ryw:          rywConfig{Lags: []time.Duration{0, 100 * time.Millisecond, 500 * time.Millisecond}, Trials: 50, Timeout: 10 * time.Second},
		misroute:     misrouteConfig{Trials: 30, Timeout: 15 * time.Second},
		misrouteJava: misrouteConfig{Trials: 30, Repairs: 20, Hold: 3 * time.Second, Timeout: 15 * time.Second, Java: true},
		kmisroute:    misrouteConfig{Repairs: 20, Hold: 3 * time.Second, Timeout: 30 * time.Second, Java: true},
		consume:      consumeConfig{Rounds: 20, Records: 1000000, ValueSize: 100},
		kconsume:     consumeConfig{Rounds: 10, Records: 1000000, ValueSize: 100},
	}
	p.kryw = rywConfig{Trials: 100, Timeout: 30 * time.Second}
	if quick {
		p.kryw.Trials = 2
		p.overhead = overheadConfig{Rounds: 4, Blocks: 2, Records: 2000, Latencies: 50, ValueSize: 1024}
		p.kafka = overheadConfig{Rounds: 4, Blocks: 2, Records: 2000, Latencies: 50, ValueSize: 1024}
		p.ryw.Trials = 2
		p.misroute.Trials = 2
		p.misrouteJava.Trials, p.misrouteJava.Repairs, p.misrouteJava.Hold = 2, 2, time.Second
		p.kmisroute.Repairs, p.kmisroute.Hold = 2, time.Second
		p.consume = consumeConfig{Rounds: 2, Records: 20000, ValueSize: 100}
		p.kconsume = p.consume
	}
	p.consume.Rounds *= scale
	p.kconsume.Rounds *= scale
	for _, c := range []*overheadConfig{&p.overhead, &p.kafka} {
		c.Rounds *= scale
		c.Blocks *= scale
	}
	return p
}

func main() {
	var o options
	flag.BoolVar(&o.Quick, "quick", false, "small repetition counts (under a minute); numbers are not for publishing")
	flag.BoolVar(&o.Local, "local", true, "run the local-cluster benchmarks (consumer, overhead, read-your-writes, misroute)")
	flag.BoolVar(&o.RealKafka, "realkafka", false, "also measure the overhead on 3 real Apache Kafka 4.4 nodes (java + mvn; several minutes)")
	flag.BoolVar(&o.RealKafkaRYW, "realkafka-ryw", false, "on 3 real Apache Kafka 4.4 nodes: read-your-writes latency and the overhead with emulated tokens (java + mvn; several minutes)")
	flag.BoolVar(&o.ConsumeOnly, "consume-only", false, "run only the consumer comparison (local; with -realkafka also on real Kafka)")
	flag.BoolVar(&o.MisrouteOnly, "misroute-only", false, "run only misroute recovery against plain kgo and the Java 4.4 producer (local; with -realkafka also on real Kafka; needs java, mvn)")
	flag.IntVar(&o.Scale, "scale", 1, "multiply the overhead rounds and blocks by this (1 to 20): narrower intervals, a run about that many times longer")
	flag.StringVar(&o.Out, "out", "BENCHMARKS.md", "report to update (generated sections only)")
	flag.StringVar(&o.Charts, "charts", "docs/bench", "directory for the PNG charts")
	flag.Parse()
	if o.Scale < 1 || o.Scale > 20 {
		fmt.Fprintf(os.Stderr, "bench: -scale %d: want 1 to 20\n", o.Scale)
		os.Exit(2)
	}
	o.Command = "go run ./integration/bench"
	if len(os.Args) > 1 {
		o.Command += " " + strings.Join(os.Args[1:], " ")
	}
	o.Logf = log.Printf
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

// run measures what o asks for and writes the report and charts.
func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.Charts, 0o755); err != nil {
		return err
	}
	p := planFor(o.Quick, max(o.Scale, 1))
	m := thisMachine()
	sections := map[string]string{}
	if o.MisrouteOnly {
		if err := runMisrouteOnly(ctx, o, p, m, sections); err != nil {
			return err
		}
		return writeSections(o.Out, sections)
	}
	// The local producer overhead step runs first, in a fresh process, as
	// it did when its target was set. After the consumer steps it measured
	// the factory about 1% lower than alone (0.971 against 0.984 for
	// 0bd3567); kfake keeps the log of a cluster that was read from after
	// Close (about 2.5 MiB per 200,000 records of 100 bytes read), so a
	// later step runs beside the earlier steps' heap.
	steps := []struct {
		on       bool
		section  string
		minutes  int // the step's time limit: minutes + perScale × scale
		perScale int
		run      func(context.Context, options, plan, machine) (string, error)
	}{
		{o.Local && !o.ConsumeOnly, localSection, 10, 5, runLocal},
		{o.Local, consumeSection, 5, 2, runLocalConsume},
		{o.RealKafka, kconsumeSection, 10, 2, runRealConsume},
		{o.RealKafka && !o.ConsumeOnly, kafkaSection, 10, 10, runReal},
		{o.RealKafkaRYW && !o.ConsumeOnly, rywKafkaSection, 10, 10, runRealRYW},
	}
	for _, st := range steps {
		if !st.on {
			continue
		}
		limit := time.Duration(st.minutes+st.perScale*max(o.Scale, 1)) * time.Minute
		body, err := func() (string, error) {
			ctx, cancel := context.WithTimeout(ctx, limit)
			defer cancel()
			return st.run(ctx, o, p, m)
		}()
		if err != nil {
			return err
		}
		sections[st.section] = body
	}
	if len(sections) == 0 {
		return fmt.Errorf("nothing to run: -local=false and no -realkafka or -realkafka-ryw")
	}
	return writeSections(o.Out, sections)
}

func header(w *bytes.Buffer, o options, m machine, elapsed time.Duration) {
	fmt.Fprintf(w, "Command: `%s` (total %v). Machine: %s.", o.Command, elapsed.Round(time.Second), m)
	if o.Quick {
		fmt.Fprintf(w, " **-quick run: repetitions too small to judge the targets.**")
	}
	fmt.Fprintf(w, " The benchmarked clients, the cluster and the Go runtime share these CPUs.\n\n")
}

func runLocal(ctx context.Context, o options, p plan, m machine) (string, error) {
	t0 := time.Now()
	var body bytes.Buffer

	// 1. Overhead on a cluster that never lags.
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(0),
		localcluster.KfakeOpts(kfake.BrokerConfigs(map[string]string{"log.segment.bytes": strconv.Itoa(overheadSegmentBytes)})))
	if err != nil {
		return "", err
	}
	over, err := func() (*overheadResult, error) {
		defer lc.Close()
		if err := createAndWait(ctx, lc, "overhead"); err != nil {
			return nil, err
		}
		where := fmt.Sprintf("in-process local cluster (integration/localcluster), 3 brokers, apply lag 0, kfake segments of %d MiB "+
			"(`log.segment.bytes`: kfake keeps its log in in-memory files that grow by copying, and with its 100 MiB default single bursts varied by 2×)",
			overheadSegmentBytes>>20)
		return runOverhead(ctx, where, lc.Addrs(), "overhead", consistency.Unknown(), p.overhead,
			func(ctx context.Context) error { return trim(ctx, lc, "overhead") }, o.Logf)
	}()
	if err != nil {
		return "", fmt.Errorf("overhead: %w", err)
	}
	// 2. Read-your-writes.
	ryw, err := runRYW(ctx, p.ryw, o.Logf)
	if err != nil {
		return "", err
	}
	// 3. Misroute recovery.
	mis, err := runMisroute(ctx, p.misroute, o.Logf)
	if err != nil {
		return "", err
	}

	var charts []string
	cs, err := overheadCharts(over, o.Charts, "overhead_local", "Local cluster")
	if err != nil {
		return "", err
	}
	charts = append(charts, cs...)
	c, err := rywChart(ryw, o.Charts)
	if err != nil {
		return "", err
	}
	charts = append(charts, c)
	if c, err = misrouteChart(mis, o.Charts, "misroute_recovery.png"); err != nil {
		return "", err
	}
	charts = append(charts, c)

	var tables bytes.Buffer
	tables.WriteString("### 1. Producer overhead\n\n")
	overheadMarkdown(&tables, over)
	chartLinks(&tables, o.Out, charts[:2])
	tables.WriteString("### 2. Read-your-writes latency\n\n")
	rywMarkdown(&tables, ryw, p.ryw)
	chartLinks(&tables, o.Out, charts[2:3])
	tables.WriteString("### 3. Misroute recovery\n\n")
	misrouteMarkdown(&tables, mis, p.misroute, localMisrouteWhere)
	chartLinks(&tables, o.Out, charts[3:])
	// The total includes the statistics: with big runs they are not free.
	header(&body, o, m, time.Since(t0))
	body.Write(tables.Bytes())
	return body.String(), nil
}

func runReal(ctx context.Context, o options, p plan, m machine) (string, error) {
	t0 := time.Now()
	over, startup, err := runKafka(ctx, p.kafka, o.Logf)
	if err != nil {
		return "", err
	}
	charts, err := overheadCharts(over, o.Charts, "overhead_realkafka", "Apache Kafka 4.4")
	if err != nil {
		return "", err
	}
	var tables bytes.Buffer
	fmt.Fprintf(&tables, "Three combined broker+controller JVMs started by `integration/kafkatest` (ready in %v), topic of 3 partitions "+
		"with replication factor 3, every replica in sync before the first round; the topic keeps its last 256 MiB per partition "+
		"(`retention.bytes`, checked every second), which bounds the run's disk use. The factory's store starts with a token of "+
		"this cluster, as if handed over by another service, so every factory request carries it; Kafka 4.4 skips the header tag "+
		"and sends none back. This is the cost of stamping and scanning on a broker that does not implement KIP-1243.\n\n",
		startup.Round(time.Second))
	overheadMarkdown(&tables, over)
	chartLinks(&tables, o.Out, charts)
	var body bytes.Buffer
	header(&body, o, m, time.Since(t0))
	body.Write(tables.Bytes())
	return body.String(), nil
}

// trim deletes every record of topic, straight on kfake: the local cluster
// keeps records in memory, and a heap grown by earlier rounds would slow
// later ones.
func trim(ctx context.Context, lc *localcluster.Cluster, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.KfakeAddrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("trim %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
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

// createAndWait creates topic (3 partitions, replication 3) and waits until
// every broker of lc has applied it, so both clients start alike.
func createAndWait(ctx context.Context, lc *localcluster.Cluster, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.Addrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	for node := range int32(3) {
		if err := lc.WaitApplied(ctx, node, lc.LogEnd()); err != nil {
			return err
		}
	}
	return nil
}
