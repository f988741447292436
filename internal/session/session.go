package session

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/cluster"
	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/internal/tokens"
	"github.com/kconsist/kconsist/internal/wire"
	"github.com/kconsist/kconsist/rebootstrap"
)

// Config is what a session needs of its factory, fixed for its life.
type Config struct {
	// Store is the store the clients share. Required.
	Store consistency.Store
	// Base describes a client with the factory's own settings: the
	// watcher's probes and the oracle are built from it (without its
	// Observer, Hooks and Extra).
	Base Build
	// NoTokens: the clients send and keep no tokens (consistency.mode
	// off); there is then no oracle, healer or emulator.
	NoTokens bool
	// Emulate makes tokens from KRaft offsets for brokers that send none;
	// ForceEmulation for every broker.
	Emulate, ForceEmulation bool
	// Logger gets the watcher's and the emulator's logs. May be nil.
	Logger *slog.Logger

	// OnClusterEvent hears what the watcher found; OnConsistencyOff that
	// the emulation turned itself off; OnTokenChange every change the
	// store's owner made (tokens.Owner), in store order, under its lock:
	// it must only queue. Each may be nil. OnClusterEvent runs on the
	// watcher's goroutine, which Close waits for.
	OnClusterEvent   func(cluster.Event)
	OnConsistencyOff func(reason error)
	// OnLimited hears, once, that the emulation keeps only the tokens
	// that need no cluster ACL (wire.EmulationConfig.OnLimited).
	OnLimited     func(reason error)
	OnTokenChange func(tokens.Change)
	// OnWriteUnlearnt hears that a metadata write's answer went to its
	// caller before its offset was learnt (wire.EmulationConfig). May be
	// nil.
	OnWriteUnlearnt func()
	// OnClusterCheckOff hears, once, that a broker answered an
	// ApiVersions older than v5 while the KIP-1242 check is on
	// (wire.EmulationConfig). May be nil.
	OnClusterCheckOff func(reason error)

	// ErrClosed is returned by every constructor once the session is
	// closed; ErrConfig is wrapped around franz-go's refusal of a client's
	// options. Required: they are the factory's sentinels.
	ErrClosed, ErrConfig error
}

// Session is the runtime state of one factory; see the package doc. It is
// safe for concurrent use.
type Session struct {
	cfg   Config
	store consistency.Store
	// tokens is the one writer of store (see package tokens); a child's
	// shares its parent's lock, reports and knowledge.
	tokens *tokens.Owner

	watcher *cluster.Watcher
	// emu makes tokens from KRaft offsets; oracle asks the cluster for
	// it and for CheckToken; healer, the only one, lowers a store beyond
	// the committed offset, asked by the emulator and by the observer
	// after INCONSISTENT_METADATA. All three are nil where the mode does
	// not use them.
	emu    *wire.Emulator
	oracle *oracle
	healer *wire.Healer
	// parent is the session a child was made from: the watcher, emulator,
	// oracle and healer are the parent's, and the child closes none of
	// them.
	parent *Session

	stats wireStats
	// produceMarks notes which produce partitions were answered
	// INCONSISTENT_METADATA (link.InconsistentMarks).
	produceMarks wire.ProduceMarks
	// learnOnce starts the watcher learning the cluster id when the first
	// client of the session or of a child is made (see root).
	learnOnce sync.Once

	// life is held shared while a client is made and exclusively by
	// Close, so that no client is made after Close returns.
	life   sync.RWMutex
	closed bool

	// producers holds where the producers of one key find the franz-go
	// client they share (see Producer); pmu guards it.
	pmu       sync.Mutex
	producers map[any]*link.Share

	// unstamped is the root's client for questions that carry no token
	// (see UnstampedClient).
	unstamped sharedClient
}

// New returns the session of a new factory. Nothing runs until the first
// client is made.
func New(cfg Config) (*Session, error) {
	s := &Session{cfg: cfg, store: cfg.Store, tokens: tokens.New(cfg.Store, cfg.OnTokenChange)}
	if !cfg.NoTokens {
		s.oracle = &oracle{s: s}
		s.healer = wire.NewHealer(wire.HealerConfig{Tokens: s.tokens, Oracle: s.oracle, Logger: KgoLogger(cfg.Logger), Replace: s.replaces})
	}
	if cfg.Emulate && !cfg.NoTokens {
		emu, err := wire.NewEmulator(wire.EmulationConfig{
			Tokens:            s.tokens,
			Oracle:            s.oracle,
			Healer:            s.healer,
			Force:             cfg.ForceEmulation,
			Logger:            KgoLogger(cfg.Logger),
			OnWriteUnlearnt:   cfg.OnWriteUnlearnt,
			ClusterCheck:      cfg.Base.ClusterCheck && cfg.Base.Strategy != rebootstrap.None,
			OnClusterCheckOff: cfg.OnClusterCheckOff,
			OnLimited:         cfg.OnLimited,
			OnOff: func(reason error) {
				if cfg.OnConsistencyOff != nil {
					cfg.OnConsistencyOff(reason)
				}
			},
		})
		if err != nil {
			return nil, configError(cfg.ErrConfig, err)
		}
		s.emu = emu
	}
	s.watcher = &cluster.Watcher{Tokens: s.tokens, OnEvent: s.clusterEvent, Pin: cfg.Base.Pin, Logger: cfg.Logger}
	if s.healer != nil {
		s.watcher.OnForeignStore = s.healer.Check
	}
	// The probes use a store of their own, which stays Unknown, so they
	// never stamp a token.
	s.watcher.Probe = cluster.SeedProbe(func() (*kgo.Client, error) {
		return s.newKgo(s.cfg.Base, consistency.NewMemoryStore(), false)
	})
	return s, nil
}

