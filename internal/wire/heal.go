package wire

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
)

// Healing a store beyond its cluster.
//
// A token beyond the cluster's committed metadata offset can never be
// reached by any broker: it was forged, or the metadata log was restored
// under the same cluster id. Requests stamped with it wait, or are
// answered INCONSISTENT_METADATA, for ever. The one Healer of a factory
// checks the store against the committed offset and lowers it when it is
// beyond. It is asked from two places: the Emulator, when a request has
// waited healAfter for a broker that does not catch up, and the session,
// after an INCONSISTENT_METADATA answer. Both only ask: the check runs on
// the Healer's goroutine, at most once per HealerConfig.Every, and nobody
// waits for it.

// HealerConfig configures a [Healer].
type HealerConfig struct {
	// Store is the store to check and lower. Required.
	Store consistency.Store
	// Oracle asks the cluster for its committed offset. Required.
	Oracle Oracle
	// OnHealed is told when the store was lowered; it does the reporting
	// (one warning, one event). May be nil.
	OnHealed func(from, to consistency.Token)
	// Logger gets debug logs of failed checks. May be nil.
	Logger kgo.Logger
	// Every is the least time between two checks; zero or less means 1s.
	Every time.Duration
	// Timeout bounds one check; zero or less means 5s.
	Timeout time.Duration
}

// Healer lowers a store beyond its cluster's committed metadata offset;
// see heal.go.
type Healer struct {
	cfg    HealerConfig
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	running bool
	last    time.Time // when the last check started
	wg      sync.WaitGroup
}

// NewHealer returns a Healer for cfg.
func NewHealer(cfg HealerConfig) *Healer {
	if cfg.Every <= 0 {
		cfg.Every = time.Second
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Healer{cfg: cfg, ctx: ctx, cancel: cancel}
}

// Check starts a check of the store unless one runs or started less than
// Every ago. It never waits.
func (h *Healer) Check() {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if h.closed || h.running || (!h.last.IsZero() && now.Sub(h.last) < h.cfg.Every) {
		return
	}
	h.running, h.last = true, now
	h.wg.Go(func() {
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.Timeout)
		defer cancel()
		from, to, healed, err := heal(ctx, h.cfg.Store, h.cfg.Oracle)
		h.mu.Lock()
		h.running = false
		h.mu.Unlock()
		switch {
		case err != nil:
			if l := h.cfg.Logger; l != nil && l.Level() >= kgo.LogLevelDebug {
				l.Log(kgo.LogLevelDebug, "checking the consistency token against the committed offset failed", "err", err)
			}
		case healed && h.cfg.OnHealed != nil:
			h.cfg.OnHealed(from, to)
		}
	})
}

// Close ends a check under way and waits for it; later Checks do nothing.
func (h *Healer) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// heal checks store against the cluster's committed metadata offset and,
// when it holds a token of that cluster beyond it, swaps it down to the
// committed offset. It reports the token it replaced and the one it
// stored; healed is false when the store was sound (or changed meanwhile).
func heal(ctx context.Context, store consistency.Store, o Oracle) (from, to consistency.Token, healed bool, err error) {
	committed, err := o.Committed(ctx)
	if err != nil {
		return consistency.Token{}, consistency.Token{}, false, err
	}
	cur := store.Load()
	if cur.IsUnknown() || cur.ClusterID() != committed.ClusterID() || cur.Offset() <= committed.Offset() {
		return cur, cur, false, nil
	}
	if !store.CompareAndSwap(cur, committed) {
		return cur, store.Load(), false, nil
	}
	return cur, committed, true, nil
}
