package wire

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
)

// Healing a store beyond its cluster.
//
// A token beyond the cluster's committed metadata offset can never be
// reached by any broker: it was forged, or the metadata log was restored
// under the same cluster id. Requests stamped with it wait, or are
// answered INCONSISTENT_METADATA, for ever. A token of another cluster
// than the bootstrap servers' (a store handed to a fresh factory) is
// refused by every broker. The one Healer of a factory checks the store
// against the committed offset and lowers it when it is beyond, or
// replaces a token of another cluster when HealerConfig.Replace allows.
// It is asked from three places: the Emulator, when a request has waited
// healAfter for a broker that does not catch up; a connection, when a
// request carrying a token stayed unanswered for healAfter (Held; see
// held.go), whether its caller still waits or gave up; and the session,
// after an INCONSISTENT_METADATA answer. All only ask: the check runs on
// the Healer's goroutine, at most once per HealerConfig.Every, and nobody
// waits for it. None of it waits for a broker to answer the held request:
// a broker may hold it for as long as its request timeout.

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
	// Replace reports whether a store holding a token of another cluster
	// than cluster, the one the bootstrap servers name, may be replaced by
	// cluster's committed offset: true when the factory is not pinned and
	// knows of no other cluster behind its bootstrap servers (a cluster
	// change is the watcher's to report, not a heal). Nil: never.
	Replace func(cluster string) bool
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

	// known is the committed offset the cluster last reported (nil:
	// none yet): a token at or below it, of its cluster, needs no check.
	known atomic.Pointer[consistency.Token]
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
		from, to, healed, err := h.heal(ctx)
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

// Held is a connection's call when a request carrying the store's token
// has stayed unanswered for healAfter: it starts a check (see Check)
// unless the store holds a token of the cluster last reported committed,
// at or below its committed offset. It never waits.
func (h *Healer) Held() {
	if h.suspect(h.cfg.Store.Load()) {
		h.Check()
	}
}

// suspect reports whether cur may be beyond what the cluster committed, or
// of another cluster, as far as the last answer tells.
func (h *Healer) suspect(cur consistency.Token) bool {
	if cur.IsUnknown() {
		return false
	}
	k := h.known.Load()
	return k == nil || k.ClusterID() != cur.ClusterID() || cur.Offset() > k.Offset()
}

// noteCommitted records a committed offset the cluster reported.
func (h *Healer) noteCommitted(c consistency.Token) {
	h.known.Store(&c)
}

// Close ends a check under way and waits for it; later Checks do nothing.
func (h *Healer) Close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
}

// heal checks the store against the cluster's committed metadata offset
// and, when it holds a token of that cluster beyond it, or a token of
// another cluster that Replace allows to replace, swaps it for the
// committed offset. It reports the token it replaced and the one it
// stored; healed is false when the store was sound (or changed meanwhile).
// Committed names the cluster its offset is of (one cluster, see Oracle),
// so the store never moves to another cluster's offset under its own id.
func (h *Healer) heal(ctx context.Context) (from, to consistency.Token, healed bool, err error) {
	store := h.cfg.Store
	committed, err := h.cfg.Oracle.Committed(ctx)
	if err != nil {
		return consistency.Token{}, consistency.Token{}, false, err
	}
	h.noteCommitted(committed)
	cur := store.Load()
	switch {
	case cur.IsUnknown():
		return cur, cur, false, nil
	case cur.ClusterID() != committed.ClusterID():
		if h.cfg.Replace == nil || !h.cfg.Replace(committed.ClusterID()) {
			return cur, cur, false, nil
		}
	case cur.Offset() <= committed.Offset():
		return cur, cur, false, nil
	}
	if !store.CompareAndSwap(cur, committed) {
		return cur, store.Load(), false, nil
	}
	return cur, committed, true, nil
}