// Child returns a session whose store is tok over s's store
// (consistency.NewHandedStore), sharing s's watcher, emulator, oracle and
// healer; see the package doc.
func (s *Session) Child(tok consistency.Token) (*Session, error) {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return nil, s.cfg.ErrClosed
	}
	handed := consistency.NewHandedStore(s.store, tok)
	c := &Session{
		cfg:     s.cfg,
		store:   handed,
		tokens:  s.tokens.Handed(handed),
		watcher: s.watcher,
		emu:     s.emu,
		oracle:  s.oracle,
		healer:  s.healer,
		parent:  s,
	}
	return c, nil
}

// root is the session that owns the watcher: s, or the session a child
// was made from. A child's first client starts the watcher as the
// parent's would, since the parent may have made none yet.
func (s *Session) root() *Session {
	if s.parent != nil {
		return s.parent
	}
	return s
}

// Close stops the session's constructors and, unless it is a child, the
// watcher's checks, the healer and the oracle's client, and waits for their
// goroutines, and closes the client of its unstamped questions
// (UnstampedClient). It closes none of the clients it made for users.
func (s *Session) Close() {
	s.life.Lock()
	s.closed = true
	s.life.Unlock()
	if s.parent != nil {
		return
	}
	s.watcher.Close()
	if s.emu != nil {
		s.emu.Close() // before the healer and the oracle it asks
	}
	if s.healer != nil {
		s.healer.Close()
	}
	if s.oracle != nil {
		s.oracle.close()
	}
	s.unstamped.close()
}

// Store returns the store the session's clients share, for reading.
// Change it through Tokens.
func (s *Session) Store() consistency.Store { return s.store }

// UnstampedClient returns a client with the factory's base settings whose
// requests carry no token and are never held (no emulator), for questions
// that a broker behind the store's token must answer at once: which
// brokers the cluster has, what the quorum committed, which of them
// applied a token. One client serves every such question of the session
// and its children, so that a wait after each create does not dial the
// cluster and redo the handshakes every time; the caller calls release
// once done with it and never closes it. A cluster change replaces it
// (closed once its last user released it); Close closes it. After Close
// it returns Config.ErrClosed.
func (s *Session) UnstampedClient() (cl *kgo.Client, release func(), err error) {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return nil, nil, s.cfg.ErrClosed
	}
	root := s.root()
	cl, release, err = root.unstamped.acquire(func() (*kgo.Client, error) {
		return root.newKgo(root.cfg.Base, noTokens{}, false)
	})
	if errors.Is(err, errSharedClosed) {
		return nil, nil, s.cfg.ErrClosed
	}
	return cl, release, err
}

// Tokens returns the owner of the store: every change goes through it.
func (s *Session) Tokens() *tokens.Owner { return s.tokens }

// Watcher returns the cluster watcher the session's clients follow.
func (s *Session) Watcher() *cluster.Watcher { return s.watcher }

// clusterEvent passes on what the watcher found (a move, and the reset
// of the store, the store's owner reported).
func (s *Session) clusterEvent(ev cluster.Event) {
	// A pinned session never follows a change: its clients, the oracle's
	// and the unstamped one included, keep the cluster they know.
	if ev.Changed && s.cfg.Base.Pin == "" {
		if s.oracle != nil {
			s.oracle.renew()
		}
		s.unstamped.renew() // the next question dials the cluster afresh
	}
	if s.cfg.OnClusterEvent != nil {
		s.cfg.OnClusterEvent(ev)
	}
}

// AskCluster asks the bootstrap servers which cluster they belong to,
// without a token.
func (s *Session) AskCluster(ctx context.Context) (string, error) {
	o, err := s.tokenOracle()
	if err != nil {
		return "", err
	}
	cl, err := o.client()
	if err != nil {
		return "", err
	}
	return o.refresh(ctx, cl)
}

// Committed returns the cluster id and the last committed offset of its
// metadata log; see the oracle.
func (s *Session) Committed(ctx context.Context) (consistency.Token, error) {
	o, err := s.tokenOracle()
	if err != nil {
		return consistency.Token{}, err
	}
	return o.Committed(ctx)
}

func (s *Session) tokenOracle() (*oracle, error) {
	if s.oracle == nil {
		return nil, errNoTokens
	}
	return s.oracle, nil
}

// Closed reports whether Close was called.
func (s *Session) Closed() bool {
	s.life.RLock()
	defer s.life.RUnlock()
	return s.closed
}
