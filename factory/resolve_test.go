package factory

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// kfakeOn starts a one-broker cluster listening on ip:port.
func kfakeOn(t *testing.T, id, ip string, port int) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID(id), kfake.SeedTopics(1, "t"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(ip, fmt.Sprint(port)))
		}))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// TestBootstrapNameResolvedAgain moves the bootstrap DNS name from cluster A
// (127.0.0.1) to cluster B (127.0.0.2) and stops A. The factory resolves the
// name again instead of keeping A's address, finds B, and delivers there.
func TestBootstrapNameResolvedAgain(t *testing.T) { moveBootstrapName(t, false) }

// TestBootstrapNameMovedBeforeFirstProbe is the same move made before the
// factory's background probe of the bootstrap servers first answered (on
// a loaded machine it can come after the first record is acknowledged):
// the probe then names cluster B, and the cluster A the producer reached
// is known only from its own answers. Learnt from the probe alone, the
// move was no change, and the record that failed on B with A's topic id
// (UNKNOWN_TOPIC_ID) was delivered as failed, not sent again.
func TestBootstrapNameMovedBeforeFirstProbe(t *testing.T) { moveBootstrapName(t, true) }

func moveBootstrapName(t *testing.T, probeLate bool) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	a := kfakeOn(t, "cluster-a", "127.0.0.1", port)
	b := kfakeOn(t, "cluster-b", "127.0.0.2", port)

	var answer atomic.Value
	answer.Store("127.0.0.1")
	var mu sync.Mutex
	seen := map[string]int{}
	resolve := func(_ context.Context, host string) ([]string, error) {
		if host != "kafka.test" {
			return nil, fmt.Errorf("unexpected host %q", host)
		}
		ip := answer.Load().(string)
		mu.Lock()
		seen[ip]++
		mu.Unlock()
		return []string{ip}, nil
	}
	f, err := New(BootstrapServers(fmt.Sprintf("kafka.test:%d", port)), Resolver(resolve), RetryBackoff(20*time.Millisecond))
	require.NoError(t, err)
	defer f.Close(context.Background())
	moved := make(chan struct{})
	if probeLate {
		w := f.s.Watcher()
		probe := w.Probe
		w.Probe = func(ctx context.Context) (string, error) {
			select {
			case <-moved:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			return probe(ctx)
		}
	}
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "to-a"})
	require.NoError(t, err)

	answer.Store("127.0.0.2") // the DNS record moves
	a.Close()
	close(moved)
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "to-b"})
	require.NoError(t, err)
	require.Equal(t, int64(1), testkit.EndOffset(ctx, t, b.ListenAddrs()[0], "t"))
	require.Equal(t, "cluster-b", f.s.Watcher().Cluster())

	mu.Lock()
	defer mu.Unlock()
	require.NotZero(t, seen["127.0.0.1"])
	require.NotZero(t, seen["127.0.0.2"], "the name was resolved again after the move")
}
