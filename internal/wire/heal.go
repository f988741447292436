package wire

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
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
// itself with the answer's token (AdoptForeign). Every change goes
// through the factory's tokens.Owner, which reports it (tokens.Healed) in
// store order. All only ask: the check runs on
// the Healer's goroutine, at most once per HealerConfig.Every, and nobody
// waits for it. None of it waits for a broker to answer the held request:
// a broker may hold it for as long as its request timeout.

// HealerConfig configures a [Healer].
type HealerConfig struct {
	// Tokens owns the store to check and lower, and reports a heal.
	// Required, unless Store is set (tests): then an owner of Store that
	// reports to nobody.
	Tokens *tokens.Owner
	// Store is the store to check when Tokens is nil.
	Store consistency.Store
	// Oracle asks the cluster for its committed offset. Required.
	Oracle Oracle
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
	// denied: DescribeQuorum was refused (CLUSTER_AUTHORIZATION_FAILED):
	// no check is asked again, since no retry changes an ACL the principal
	// lacks, and every refusal is an audit line in the broker's log.
	denied bool
	last   time.Time // when the last check started
	wg     sync.WaitGroup

	// Guarded by mu: the covered token requests are held for, and for how
	// many watch periods (healAfter) they were held in all.
	heldTok   consistency.Token
	heldTicks int
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
	if cfg.Tokens == nil {
		cfg.Tokens = tokens.New(cfg.Store, nil)
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
	if h.closed || h.running || h.denied || (!h.last.IsZero() && now.Sub(h.last) < h.cfg.Every) {
		return
	}
	h.running, h.last = true, now
	h.wg.Go(func() {
		ctx, cancel := context.WithTimeout(h.ctx, h.cfg.Timeout)
		defer cancel()
		err := h.heal(ctx)
		h.mu.Lock()
		h.running = false
		h.denied = h.denied || isAuthorization(err)
		h.mu.Unlock()
		if l := h.cfg.Logger; err != nil && l != nil && l.Level() >= kgo.LogLevelDebug {
			l.Log(kgo.LogLevelDebug, "checking the consistency token against the committed offset failed", "err", err)
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
	cur := h.cfg.Tokens.Load()
	if cur.IsUnknown() {
		return
	}
	if !h.cfg.Tokens.Covered(cur) {
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
// another cluster that Replace allows and the owner judges foreign, has
// the owner swap it for the committed offset (tokens.Owner.Heal, which
// reports it). The token is loaded before the question: one a write put
// in the store while the question was in flight is never judged.
// Committed names the cluster its offset is of (one cluster, see Oracle),
// so the store never moves to another cluster's offset under its own id.
func (h *Healer) heal(ctx context.Context) error {
	judged := h.cfg.Tokens.Load()
	if judged.IsUnknown() {
		return nil
	}
	committed, err := h.cfg.Oracle.Committed(ctx)
	if err != nil {
		return err
	}
	h.cfg.Tokens.Reported(committed)
	if judged.ClusterID() != committed.ClusterID() && (h.cfg.Replace == nil || !h.cfg.Replace(committed.ClusterID())) {
		return nil
	}
	h.cfg.Tokens.Heal(judged, committed)
	return nil
}
