package factory

import (
	"context"
	"log/slog"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/cluster"
	"github.com/kconsist/kconsist/internal/session"
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
	// restored metadata log), and was lowered to that offset (Token); or
	// a token of another cluster than the bootstrap servers' (given to a
	// fresh factory), replaced by a token of theirs. Sent is the offset it
	// held.
	EventTokenHealed
	// EventAuthFailed: the bootstrap servers refused the factory's
	// credentials or TLS settings (Err, which errors.Is/As finds the
	// kerr or x509 error in). Reported once per distinct failure; records
	// and polls of the factory's clients fail with it while it holds.
	EventAuthFailed
	// EventWriteUnlearnt: in mode auto or emulated, the answer to a
	// metadata write (create topics, alter configs, ...) went to the
	// caller before the write's metadata offset was learnt: DescribeQuorum
	// answered no broker within the answer's 1 s hold. Until a committed
	// offset read after it is learnt, every request of the factory's
	// clients waits for it within its own bound, so no later read shows
	// the cluster from before the write.
	EventWriteUnlearnt
	// EventClusterCheckOff: in mode auto or emulated with the cluster
	// check on, a broker answered an ApiVersions older than v5 (Apache
	// Kafka before 4.4): it cannot check which cluster a connection
	// expected (KIP-1242), so a connection to an address that moved to
	// another cluster is not refused (Err names the broker and version).
	// Sent once per factory; also logged as a warning.
	EventClusterCheckOff
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
	case EventWriteUnlearnt:
		return "write-unlearnt"
	case EventClusterCheckOff:
		return "cluster-check-off"
	}
	return "unknown"
}

// Event is a consistency event. Fields that do not apply to its Kind are
// zero.
type Event struct {
	Kind EventKind
	// Token is the store's new token: of EventTokenAdvanced and
	// EventTokenHealed.
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
		switch {
		case ev.Kind == EventRebootstrap && (ev.From == "" || ev.From == ev.To):
			// Recovery that found the cluster the clients knew (or
			// their first): a broker asked for it (REBOOTSTRAP_REQUIRED,
			// as a KIP-1243 broker answers a foreign token). A move is
			// warned of by its EventClusterChanged.
			lvl = slog.LevelInfo
		case ev.Kind >= EventMisroute:
			lvl = slog.LevelWarn
		}
		c.logger.Log(context.Background(), lvl, "kconsist: "+ev.Kind.String(),
			"token", ev.Token.String(), "addr", ev.Addr, "api_key", ev.APIKey,
			"sent", ev.Sent, "broker_at", ev.BrokerAt, "from", ev.From, "to", ev.To)
	}
}

// clientEvents returns what turns the wire-layer callbacks of a client
// with settings cfg into events, or nil when nobody listens (no observer,
// no logger), which spares the connections the calls.
func clientEvents(cfg config) session.Observer {
	if cfg.observer == nil && cfg.logger == nil {
		return nil
	}
	return &eventEmitter{cfg: config{observer: cfg.observer, logger: cfg.logger}}
}

// eventEmitter emits the events of one client's connections; cfg holds
// only its observer and logger.
type eventEmitter struct{ cfg config }

func (e *eventEmitter) OnTokenAdvanced(_, to consistency.Token) {
	e.cfg.emit(Event{Kind: EventTokenAdvanced, Token: to})
}

func (e *eventEmitter) OnInconsistentMetadata(addr string, key int16, sent, at int64) {
	e.cfg.emit(Event{Kind: EventInconsistentMetadata, Addr: addr, APIKey: key, Sent: sent, BrokerAt: at})
}

func (e *eventEmitter) OnMisroute(addr, expected, got string) {
	e.cfg.emit(Event{Kind: EventMisroute, Addr: addr, From: expected, To: got})
}

func (e *eventEmitter) OnAdopted(addr, from, to string) {
	e.cfg.emit(Event{Kind: EventClusterChanged, Addr: addr, From: from, To: to})
	e.cfg.emit(Event{Kind: EventStoreReset, Addr: addr, From: from, To: to})
}

// clusterEvent reports what the cluster watcher found (the session has
// counted it in Stats).
func (f *Factory) clusterEvent(ev cluster.Event) {
	if ev.AuthFailure != nil {
		// The watcher has logged it: tell the observer only.
		if o := f.base.observer; o != nil {
			o.OnEvent(Event{Kind: EventAuthFailed, Err: ev.AuthFailure})
		}
		return
	}
	if ev.Rebootstrapped {
		f.base.emit(Event{Kind: EventRebootstrap, From: ev.From, To: ev.To})
	}
	if ev.Changed {
		f.base.emit(Event{Kind: EventClusterChanged, From: ev.From, To: ev.To})
	}
	if ev.StoreReset {
		f.base.emit(Event{Kind: EventStoreReset, From: ev.From, To: ev.To})
	}
}

// writeUnlearnt reports a metadata write answered before its offset was
// learnt; the emulator logs it as a warning.
func (f *Factory) writeUnlearnt() {
	if o := f.base.observer; o != nil {
		o.OnEvent(Event{Kind: EventWriteUnlearnt})
	}
}

// clusterCheckOff reports that a broker cannot run the KIP-1242 check;
// the emulator logs it as a warning.
func (f *Factory) clusterCheckOff(reason error) {
	if o := f.base.observer; o != nil {
		o.OnEvent(Event{Kind: EventClusterCheckOff, Err: reason})
	}
}

// consistencyOff reports that the emulation turned itself off.
func (f *Factory) consistencyOff(reason error) {
	if o := f.base.observer; o != nil {
		o.OnEvent(Event{Kind: EventConsistencyOff, Err: reason})
	}
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
