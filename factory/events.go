package factory

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/cluster"
	"github.com/kconsist/kconsist/internal/session"
	"github.com/kconsist/kconsist/internal/tokens"
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
	// EventStoreConflict: the store holds a token of cluster From that
	// the factory never stored, while the factory's brokers belong to
	// cluster To, whose tokens it stored before: another factory or
	// process shares the store across two clusters (Err says so). Nothing
	// is healed back and forth; the factory's requests fail as misrouted
	// (consistency.ErrClusterMismatch) until each cluster has a store of
	// its own. Reported once per pair of clusters.
	EventStoreConflict
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
	// EventConsistencyLimited: in mode auto or emulated, the factory's
	// principal may not describe the metadata quorum (DescribeQuorum needs
	// DESCRIBE on CLUSTER), so the committed metadata offset cannot be
	// asked. Tokens are kept from what needs no cluster ACL: reads stay
	// monotonic (a broker's applied offset, from ApiVersions), and the
	// factory's own topic creations, deletions, partition additions and
	// topic config changes are read back (each write's token is the
	// applied offset of the first broker that shows it). Err names what is
	// not covered and the ACL that would cover it. Sent once per factory;
	// also logged as a warning.
	EventConsistencyLimited
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
	case EventStoreConflict:
		return "store-conflict"
	case EventWriteUnlearnt:
		return "write-unlearnt"
	case EventClusterCheckOff:
		return "cluster-check-off"
	case EventConsistencyLimited:
		return "consistency-limited"
	}
	return "unknown"
}

// Event is a consistency event. Fields that do not apply to its Kind are
// zero.
type Event struct {
	Kind EventKind
	// Token is the store's new token: of EventTokenAdvanced and
	// EventTokenHealed; the token another writer left, of
	// EventStoreConflict.
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
	// Err is the reason of EventConsistencyOff, EventConsistencyLimited,
	// EventClusterCheckOff, EventAuthFailed and EventStoreConflict.
	Err error
}

// Observer receives consistency events. Every event of a factory goes
// through one queue and reaches its observer on one goroutine of the
// factory's, in the order it happened (changes of the store in store
// order): OnEvent never runs on a client's network path, and a slow
// observer delays later events, never a client. Should an observer fall
// more than 4,096 events behind, token advances are dropped first (the
// next one says all). Factory.Close delivers what is queued and waits
// for it: do not call it from OnEvent.
type Observer interface{ OnEvent(Event) }

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// OnEvent calls fn(ev).
func (fn ObserverFunc) OnEvent(ev Event) { fn(ev) }

// events is a factory's one event stream: every event, from the store's
// owner, the watcher or a client's connections, is queued on it, and its
// goroutine hands each to the observer and logger of the client it
// concerns.
type events = tokens.Stream[delivery]

// delivery is one queued event and who hears it.
type delivery struct {
	ev Event
	to *eventEmitter
}

func newEvents() *events {
	return tokens.NewStream(func(d delivery) { d.to.deliver(d.ev) },
		func(d delivery) bool { return d.ev.Kind == EventTokenAdvanced }, 0)
}

// eventEmitter queues the events of one client (or of the factory
// itself) for its observer and logger.
type eventEmitter struct {
	observer Observer
	logger   *slog.Logger
	stream   *events
}

func (e *eventEmitter) emit(ev Event) {
	if e != nil && (e.observer != nil || e.logger != nil) {
		e.stream.Emit(delivery{ev: ev, to: e})
	}
}

// deliver runs on the stream's goroutine.
func (e *eventEmitter) deliver(ev Event) {
	if e.observer != nil {
		e.observer.OnEvent(ev)
	}
	if e.logger == nil || ev.Kind == EventAuthFailed {
		return // the watcher logged the failure
	}
	lvl := slog.LevelDebug
	msg := "kconsist: " + ev.Kind.String()
	switch {
	case ev.Kind == EventRebootstrap && (ev.From == "" || ev.From == ev.To):
		// Recovery that found the cluster the clients knew (or their
		// first): a broker asked for it (REBOOTSTRAP_REQUIRED, as a
		// KIP-1243 broker answers a foreign token). A move is warned
		// of by its EventClusterChanged.
		lvl = slog.LevelInfo
	case ev.Kind == EventTokenHealed:
		lvl = slog.LevelWarn
		msg = "consistency token was beyond the cluster's committed metadata offset; lowered to it"
		if ev.Token.ClusterID() != ev.From {
			msg = "consistency token named another cluster than the bootstrap servers'; replaced by a token of theirs"
		}
		e.logger.Warn(msg, "from", ev.From+"@"+strconv.FormatInt(ev.Sent, 10), "to", ev.Token.String())
		return
	case ev.Kind == EventStoreConflict:
		e.logger.Error("kconsist: "+ev.Err.Error(), "token", ev.Token.String(), "from", ev.From, "to", ev.To)
		return
	case ev.Kind == EventConsistencyOff, ev.Kind == EventConsistencyLimited, ev.Kind == EventClusterCheckOff, ev.Kind == EventWriteUnlearnt:
		return // the emulator warned with its reason
	case ev.Kind >= EventMisroute:
		lvl = slog.LevelWarn
	}
	e.logger.Log(context.Background(), lvl, msg,
		"token", ev.Token.String(), "addr", ev.Addr, "api_key", ev.APIKey,
		"sent", ev.Sent, "broker_at", ev.BrokerAt, "from", ev.From, "to", ev.To)
}

