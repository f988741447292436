package factory

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/wire"
)

// EventKind names what happened.
type EventKind uint8

const (
	// EventTokenAdvanced: a response moved the shared store forward.
	EventTokenAdvanced EventKind = iota + 1
	// EventInconsistentMetadata: a broker was behind the token and answered
	// INCONSISTENT_METADATA; the request is retried.
	EventInconsistentMetadata
	// EventMisroute: a response named another cluster; the connection was
	// closed.
	EventMisroute
	// EventRebootstrap: a client rediscovered the cluster from the bootstrap
	// servers.
	EventRebootstrap
	// EventStoreReset: the rebootstrap landed on another cluster and the
	// store was reset to Unknown.
	EventStoreReset
	// EventClusterChanged: a rebootstrap landed on a cluster other than the
	// one the clients knew (From) or were pinned to.
	EventClusterChanged
	// EventConsistencyOff: in ModeAuto or ModeEmulated, the cluster cannot
	// support tokens made from its offsets (Err says why); the clients
	// behave like plain franz-go where brokers send no tokens.
	EventConsistencyOff
	// EventTokenHealed: the store held a token beyond the cluster's
	// committed metadata offset, which no broker can reach (forged, or a
	// restored metadata log); it was lowered to that offset (Token). Sent
	// is the offset it held.
	EventTokenHealed
	// EventAuthFailed: the bootstrap servers refused the factory's
	// credentials or TLS settings (Err, which errors.Is/As finds the
	// kerr or x509 error in). Reported once per distinct failure; records
	// and polls of the factory's clients fail with it while it holds.
	EventAuthFailed
)

func (k EventKind) String() string {
	switch k {
	case EventTokenAdvanced:
		return "token-advanced"
	case EventInconsistentMetadata:
		return "inconsistent-metadata"
	case EventMisroute:
		return "misroute"
	case EventRebootstrap:
		return "rebootstrap"
	case EventStoreReset:
		return "store-reset"
	case EventClusterChanged:
		return "cluster-changed"
	case EventConsistencyOff:
		return "consistency-off"
	case EventTokenHealed:
		return "token-healed"
	case EventAuthFailed:
		return "auth-failed"
	}
	return "unknown"
}

// Event is a consistency event. Fields that do not apply to its Kind are
// zero.
type Event struct {
	Kind EventKind
	// Token is the new context of EventTokenAdvanced.
	Token consistency.Token
	// Addr is the broker address of misroute and inconsistent-metadata
	// events.
	Addr string
	// APIKey is the request kind answered INCONSISTENT_METADATA.
	APIKey int16
	// Sent and BrokerAt are the token sent and the broker's applied offset
	// of EventInconsistentMetadata.
	Sent, BrokerAt int64
	// From and To are cluster ids (misroute: expected and got).
	From, To string
	// Err is the reason of EventConsistencyOff and EventAuthFailed.
	Err error
}

// Observer receives consistency events. OnEvent is called synchronously on
// a client's network path: keep it short and never block in it.
type Observer interface{ OnEvent(Event) }

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// OnEvent calls fn(ev).
func (fn ObserverFunc) OnEvent(ev Event) { fn(ev) }

func (c *config) emit(ev Event) {
	if c.observer != nil {
		c.observer.OnEvent(ev)
	}
	if c.logger != nil {
		lvl := slog.LevelDebug
		if ev.Kind >= EventMisroute {
			lvl = slog.LevelWarn
		}
		c.logger.Log(context.Background(), lvl, "kconsist: "+ev.Kind.String(),
			"token", ev.Token.String(), "addr", ev.Addr, "api_key", ev.APIKey,
			"sent", ev.Sent, "broker_at", ev.BrokerAt, "from", ev.From, "to", ev.To)
	}
}

// wireObserver turns wire-layer callbacks into events.
type wireObserver struct {
	f      *Factory
	o      Observer
	log    *slog.Logger
	seeds  map[string]bool
	pinned bool
}

