// Command bench measures what kconsist costs and what it buys, against plain
// franz-go in the same run, and writes the results into BENCHMARKS.md (between
// its GENERATED markers, leaving the rest of the file alone) with PNG charts.
//
//	go run ./integration/bench              # local cluster: overhead, read-your-writes, misroute (< 10 min)
//	go run ./integration/bench -quick       # the same, small (< 1 min); the package test runs it
//	go run ./integration/bench -realkafka   # also the overhead on 3 Apache Kafka 4.4 nodes (needs java, mvn)
//	go run ./integration/bench -realkafka -local=false   # only real Kafka
//	go run ./integration/bench -realkafka-ryw -local=false   # read-your-writes and emulated-token overhead on real Kafka
//	go run ./integration/bench -realkafka-ryw -kip1243 -local=false   # the same on nodes with the KIP-1243 agent: plain kgo, emulated and native mode
//	go run ./integration/bench -scale 3     # three times the overhead rounds: narrower intervals, longer run
//	go run ./integration/bench -consume-only [-realkafka]   # only the consumer comparison
//	go run ./integration/bench -misroute-only [-realkafka]  # only misroute recovery, with the Java producer
//	go run ./integration/bench -curves-only [-quick]  # only how the cost grows: brokers, topics, producers, record size (section scale; -quick < 30 s, TestScaleQuick runs it)
//	go run ./integration/bench -drswitch-only   # only the DR address switch: two Apache Kafka 4.4 clusters behind one address (section drswitch-realkafka)
//	go run ./integration/bench -curves-only -realkafka -local=false  # time to usable after a create on 3 Apache Kafka 4.4 nodes (section scale-realkafka)
//
// Each step (a section of the report) runs in a child process of its own:
// the command runs itself again with -step, so a step's figures do not
// depend on what ran before it (kfake keeps the log of a cluster that was
// read from after Close, and a later step would run beside that heap);
// the parent puts the steps' sections into the report. -isolate=false runs
// every step in the command's own process instead. Everything runs on
// loopback, in the step's process (the local cluster, kfake) or as child
// JVMs (real Kafka) that are stopped before the step exits.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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
	// CurvesOnly runs "How the cost grows" alone (section scale, local
	// cluster and bare kfake); no other run includes it.
	CurvesOnly bool
	// DRSwitchOnly runs the DR address switch alone: two real Kafka 4.4
	// clusters behind one address (section drswitch-realkafka).
	DRSwitchOnly bool
	// RealKafkaRYW runs read-your-writes and the overhead with emulated
	// tokens on 3 real Kafka nodes (section realkafka-ryw).
	RealKafkaRYW bool
	// KIP1243, with RealKafkaRYW, starts the nodes with the KIP-1243
	// agent and compares plain kgo, a factory in emulated mode and one in
	// native mode (section realkafka-native) instead.
	KIP1243 bool

	// Isolate runs each step in a child process of its own (see the
	// package doc). main sets it from -isolate; a test that calls run
	// directly runs the steps in its own process unless it sets it.
	Isolate bool
	// Step, in a child, is the one step to run (its section's name), and
	// StepOut the file the step's section goes to.
	Step, StepOut string
	// spawn runs one step in a child process and returns its section
	// (spawnStep; tests replace it).
	spawn func(ctx context.Context, o options, st step, limit time.Duration) (string, error)
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
	drswitch          drConfig  // -drswitch-only
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
	p.drswitch = drConfig{Switches: 12, Every: 3 * time.Second, Warm: 5 * time.Second, Rate: 100, Java: true}
	if quick {
		p.kryw.Trials = 2
		p.overhead = overheadConfig{Rounds: 4, Blocks: 2, Records: 2000, Latencies: 50, ValueSize: 1024}
		p.kafka = overheadConfig{Rounds: 4, Blocks: 2, Records: 2000, Latencies: 50, ValueSize: 1024}
		p.ryw.Trials = 2
		p.misroute.Trials = 2
		p.misrouteJava.Trials, p.misrouteJava.Repairs, p.misrouteJava.Hold = 2, 2, time.Second
		p.kmisroute.Repairs, p.kmisroute.Hold = 2, time.Second
		p.drswitch.Switches, p.drswitch.Warm = 2, 2*time.Second
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

// bindFlags defines the command's flags on fs, writing into o.
func bindFlags(fs *flag.FlagSet, o *options) {
	fs.BoolVar(&o.Quick, "quick", false, "small repetition counts (under a minute); numbers are not for publishing")
	fs.BoolVar(&o.Local, "local", true, "run the local-cluster benchmarks (consumer, overhead, read-your-writes, misroute)")
	fs.BoolVar(&o.RealKafka, "realkafka", false, "also measure the overhead on 3 real Apache Kafka 4.4 nodes (java + mvn; several minutes)")
	fs.BoolVar(&o.RealKafkaRYW, "realkafka-ryw", false, "on 3 real Apache Kafka 4.4 nodes: read-your-writes latency and the overhead with emulated tokens (java + mvn; several minutes)")
	fs.BoolVar(&o.KIP1243, "kip1243", false, "with -realkafka-ryw: start the nodes with the KIP-1243 agent and measure plain kgo, emulated and native mode side by side (section realkafka-native) instead")
	fs.BoolVar(&o.ConsumeOnly, "consume-only", false, "run only the consumer comparison (local; with -realkafka also on real Kafka)")
	fs.BoolVar(&o.MisrouteOnly, "misroute-only", false, "run only misroute recovery against plain kgo and the Java 4.4 producer (local; with -realkafka also on real Kafka; needs java, mvn)")
	fs.BoolVar(&o.CurvesOnly, "curves-only", false, "run only how the cost grows (brokers, topics, producers per factory, record size; local cluster and bare kfake; with -realkafka also time to usable after a create on 3 Apache Kafka 4.4 nodes)")
	fs.BoolVar(&o.DRSwitchOnly, "drswitch-only", false, "run only the DR address switch: two real Apache Kafka 4.4 clusters behind one address, switched while the factory, plain kgo and the Java producer produce (needs java, mvn)")
	fs.IntVar(&o.Scale, "scale", 1, "multiply the overhead rounds and blocks (with -curves-only, the rounds of the record-size and producers-per-factory curves) by this (1 to 20): narrower intervals, a run about that many times longer")
	fs.StringVar(&o.Out, "out", "BENCHMARKS.md", "report to update (generated sections only)")
	fs.StringVar(&o.Charts, "charts", "docs/bench", "directory for the PNG charts")
	fs.BoolVar(&o.Isolate, "isolate", true, "run each step in a child process of its own; false runs them all in this process, one after another")
	fs.StringVar(&o.Step, "step", "", "internal, set by the command for its child processes: run only this step (a section name)")
	fs.StringVar(&o.StepOut, "step-out", "", "internal: with -step, the file the step's section is written to")
	fs.StringVar(&o.Command, "step-command", "", "internal: with -step, the command as typed, for the report")
}

func main() {
	var o options
	bindFlags(flag.CommandLine, &o)
	flag.Parse()
	if o.Scale < 1 || o.Scale > 20 {
		fmt.Fprintf(os.Stderr, "bench: -scale %d: want 1 to 20\n", o.Scale)
		os.Exit(2)
	}
	if o.Command == "" {
		// Typed by a user (a step run by hand included): a child is
		// told its parent's command.
		o.Command = "go run ./integration/bench"
		if len(os.Args) > 1 {
			o.Command += " " + strings.Join(os.Args[1:], " ")
		}
	}
	if o.Step != "" {
		// The parent adds the time when it logs the child's lines.
		log.SetFlags(0)
	}
	o.Logf = log.Printf
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

// A step measures one thing and returns its section of the report.
type step struct {
	name     string // the report section it writes; -step selects it
	minutes  int    // the step's time limit: minutes + perScale × scale
	perScale int
	run      func(context.Context, options, plan, machine) (string, error)
}

func (st step) limit(scale int) time.Duration {
	return time.Duration(st.minutes+st.perScale*max(scale, 1)) * time.Minute
}

// stepsOf returns the steps o asks for, in the order they run.
func stepsOf(o options) []step {
	if o.DRSwitchOnly {
		return []step{{drSection, 20, 0, runDRSwitchStep}}
	}
	all := []struct {
		on bool
		step
	}{
		{o.MisrouteOnly && o.Local, step{misrouteSection, 30, 0, misrouteJavaStep(false)}},
		{o.MisrouteOnly && o.RealKafka, step{kmisrouteSection, 30, 0, misrouteJavaStep(true)}},
		// The local producer overhead first, as when its target was set.
		{!o.MisrouteOnly && !o.CurvesOnly && o.Local && !o.ConsumeOnly, step{localSection, 10, 5, runLocal}},
		{!o.MisrouteOnly && !o.CurvesOnly && o.Local, step{consumeSection, 5, 2, runLocalConsume}},
		{!o.MisrouteOnly && o.Local && !o.ConsumeOnly && o.CurvesOnly, step{scaleSection, 30, 4, runScale}},
		{!o.MisrouteOnly && o.RealKafka && !o.ConsumeOnly && o.CurvesOnly, step{scaleKafkaSection, 40, 0, runScaleKafka}},
		{!o.MisrouteOnly && !o.CurvesOnly && o.RealKafka, step{kconsumeSection, 10, 2, runRealConsume}},
		{!o.MisrouteOnly && !o.CurvesOnly && o.RealKafka && !o.ConsumeOnly, step{kafkaSection, 10, 10, runReal}},
		{!o.MisrouteOnly && !o.CurvesOnly && o.RealKafkaRYW && !o.ConsumeOnly && !o.KIP1243, step{rywKafkaSection, 10, 10, runRealRYW}},
		{!o.MisrouteOnly && !o.CurvesOnly && o.RealKafkaRYW && !o.ConsumeOnly && o.KIP1243, step{nativeSection, 10, 14, runRealNative}},
	}
	var steps []step
	for _, s := range all {
		if s.on {
			steps = append(steps, s.step)
		}
	}
	return steps
}

// run measures what o asks for and writes the report and charts; in a
// child (o.Step set) it runs that one step and writes its section to
// o.StepOut.
func run(ctx context.Context, o options) error {
	if err := os.MkdirAll(o.Charts, 0o755); err != nil {
		return err
	}
	if o.KIP1243 && (!o.RealKafkaRYW || o.ConsumeOnly || o.MisrouteOnly) {
		return errors.New("-kip1243 needs -realkafka-ryw (and neither -consume-only nor -misroute-only)")
	}
	steps := stepsOf(o)
	if o.Step != "" {
		return runChild(ctx, o, steps)
	}
	if len(steps) == 0 {
		if o.MisrouteOnly {
			return errors.New("nothing to run: -local=false and no -realkafka")
		}
		return errors.New("nothing to run: -local=false and no -realkafka or -realkafka-ryw")
	}
	spawn := o.spawn
	if spawn == nil {
		spawn = spawnStep
	}
	sections := map[string]string{}
	for _, st := range steps {
		var body string
		var err error
		if o.Isolate {
			body, err = spawn(ctx, o, st, st.limit(o.Scale))
		} else {
			body, err = runStep(ctx, o, st)
		}
		if err != nil {
			return err
		}
		sections[st.name] = body
	}
	return writeSections(o.Out, sections)
}

// runStep runs st in this process within its time limit.
func runStep(ctx context.Context, o options, st step) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, st.limit(o.Scale))
	defer cancel()
	return st.run(ctx, o, planFor(o.Quick, max(o.Scale, 1)), thisMachine())
}

