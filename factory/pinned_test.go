package factory

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

// warnings is a slog handler that keeps the messages logged at Warn or
// above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return true }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		w.mu.Lock()
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		w.msgs = append(w.msgs, msg)
		w.mu.Unlock()
	}
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}

func (w *warnings) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.msgs)
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
	p, a := pinnedProducerOnA(ctx, t, port, Logger(slog.New(warns)))

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

	time.Sleep(100 * time.Millisecond) // the old client's last words
	warned, askedBefore := warns.count(), asked.Load()
	window := time.Now()
	var slowest time.Duration
	for time.Since(window) < 1500*time.Millisecond {
		start := time.Now()
		_, err := p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "b"})
		slowest = max(slowest, time.Since(start))
		require.ErrorIs(t, err, rebootstrap.ErrClusterChanged)
		time.Sleep(10 * time.Millisecond)
	}
	require.Less(t, slowest, 50*time.Millisecond, "a record took that long to fail")
	require.Equal(t, warned, warns.count(), "warnings while records fail: %q", warns.all()[warned:])
	require.LessOrEqual(t, asked.Load()-askedBefore, int32(3), "connections to the other cluster in 1.5s")
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