// OnStampRejected: a bootstrap server closed the connection of a stamped
// request, which a KIP-1243 broker of another cluster does; check which
// cluster the bootstrap servers name now.
func (w *wireObserver) OnStampRejected(addr string) {
	if w.seeds[normalAddr(addr)] {
		w.f.watcher.Check(false)
	}
}

func (w *wireObserver) cfg() *config { return &config{observer: w.o, logger: w.log} }

func (w *wireObserver) OnTokenAdvanced(_, to consistency.Token) {
	if w.o == nil && w.log == nil {
		return
	}
	w.cfg().emit(Event{Kind: EventTokenAdvanced, Token: to})
}

func (w *wireObserver) OnInconsistentMetadata(addr string, key int16, sent, at int64) {
	w.f.inconsistent.Add(1)
	// Any such answer may be what held a record that then timed out (its
	// metadata, its producer id): the producer's clock moves for all.
	w.f.produceMarks.Tick()
	if h := w.f.healer; h != nil {
		h.soon()
	}
	w.cfg().emit(Event{Kind: EventInconsistentMetadata, Addr: addr, APIKey: key, Sent: sent, BrokerAt: at})
}

// OnProduceInconsistentMetadata: see bridge.ProducerFollow.InconsistentOn.
func (w *wireObserver) OnProduceInconsistentMetadata(topic string, partition int32) {
	w.f.produceMarks.Mark(topic, partition)
}

func (w *wireObserver) OnMisroute(addr, expected, got string) {
	if w.pinned {
		// The pinned cluster may be gone from behind the bootstrap
		// servers; find out, so that waiting records fail.
		w.f.watcher.Check(false)
	}
	w.cfg().emit(Event{Kind: EventMisroute, Addr: addr, From: expected, To: got})
}

// Stats are counters summed over every client of a factory.
type Stats struct {
	RequestsStamped      uint64 // requests that carried a token
	ResponsesRead        uint64
	TokensAdvanced       uint64 // responses that moved the store forward
	Misroutes            uint64 // connections closed for naming another cluster
	InconsistentMetadata uint64 // INCONSISTENT_METADATA answers retried
	Rebootstraps         uint64
	StoreResets          uint64
}

// wireStats sums the counters of the interceptors of live clients, plus
// those of closed clients, folded into closed when they close.
type wireStats struct {
	mu           sync.Mutex
	interceptors map[*wire.Interceptor]struct{}
	closed       wire.Stats
	rebootstraps atomic.Uint64
	storeResets  atomic.Uint64
}

func (s *wireStats) add(i *wire.Interceptor) {
	s.mu.Lock()
	if s.interceptors == nil {
		s.interceptors = map[*wire.Interceptor]struct{}{}
	}
	s.interceptors[i] = struct{}{}
	s.mu.Unlock()
}

func (s *wireStats) remove(i *wire.Interceptor) {
	s.mu.Lock()
	if _, ok := s.interceptors[i]; ok {
		delete(s.interceptors, i)
		addStats(&s.closed, i.Stats())
	}
	s.mu.Unlock()
}

func addStats(dst *wire.Stats, st wire.Stats) {
	dst.RequestsStamped += st.RequestsStamped
	dst.ResponsesRead += st.ResponsesRead
	dst.TokensAdvanced += st.TokensAdvanced
	dst.Misroutes += st.Misroutes
	dst.InconsistentMetadata += st.InconsistentMetadata
}

func (s *wireStats) snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := s.closed
	for i := range s.interceptors {
		addStats(&sum, i.Stats())
	}
	return Stats{
		RequestsStamped:      sum.RequestsStamped,
		ResponsesRead:        sum.ResponsesRead,
		TokensAdvanced:       sum.TokensAdvanced,
		Misroutes:            sum.Misroutes,
		InconsistentMetadata: sum.InconsistentMetadata,
		Rebootstraps:         s.rebootstraps.Load(),
		StoreResets:          s.storeResets.Load(),
	}
}
