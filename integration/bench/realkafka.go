package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
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
	c := kafkatest.Start(r, kafkatest.Nodes(3))
	startup = time.Since(t0)
	logf("real Kafka: 3 nodes ready in %v", startup.Round(time.Millisecond))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
	if err != nil {
		return nil, startup, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 3, 3, nil, "overhead")
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return nil, startup, fmt.Errorf("real Kafka: create topic: %w", err)
	}
	// Wait until every partition has its three replicas in sync.
	for {
		topics, err := adm.ListTopics(ctx, "overhead")
		if err == nil && topics["overhead"].Err == nil && len(topics["overhead"].Partitions) == 3 {
			full := true
			for _, p := range topics["overhead"].Partitions {
				full = full && len(p.ISR) == 3 && p.Leader >= 0
			}
			if full {
				break
			}
		}
		select {
		case <-ctx.Done():
			return nil, startup, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	res, err = runOverhead(ctx, "Apache Kafka 4.4, 3 nodes", c.BootstrapAddrs(), "overhead", consistency.MustOf(c.ClusterID(), 1<<40), cfg, nil, logf)
	return res, startup, err
}