// runChild runs the step o.Step, which must be one of steps (the steps
// the other flags ask for), and writes its section to o.StepOut.
func runChild(ctx context.Context, o options, steps []step) error {
	if o.StepOut == "" {
		return errors.New("-step needs -step-out")
	}
	var names []string
	for _, st := range steps {
		names = append(names, st.name)
		if st.name != o.Step {
			continue
		}
		o.Logf("step %s: running in process %d", st.name, os.Getpid())
		body, err := runStep(ctx, o, st)
		if err != nil {
			return fmt.Errorf("step %s: %w", st.name, err)
		}
		return os.WriteFile(o.StepOut, []byte(body), 0o644)
	}
	return fmt.Errorf("-step %q: not a step of this run (its steps: %s)", o.Step, strings.Join(names, ", "))
}

// childArgs returns the arguments that make the command run step name of
// o alone, writing its section to out.
func childArgs(o options, name, out string) []string {
	b := strconv.FormatBool
	return []string{
		"-step=" + name, "-step-out=" + out, "-step-command=" + o.Command,
		"-quick=" + b(o.Quick), "-scale=" + strconv.Itoa(max(o.Scale, 1)), "-local=" + b(o.Local),
		"-realkafka=" + b(o.RealKafka), "-realkafka-ryw=" + b(o.RealKafkaRYW), "-kip1243=" + b(o.KIP1243),
		"-consume-only=" + b(o.ConsumeOnly), "-misroute-only=" + b(o.MisrouteOnly), "-curves-only=" + b(o.CurvesOnly), "-drswitch-only=" + b(o.DRSwitchOnly),
		"-out=" + o.Out, "-charts=" + o.Charts,
	}
}

// spawnStep runs st in a child process, this executable run again with
// childArgs, and returns the section it wrote. The child's output goes to
// o.Logf line by line. The child ends the step at its limit itself; a
// child still running 2 minutes later, or when ctx ends, is interrupted
// (it stops its JVMs on SIGINT) and killed a minute after that.
func spawnStep(ctx context.Context, o options, st step, limit time.Duration) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("step %s: %w", st.name, err)
	}
	dir, err := os.MkdirTemp("", "kconsist-bench-step-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, st.name+".md")

	ctx, cancel := context.WithTimeout(ctx, limit+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, childArgs(o, st.name, out)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			o.Logf("%s", sc.Text())
		}
		_, _ = io.Copy(io.Discard, pr) // after a line too long: keep the child unblocked
	}()
	err = cmd.Run()
	pw.Close()
	<-relayed
	if err != nil {
		return "", fmt.Errorf("step %s (child process): %w", st.name, err)
	}
	body, err := os.ReadFile(out)
	if err != nil {
		return "", fmt.Errorf("step %s (child process): no section: %w", st.name, err)
	}
	return string(body), nil
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
