package integration

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/internal/testkit"
)

// TestPoisonedStoreHealsAtDefaultHold: a store poisoned through the
// low-level Store API, with a token far beyond the committed offset or
// with a token of another cluster given to a fresh factory, on a 3-broker
// cluster whose brokers hold a request for their default WaitMax (5 s,
// native) or whose requests the emulator holds (emulated), while every
// caller gives up after 3 s, before any hold ends, or after 100 ms, before
// a request has been held long enough to have the store checked (the
// check then runs for a request whose caller is gone): the factory works
// again within 3 s, with one EventTokenHealed and one warning.
//
// The 3 s bound is on what is measured (from the poisoning to the first
// call that works), and generous: the heal is asked once a request has
// been held healAfter (250 ms) and needs one Metadata and one
// DescribeQuorum on loopback. Without healing that does not wait for the
// broker, no call works before the 5 s hold ends, and then only if a
// caller still waits.
func TestPoisonedStoreHealsAtDefaultHold(t *testing.T) {
	for _, native := range []bool{true, false} {
		for _, poison := range []string{"future", "foreign"} {
			for _, deadline := range []time.Duration{3 * time.Second, 100 * time.Millisecond} {
				t.Run(fmt.Sprintf("native=%v/%s/deadline=%v", native, poison, deadline), func(t *testing.T) {
					poisonedStoreHeals(t, native, poison, deadline)
				})
			}
		}
	}
}

// poisonedStoreHeals is one case of TestPoisonedStoreHealsAtDefaultHold:
// callers with deadline in a loop.
func poisonedStoreHeals(t *testing.T, native bool, poison string, deadline time.Duration) {
	c, err := localcluster.New(localcluster.Brokers(3), localcluster.Native(native))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := testkit.CtxFor(t, 60*time.Second)

	// The foreign token is given to a fresh factory; the future
	// one is put into the store of a factory that has worked
	// with the cluster already (its connections know whether
	// the brokers send tokens).
	store := consistency.NewMemoryStore()
	if poison == "foreign" {
		_, err = store.Advance(consistency.MustOf("another-cluster-xyz", 9_000))
		require.NoError(t, err)
	}
	events := &healEvents{}
	warns := &testkit.Warnings{}
	f, err := factory.New(factory.WithStore(store), factory.BootstrapServers(c.Addrs()...),
		factory.WithObserver(events), factory.Logger(slog.New(warns)))
	require.NoError(t, err)
	defer f.Close(context.Background())
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	start := time.Now()
	if poison == "future" {
		created, err := adm.CreateTopic(ctx, 1, 1, nil, "before")
		require.NoError(t, err)
		require.NoError(t, created.Err)
		_, err = store.Advance(consistency.MustOf(c.ClusterID(), 9_000_000_000_000_000_000))
		require.NoError(t, err)
		start = time.Now()
	}

	var lastErr error
	calls := 0
	for time.Since(start) < 20*time.Second {
		cctx, cancel := context.WithTimeout(ctx, deadline)
		_, lastErr = adm.ListTopics(cctx)
		cancel()
		calls++
		if lastErr == nil {
			break
		}
	}
	took := time.Since(start)
	require.NoError(t, lastErr, "after %v and %d calls", took, calls)
	t.Logf("working again after %v (%d calls); token %v", took.Round(time.Millisecond), calls, f.Token())
	require.Less(t, took, 3*time.Second, "working again within 3 s")
	tok := f.Token()
	require.Equal(t, c.ClusterID(), tok.ClusterID())
	require.LessOrEqual(t, tok.Offset(), c.LogEnd())
	// Events reach the Observer and then the logger on the factory's
	// event goroutine, after the call that healed returned: Close
	// delivers what is queued before the two are counted.
	require.NoError(t, adm.Close(context.Background()))
	require.NoError(t, f.Close(context.Background()))
	require.Equal(t, 1, events.count(), "one EventTokenHealed")
	// Native brokers judge tag 0 of ApiVersions too (KIP-1243 exempts no
	// API): the first connections, stamped with the foreign token,
	// are refused REBOOTSTRAP_REQUIRED before the heal, and franz-go
	// warns of each, and of a dial the interceptor held back after two
	// such refusals (on a slow machine one falls in that pause). The
	// SDK's own warning is the heal's, once.
	var own []string
	for _, w := range warns.All() {
		if native && poison == "foreign" && strings.Contains(w, "REBOOTSTRAP_REQUIRED") &&
			(strings.HasPrefix(w, "unable to request api versions") || strings.HasPrefix(w, "unable to open connection to broker")) {
			continue
		}
		own = append(own, w)
	}
	require.Len(t, own, 1, "one warning: %q", warns.All())
}
