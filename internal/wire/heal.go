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
// It is asked from four places: the Emulator, when a request has waited
// healAfter for a broker that does not catch up; a connection, when a
// request carrying a token stayed unanswered for healAfter (Held; see
// held.go), whether its caller still waits or gave up; the session, after
// an INCONSISTENT_METADATA answer; and the cluster watcher, when a check
// found an unpinned store holding a token of another cluster than the
// bootstrap servers'. A connection that reads a bootstrap server's answer
// for its own cluster while the store holds such a token replaces it
// itself with the answer's token (AdoptForeign), reported through
// OnHealed as a heal too. All only ask: the check runs on
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

	// known is the highest offset its cluster is known to have committed
	// (nil: none yet): the committed offset it last reported, raised by
	// the tokens its brokers' answers carried (a broker applies only what
	// was committed). A held token at or below it, of its cluster, is
	// checked only once requests carrying it were held coveredHeld in all.
	known atomic.Pointer[knownCommitted]
	// Guarded by mu: the covered token requests are held for, and for how
	// many watch periods (healAfter) they were held in all.
	heldTok   consistency.Token
	heldTicks int
}

// knownCommitted is an offset a cluster is known to have committed.
type knownCommitted struct {
	cluster string
	offset  atomic.Int64
}

// coveredHeld is how long, summed over connections, requests carrying a
// token its cluster is known to have committed may be held before the
// store is checked anyway. A broker behind a committed token catches up
// within milliseconds, or a second on a loaded machine; one held much
// longer is behind a log restored under the same cluster id, whose
// brokers will never reach the token. Not checked at healAfter: a native
// client that learnt its tokens from the brokers' answers asks the cluster
// nothing while one of them is a moment behind.
const coveredHeld = 2 * time.Second

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

// Held is a connection's call, once per healAfter, while a request
// carrying the store's token stays unanswered: it starts a check (see
// Check) when the store may hold a token beyond what its cluster
// committed, or of another cluster; for a token its cluster is known to
// have committed, only once such requests were held coveredHeld in all.
// It never waits.
func (h *Healer) Held() {
	cur := h.cfg.Store.Load()
	if cur.IsUnknown() {
		return
	}
	if !h.covered(cur) {
		h.Check()
		return
	}
	h.mu.Lock()
	if h.heldTok != cur {
		h.heldTok, h.heldTicks = cur, 0
	}
	h.heldTicks++
	long := time.Duration(h.heldTicks)*healAfter >= coveredHeld
	if long {
		h.heldTicks = 0
	}
	h.mu.Unlock()
	if long {
		h.Check()
	}
}

// covered reports whether cur's cluster is known to have committed it.
func (h *Healer) covered(cur consistency.Token) bool {
	k := h.known.Load()
	return k != nil && k.cluster == cur.ClusterID() && cur.Offset() <= k.offset.Load()
}

// replaced reports a store whose token of another cluster a connection
// replaced by an answer's token (AdoptForeign), as a heal.
func (h *Healer) replaced(from, to consistency.Token) {
	if h.cfg.OnHealed != nil {
		h.cfg.OnHealed(from, to)
	}
}

// noteCommitted records the committed offset the cluster reported.
func (h *Healer) noteCommitted(c consistency.Token) {
	k := &knownCommitted{cluster: c.ClusterID()}
	k.offset.Store(c.Offset())
	h.known.Store(k)
}

// noteApplied records an offset a broker of cluster answered it applied,
// and so was committed. It allocates only when the cluster is not the
// one known.
func (h *Healer) noteApplied(cluster []byte, offset int64) {
	k := h.known.Load()
	if k == nil || k.cluster != string(cluster) {
		n := &knownCommitted{cluster: string(cluster)}
		n.offset.Store(offset)
		if h.known.CompareAndSwap(k, n) {
			return
		}
		if k = h.known.Load(); k == nil || k.cluster != string(cluster) {
			return // another cluster's report won; it is not lowered
		}
	}
	for {
		o := k.offset.Load()
		if offset <= o || k.offset.CompareAndSwap(o, offset) {
			return
		}
	}
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
