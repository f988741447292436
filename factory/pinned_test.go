package factory

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

// warnings keeps the messages logged at Warn or above.
type warnings struct{ testkit.Warnings }

func (w *warnings) all() []string { return w.All() }

func (w *warnings) count() int { return len(w.All()) }

// fromRetired reports whether a warning is franz-go's note that a request
// of a client being closed was cancelled: the retired client's last words,
// which may come after its close returned.
func fromRetired(msg string) bool {
	return strings.Contains(msg, "requeueing unattempted request") && strings.Contains(msg, "context canceled")
}

// retiredClients is a kgo hook that remembers the clients closed.
type retiredClients struct {
	mu     sync.Mutex
	closed map[*kgo.Client]bool
}

func (h *retiredClients) OnClientClosed(cl *kgo.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed == nil {
		h.closed = make(map[*kgo.Client]bool)
	}
	h.closed[cl] = true
}

func (h *retiredClients) isClosed(cl *kgo.Client) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed[cl]
}

// TestPinnedSwitchFailsFast: once a pinned factory knows that its cluster
// is gone from behind the bootstrap address, each record fails at once
// with ErrClusterChanged instead of waiting in a client that keeps
// reconnecting to the other cluster; the change is reported once, nothing
// is logged while records keep failing, franz-go's SASL hint is not
// logged for the misroute, and the other cluster is asked at most about
// once a second (the producer's recheck, no reconnect loop).
func TestPinnedSwitchFailsFast(t *testing.T) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	warns := &warnings{}
	closed := &retiredClients{}
	p, a := pinnedProducerOnA(ctx, t, port, Logger(slog.New(warns)), KgoOpts(kgo.WithHooks(closed)))
	old := p.Kgo()

	a.Close()
	b := startOnPort(t, "cluster-b", port)
	var asked, produced atomic.Int32
	b.ControlKey(18, func(kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		asked.Add(1)
		return nil, nil, false
	})
	b.ControlKey(0, func(kmsg.Request) (kmsg.Response, error, bool) {
		b.KeepControl()
		produced.Add(1)
		return nil, nil, false
	})
	// The first record fails once the change is found.
	_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "b"})
	require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)

	// The producer retired its client for an idle one; the old client's
	// last words (franz-go logs the requests its close cancels) end once
	// it is closed.
	require.NotSame(t, old, p.Kgo(), "the client was not retired")
	testkit.WaitFor(ctx, t, "the retired client to close", func() bool { return closed.isClosed(old) })
	// The change's warning comes from the factory's event goroutine: in
	// before the window, so that it is not taken for one while records fail.
	testkit.WaitFor(ctx, t, "the cluster-changed warning", func() bool {
		return slices.ContainsFunc(warns.all(), func(m string) bool { return strings.HasPrefix(m, "kconsist: cluster-changed") })
	})
	warned, askedBefore := warns.count(), asked.Load()

	// Records paced 10 ms apart, so that the window spans more than one
	// recheck (1 s) however fast the machine is.
	const records = 150
	window := time.Now()
	var slowest time.Duration
	for range records {
		start := time.Now()
		_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "b"})
		slowest = max(slowest, time.Since(start))
		require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)
		time.Sleep(10 * time.Millisecond)
	}
	elapsed := time.Since(window)
	t.Logf("%d records in %v, the slowest failed in %v; %d connections to the other cluster",
		records, elapsed, slowest, asked.Load()-askedBefore)
	// A generous bound on a measured time: a record fails in about a
	// millisecond, and one given to the client instead waits for its
	// context's end (the 30 s of testkit.Ctx: ErrorIs above fails then).
	require.Less(t, slowest, 5*time.Second, "a record took that long to fail")
	var during []string
	for _, m := range warns.all()[warned:] {
		if !fromRetired(m) {
			during = append(during, m)
		}
	}
	require.Empty(t, during, "warnings while records fail")
	// One recheck a second at most, each one ApiVersions, plus one for a
	// check due as the window opened: the bound follows the window's
	// measured length, so a loaded machine that stretches it cannot fail
	// the test; a reconnect loop asks many times a second.
	require.LessOrEqual(t, asked.Load()-askedBefore, int32(elapsed/time.Second)+2,
		"connections to the other cluster in %v", elapsed)
	require.Zero(t, produced.Load(), "nothing is written to the other cluster")
	var changed int
	for _, m := range warns.all() {
		require.NotContains(t, m, "SASL")
		if strings.HasPrefix(m, "kconsist: cluster-changed") {
			changed++
		}
	}
	require.Equal(t, 1, changed, "the change is reported once: %q", warns.all())
}

// TestPinnedClusterComesBack: a pinned producer that refuses records asks
// the bootstrap servers again now and then (retry.backoff.ms), and delivers
// once they name the pinned cluster again.
func TestPinnedClusterComesBack(t *testing.T) {
	ctx := testkit.Ctx(t)
	port := freePort(t)
	p, a := pinnedProducerOnA(ctx, t, port, RetryBackoff(50*time.Millisecond))

	a.Close()
	b := startOnPort(t, "cluster-b", port)
	_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "b"})
	require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)

	b.Close()
	back := startOnPort(t, "cluster-a", port)
	for {
		_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "again"})
		if err == nil {
			break
		}
		require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)
		time.Sleep(20 * time.Millisecond)
	}
	require.Equal(t, int64(1), testkit.EndOffset(ctx, t, back.ListenAddrs()[0], "t"))
}