// clientEvents returns what turns the wire-layer callbacks of a client
// with settings cfg into events, or nil when nobody listens (no observer,
// no logger), which spares the connections the calls.
func (f *Factory) clientEvents(cfg config) session.Observer {
	if cfg.observer == nil && cfg.logger == nil {
		return nil
	}
	return &eventEmitter{observer: cfg.observer, logger: cfg.logger, stream: f.events}
}

func (e *eventEmitter) OnTokenAdvanced(_, to consistency.Token) {
	e.emit(Event{Kind: EventTokenAdvanced, Token: to})
}

func (e *eventEmitter) OnInconsistentMetadata(addr string, key int16, sent, at int64) {
	e.emit(Event{Kind: EventInconsistentMetadata, Addr: addr, APIKey: key, Sent: sent, BrokerAt: at})
}

func (e *eventEmitter) OnMisroute(addr, expected, got string) {
	e.emit(Event{Kind: EventMisroute, Addr: addr, From: expected, To: got})
}

// tokenChange reports a change the store's owner made (under its lock,
// in store order: it only queues).
func (f *Factory) tokenChange(c tokens.Change) {
	switch c.Kind {
	case tokens.Advanced:
		f.emitter.emit(Event{Kind: EventTokenAdvanced, Token: c.To, Addr: c.Addr})
	case tokens.Healed:
		f.emitter.emit(Event{Kind: EventTokenHealed, Token: c.To, Sent: c.From.Offset(), BrokerAt: c.To.Offset(), From: c.From.ClusterID(), To: c.To.ClusterID(), Addr: c.Addr})
	case tokens.Moved:
		f.emitter.emit(Event{Kind: EventClusterChanged, Addr: c.Addr, From: c.FromCluster, To: c.ToCluster})
		if c.StoreReset {
			f.emitter.emit(Event{Kind: EventStoreReset, Addr: c.Addr, From: c.FromCluster, To: c.ToCluster})
		}
	case tokens.Conflict:
		f.emitter.emit(Event{Kind: EventStoreConflict, Token: c.From, From: c.FromCluster, To: c.ToCluster,
			Err: fmt.Errorf("%w: the consistency store holds token %v, which this factory never stored, while its brokers belong to cluster %q: another factory or process shares the store across two clusters; give each cluster a store of its own", consistency.ErrClusterMismatch, c.From, c.ToCluster)})
	}
}

// clusterEvent reports what the cluster watcher found (a move, and the
// store's reset, the store's owner reported: see tokenChange).
func (f *Factory) clusterEvent(ev cluster.Event) {
	if ev.AuthFailure != nil {
		f.emitter.emit(Event{Kind: EventAuthFailed, Err: ev.AuthFailure})
		return
	}
	if ev.Rebootstrapped {
		f.emitter.emit(Event{Kind: EventRebootstrap, From: ev.From, To: ev.To})
	}
}

// writeUnlearnt reports a metadata write answered before its offset was
// learnt; the emulator logs it as a warning.
func (f *Factory) writeUnlearnt() {
	f.emitter.emit(Event{Kind: EventWriteUnlearnt})
}

// clusterCheckOff reports that a broker cannot run the KIP-1242 check;
// the emulator logs it as a warning.
func (f *Factory) clusterCheckOff(reason error) {
	f.emitter.emit(Event{Kind: EventClusterCheckOff, Err: reason})
}

// consistencyLimited reports that the emulation keeps only the tokens
// that need no cluster ACL; the emulator logs it as a warning.
func (f *Factory) consistencyLimited(reason error) {
	f.emitter.emit(Event{Kind: EventConsistencyLimited, Err: reason})
}

// consistencyOff reports that the emulation turned itself off.
func (f *Factory) consistencyOff(reason error) {
	f.emitter.emit(Event{Kind: EventConsistencyOff, Err: reason})
}

// Stats are counters summed over every client of a factory.
type Stats struct {
	RequestsStamped      uint64 // requests that carried a token
	ResponsesRead        uint64
	TokensAdvanced       uint64 // responses whose header token (KIP-1243) moved the store forward; emulated tokens are not counted here (see EventTokenAdvanced)
	Misroutes            uint64 // connections closed for naming another cluster
	InconsistentMetadata uint64 // INCONSISTENT_METADATA answers retried
	Rebootstraps         uint64
	StoreResets          uint64
}
