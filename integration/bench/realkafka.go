package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
)

// runner stands in for a *testing.T so that kafkatest.Start, which has no
// other API, can run outside go test. It implements what Start and Cluster
// call (Helper, Skip, Fatalf, Logf, TempDir, Cleanup, Failed); anything else
// reaches the nil embedded TB and panics, which is what we want to hear of.
type runner struct {
	testing.TB
	logf     func(string, ...any)
	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// fatal is the panic Fatalf raises; runKafka recovers it.
type fatal struct{ msg string }

func (r *runner) Helper()                         {}
func (r *runner) Logf(format string, args ...any) { r.logf(format, args...) }
func (r *runner) Failed() bool                    { r.mu.Lock(); defer r.mu.Unlock(); return r.failed }
func (r *runner) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	panic(fatal{fmt.Sprintf(format, args...)})
}
func (r *runner) Skip(args ...any) { r.Fatalf("skipped: %s", fmt.Sprint(args...)) }
func (r *runner) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}
func (r *runner) TempDir() string {
	dir, err := os.MkdirTemp("", "kconsist-bench-")
	if err != nil {
		r.Fatalf("TempDir: %v", err)
	}
	r.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func (r *runner) cleanup() {
	r.mu.Lock()
	fs := r.cleanups
	r.cleanups = nil
	r.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// runKafka starts three Apache Kafka 4.4 nodes and runs the overhead
// comparison on them; everything started is stopped before it returns.
func runKafka(ctx context.Context, cfg overheadConfig, logf func(string, ...any)) (res *overheadResult, startup time.Duration, err error) {
	startup, err = withKafka(ctx, logf, func(ctx context.Context, c *kafkatest.Cluster) error {
		res, err = kafkaOverhead(ctx, c, cfg, logf)
		return err
	})
	return res, startup, err
}

// withKafka starts three Apache Kafka 4.4 nodes, runs fn on them and stops
// them; fn's ctx ends, naming the node, when one exits. It returns the
// time the nodes took to start. opts are added to the nodes' settings
// (e.g. kafkatest.KIP1243()).
func withKafka(ctx context.Context, logf func(string, ...any), fn func(context.Context, *kafkatest.Cluster) error, opts ...kafkatest.Opt) (startup time.Duration, err error) {
	testing.Init() // kafkatest.Start asks testing.Short(); a no-op under go test
	r := &runner{logf: logf}
	defer r.cleanup()
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(fatal)
			if !ok {
				panic(p)
			}
			err = fmt.Errorf("real Kafka: %s", f.msg)
		}
	}()
	t0 := time.Now()
	// The bursts write about 0.5 GB/s to the nodes' disks: the retention
	// check runs every second (the default is every 5 minutes) so that the
	// topic's retention.bytes bounds what a run keeps on disk.
	c := kafkatest.Start(r, append([]kafkatest.Opt{kafkatest.Nodes(3), kafkatest.BrokerConfig("log.retention.check.interval.ms", "1000")}, opts...)...)
	startup = time.Since(t0)
	logf("real Kafka: 3 nodes ready in %v", startup.Round(time.Millisecond))
	ctx, stopWatch := watchNodes(ctx, c)
	defer stopWatch()
	err = fn(ctx, c)
	if cause := context.Cause(ctx); err != nil && cause != nil {
		err = cause // say why the run stopped: a node exited, or the time ran out
	}
	return startup, err
}

// kafkaOverhead creates the overhead topic on c and runs the overhead
// comparison on it: the factory in ModeNative with a handed token beyond
// the cluster's log, so that every request is stamped (the cost of
// stamping and scanning; an emulating factory would wait for the cluster
// to reach such a token).
func kafkaOverhead(ctx context.Context, c *kafkatest.Cluster, cfg overheadConfig, logf func(string, ...any)) (*overheadResult, error) {
	if err := createInSync(ctx, c, "overhead", overheadTopicConfigs); err != nil {
		return nil, err
	}
	cfg.Mode = factory.ModeNative
	return runOverhead(ctx, "Apache Kafka 4.4, 3 nodes", c.BootstrapAddrs(), "overhead", consistency.MustOf(c.ClusterID(), 1<<40), cfg, nil, logf)
}

// rywKafkaSection is the section of -realkafka-ryw.
const rywKafkaSection = "realkafka-ryw"

