package rebootstrap

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
)

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]Strategy{"rebootstrap": Rebootstrap, "NONE": None, " None ": None} {
		got, err := ParseStrategy(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ParseStrategy("sometimes")
	require.ErrorContains(t, err, "metadata.recovery.strategy")
	require.Equal(t, "none", None.String())
	require.Equal(t, "rebootstrap", Rebootstrap.String())
}

func TestClusterChangedError(t *testing.T) {
	err := error(&ClusterChangedError{From: "a", To: "b"})
	require.ErrorIs(t, err, ErrClusterChanged)
	require.EqualError(t, err, `rebootstrap: cluster changed from "a" to "b"`)
}

// TestDialerResolvesEveryDial checks that host names are looked up on every
// dial (never cached), IPs are dialed as they are, and every address of an
// answer is tried.
func TestDialerResolvesEveryDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	var lookups atomic.Int32
	resolve := func(_ context.Context, host string) ([]string, error) {
		lookups.Add(1)
		switch host {
		case "good.test":
			return []string{"127.0.0.1"}, nil
		case "second.test": // the first address refuses, the second works
			return []string{"127.0.0.2", "127.0.0.1"}, nil
		case "empty.test":
			return nil, nil
		}
		return nil, errors.New("no such host")
	}
	var dialed []string
	var mu sync.Mutex
	base := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		if addr == net.JoinHostPort("127.0.0.2", port) {
			return nil, errors.New("refused")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	dial := Dialer(resolve, base)
	ctx := context.Background()
	for range 2 {
		c, err := dial(ctx, "tcp", net.JoinHostPort("good.test", port))
		require.NoError(t, err)
		c.Close()
	}
	require.Equal(t, int32(2), lookups.Load(), "resolved on every dial")
	c, err := dial(ctx, "tcp", net.JoinHostPort("second.test", port))
	require.NoError(t, err)
	c.Close()
	c, err = dial(ctx, "tcp", ln.Addr().String())
	require.NoError(t, err)
	c.Close()
	require.Equal(t, int32(3), lookups.Load(), "an IP is not resolved")
	_, err = dial(ctx, "tcp", net.JoinHostPort("missing.test", port))
	require.ErrorContains(t, err, "resolve missing.test")
	_, err = dial(ctx, "tcp", net.JoinHostPort("empty.test", port))
	require.ErrorContains(t, err, "no addresses")
	_, err = dial(ctx, "tcp", "no-port")
	require.Error(t, err)
	mu.Lock()
	require.Contains(t, dialed, net.JoinHostPort("127.0.0.2", port))
	mu.Unlock()
}

func TestOpts(t *testing.T) {
	apiVersionsMax := func(opts []kgo.Opt) int16 {
		cl, err := kgo.NewClient(append(opts, kgo.SeedBrokers("127.0.0.1:1"))...)
		require.NoError(t, err)
		defer cl.Close()
		v, ok := cl.OptValue(kgo.MaxVersions).(interface{ LookupMaxKeyVersion(int16) (int16, bool) })
		if !ok {
			return -1 // no cap set: franz-go's latest
		}
		m, _ := v.LookupMaxKeyVersion(18)
		return m
	}
	require.GreaterOrEqual(t, apiVersionsMax(Opts(Rebootstrap, true, nil, nil)), int16(5), "check on: ApiVersions v5 allowed")
	require.Equal(t, int16(4), apiVersionsMax(Opts(Rebootstrap, false, nil, nil)))
	require.Equal(t, int16(4), apiVersionsMax(Opts(None, true, nil, nil)), "none implies no check")
	require.Len(t, Opts(None, true, nil, nil), 1, "none installs no rebootstrap hook")
	require.Len(t, Opts(Rebootstrap, true, []string{"a:1"}, nil), 1)
}

// fakeProbe answers with whatever cluster is set, counting calls.
type fakeProbe struct {
	mu      sync.Mutex
	cluster string
	fails   int // calls to fail before answering
	calls   int
}

func (p *fakeProbe) probe(context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.fails > 0 {
		p.fails--
		return "", errors.New("seed not ready")
	}
	return p.cluster, nil
}

func (p *fakeProbe) set(c string) {
	p.mu.Lock()
	p.cluster = c
	p.mu.Unlock()
}

func TestWatcherDetectsChangeAndResetsStore(t *testing.T) {
	store := consistency.NewMemoryStore()
	_, _ = store.Advance(consistency.MustOf("a", 7))
	p := &fakeProbe{cluster: "a"}
	var events []Event
	var mu sync.Mutex
	w := &Watcher{Store: store, Probe: p.probe, OnEvent: func(ev Event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
	}}
	defer w.Close()
	ctx := context.Background()

	w.Check(true)
	require.Equal(t, uint64(0), w.Settle(ctx), "same cluster: no change")
	require.Equal(t, consistency.MustOf("a", 7), store.Load(), "tokens kept")

	p.set("b")
	p.fails = 2 // the first probes after a rebootstrap may fail
	w.Check(false)
	require.Equal(t, uint64(1), w.Settle(ctx))
	require.True(t, store.Load().IsUnknown(), "another cluster's offsets mean nothing here")
	require.Equal(t, "b", w.Cluster())
	mu.Lock()
	require.Equal(t, []Event{
		{Rebootstrapped: true, From: "a", To: "a"},
		{Rebootstrapped: false, From: "a", To: "b", Changed: true, StoreReset: true},
	}, events)
	mu.Unlock()
}

func TestWatcherPinnedKeepsStore(t *testing.T) {
	store := consistency.NewMemoryStore()
	_, _ = store.Advance(consistency.MustOf("a", 7))
	p := &fakeProbe{cluster: "b"}
	w := &Watcher{Store: store, Probe: p.probe, Pin: "a"}
	defer w.Close()
	w.Check(true)
	require.Equal(t, uint64(1), w.Settle(context.Background()), "pinned to a, the seeds name b: a change")
	require.Equal(t, consistency.MustOf("a", 7), store.Load(), "a pinned factory keeps its tokens")
}

func TestWatcherLearnAndWatch(t *testing.T) {
	p := &fakeProbe{cluster: "a"}
	w := &Watcher{Probe: p.probe}
	defer w.Close()
	w.Watch()
	require.Eventually(t, func() bool { return w.Cluster() == "a" }, 5*time.Second, 5*time.Millisecond)
	w.Learn("other")
	require.Equal(t, "a", w.Cluster(), "Learn never overrides a known cluster")
}

// TestWatcherCloseStopsProbing: a watcher whose seeds never answer stops
// when closed instead of probing until its timeout.
func TestWatcherCloseStopsProbing(t *testing.T) {
	p := &fakeProbe{fails: 1 << 30}
	w := &Watcher{Probe: p.probe, Timeout: time.Minute}
	w.Check(false)
	time.AfterFunc(50*time.Millisecond, w.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.Settle(ctx)
	require.NoError(t, ctx.Err(), "Close ended the check")
}

// TestWatcherCoalescesChecks: a storm of checks costs one probe at a time,
// and Settle waits only for checks requested before it, so it returns
// while the storm goes on.
func TestWatcherCoalescesChecks(t *testing.T) {
	var probes atomic.Int32
	w := &Watcher{Probe: func(context.Context) (string, error) {
		probes.Add(1)
		time.Sleep(100 * time.Millisecond)
		return "a", nil
	}}
	defer w.Close()
	stop := make(chan struct{})
	storm := make(chan struct{})
	go func() {
		defer close(storm)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
				w.Check(false)
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	w.Check(false)
	w.Settle(ctx)
	require.NoError(t, ctx.Err(), "Settle returned during the storm")
	require.Less(t, time.Since(start), time.Second)
	close(stop)
	<-storm
	w.Settle(ctx)
	require.Less(t, probes.Load(), int32(20), "checks were coalesced (%d probes)", probes.Load())
}