// runRealRYW starts three Apache Kafka 4.4 nodes and measures what the
// factory's default mode (auto, which emulates tokens there) costs and
// buys: the produce overhead with an empty store, as an application
// starts, and read-your-writes latency against plain kgo.
func runRealRYW(ctx context.Context, o options, p plan, m machine) (string, error) {
	t0 := time.Now()
	var over *overheadResult
	var ryw *rywResult
	startup, err := withKafka(ctx, o.Logf, func(ctx context.Context, c *kafkatest.Cluster) error {
		var err error
		if ryw, err = rywOnKafka(ctx, c.BootstrapAddrs(), p.kryw, o.Logf); err != nil {
			return fmt.Errorf("read-your-writes: %w", err)
		}
		if err = createInSync(ctx, c, "overhead", overheadTopicConfigs); err != nil {
			return err
		}
		cfg := p.kafka
		cfg.Mode = factory.ModeAuto
		over, err = runOverhead(ctx, "Apache Kafka 4.4, 3 nodes, consistency.mode auto (emulated tokens)", c.BootstrapAddrs(), "overhead",
			consistency.Unknown(), cfg, nil, o.Logf)
		return err
	})
	if err != nil {
		return "", err
	}
	charts, err := overheadCharts(over, o.Charts, "overhead_realkafka_emulated", "Apache Kafka 4.4, emulated tokens")
	if err != nil {
		return "", err
	}
	var tables bytes.Buffer
	fmt.Fprintf(&tables, "Three combined broker+controller JVMs started by `integration/kafkatest` (ready in %v); the factory in its "+
		"default consistency mode (auto), which on Kafka 4.4 makes tokens from KRaft's offsets (ApiVersions "+
		"`FinalizedFeaturesEpoch`, DescribeQuorum's high watermark; `internal/wire/emulate.go`).\n\n", startup.Round(time.Second))
	tables.WriteString("### Read-your-writes latency on Apache Kafka 4.4\n\n")
	rywKafkaMarkdown(&tables, ryw, p.kryw)
	tables.WriteString("### Producer overhead on Apache Kafka 4.4 with emulated tokens\n\n")
	fmt.Fprintf(&tables, "As in the overhead table above, but the factory's store starts empty, as an application's does, and the "+
		"factory runs in mode auto: its producer learns a token from the brokers' offsets (after each metadata read it asks the "+
		"answering broker how far it has applied) and stamps it; a request to a broker known to be at or past the token is not "+
		"held. The topic exists and is in sync before the first round, and nothing writes metadata during the run. The "+
		"factory's token at the end of the last block: %s.\n\n", over.Token)
	overheadMarkdown(&tables, over)
	chartLinks(&tables, o.Out, charts)
	var body bytes.Buffer
	header(&body, o, m, time.Since(t0))
	body.Write(tables.Bytes())
	return body.String(), nil
}

// createInSync creates topic (3 partitions, replication 3) on c and waits
// until every partition has its three replicas in sync.
func createInSync(ctx context.Context, c *kafkatest.Cluster, topic string, configs map[string]*string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 3, 3, configs, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return fmt.Errorf("real Kafka: create topic %s: %w", topic, err)
	}
	for {
		topics, err := adm.ListTopics(ctx, topic)
		if err == nil && topics[topic].Err == nil && len(topics[topic].Partitions) == 3 {
			full := true
			for _, p := range topics[topic].Partitions {
				full = full && len(p.ISR) == 3 && p.Leader >= 0
			}
			if full {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// overheadTopicConfigs bound the overhead topic's disk use to about 3 GB
// (3 partitions, 3 replicas, 256 MiB kept plus the active 64 MiB segment,
// deleted files removed after a second), however long the run. Without them
// a -scale 6 run filled a 250 GB disk, the nodes died and the run hung.
var overheadTopicConfigs = map[string]*string{
	"retention.bytes":      kadm.StringPtr(strconv.Itoa(256 << 20)),
	"segment.bytes":        kadm.StringPtr(strconv.Itoa(64 << 20)),
	"file.delete.delay.ms": kadm.StringPtr("1000"),
	"retention.ms":         kadm.StringPtr("-1"),
}

// watchNodes returns a context that ends, with an error naming the node and
// the end of its log, when one of c's nodes exits; stop ends the watch.
func watchNodes(ctx context.Context, c *kafkatest.Cluster) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for _, id := range c.NodeIDs() {
				if c.Running(id) {
					continue
				}
				logs, _ := c.LogTail(id, 20)
				cancel(fmt.Errorf("real Kafka: node %d exited during the run; end of its log:\n%s", id, logs))
				return
			}
		}
	}()
	return ctx, func() {
		close(quit)
		wg.Wait()
		cancel(nil)
	}
}
