package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
)

// Tokens on brokers that send none.
//
// No released Kafka broker puts a consistency token in its response
// headers, but every KRaft broker exposes the two offsets a token is made
// of, in the same metadata log KIP-1243 tokens name:
//
//   - ApiVersions (v3+) FinalizedFeaturesEpoch is the offset of the last
//     metadata record the broker has applied: what a KIP-1243 broker would
//     put in its response headers.
//   - DescribeQuorum's HighWatermark is the end of the committed metadata
//     log. Controllers answer an admin write only once its records are
//     committed, so a DescribeQuorum sent after the answer returns a high
//     watermark past the write.
//
// An [Emulator] turns these into tokens in the shared store, for every
// connection of every client that uses it, wherever a broker's headers
// carry no token of their own:
//
//   - After a response to a request that writes metadata (writesMetadata),
//     it asks the Oracle for the committed offset and advances the store to
//     it before kgo sees the response: the caller cannot send its next
//     request before its write is in the token. The Oracle asks every
//     broker in turn, and a failed answer is asked again, within the
//     answer's hold (LearnMaxWait). A write whose offset is not learnt by
//     then is owed: every later request waits, within its own bound, until
//     a committed offset read after it is in the store (owe).
//   - After a response to a request that reads metadata (readsMetadata), it
//     asks the answering broker how far it has applied, and advances the
//     store to that, also before kgo sees the response. The broker applied
//     at least what it showed, so no later read through the store goes
//     back to an older image: monotonic reads.
//   - Before a request goes to a broker whose known applied offset is
//     below the store's token, it asks that broker again, until it has
//     caught up, for at most the wait bound. Only then is the request
//     written. A broker known to be at or past the token costs nothing.
//
// What each connection's ApiVersions handshake answers is noted for free.
//
// A connection reaches the Emulator through two calls: beforeWrite, on the
// writing goroutine before a request is stamped, and afterRead, on the
// reading goroutine once an answer is read (with its body when the reader
// held it: holds tells the reader, at the answer's header, which ones to
// hold). The questions those calls need answered run on the Emulator's own
// goroutines (ask.go); a call waits for an answer no longer than its
// request's bound and then goes on without it: a hung DescribeQuorum costs
// a request its bound at most, never the 5s of a question.
//
// Until the cluster has answered one DescribeQuorum (verified), no answer
// is held for what a broker applied, and a request to a broker behind the
// token waits, within its bound, only for that DescribeQuorum, asked at
// most once per verifyEvery.

// Oracle answers the two questions an [Emulator] asks a cluster. Both are
// called on the Emulator's and the Healer's goroutines, never on a
// connection's; an implementation must not send its requests through an
// Emulator (it would ask itself) and must return when ctx ends.
type Oracle interface {
	// Committed returns the cluster's id and the offset of the last
	// committed record of its metadata log (DescribeQuorum's high
	// watermark less one).
	Committed(ctx context.Context) (consistency.Token, error)
	// Applied returns the offset of the last metadata record a broker has
	// applied (ApiVersions FinalizedFeaturesEpoch), or -1 when the broker
	// does not say, and the id of the cluster the broker belongs to. The
	// broker is node, when not negative (the node kgo's connections named),
	// else the one at addr.
	Applied(ctx context.Context, addr string, node int32) (cluster string, applied int64, err error)
}

// EmulationConfig configures an [Emulator].
type EmulationConfig struct {
	// Tokens owns the store the tokens go to: the one every Interceptor
	// that uses the Emulator stamps from. Required, unless Store is set
	// (tests): then an owner of Store that reports to nobody.
	Tokens *tokens.Owner
	// Store is the store when Tokens is nil.
	Store consistency.Store
	// Oracle asks the cluster. Required.
	Oracle Oracle
	// Healer checks the store against the committed offset when a broker
	// does not catch up. Nil: the Emulator makes one of its own on Tokens
	// and Oracle, and closes it with itself.
	Healer *Healer
	// MaxWait bounds how long a request waits for its broker to catch up
	// before it fails with an *InconsistentMetadataError (Produce and
	// Fetch are written anyway, as a broker without KIP-1243 would
	// answer them: see waitFor). Zero or less means 10s.
	MaxWait time.Duration
	// LearnMaxWait bounds how long an answer is held while the Emulator
	// learns what it implies (the committed offset after a write, the
	// broker's applied offset after a read); the question goes on after
	// the answer went to kgo. Zero or less means 1s. A write whose offset
	// is not learnt by then is owed (see OnWriteUnlearnt).
	LearnMaxWait time.Duration
	// AskTimeout bounds each question to the Oracle. Zero or less means
	// 5s.
	AskTimeout time.Duration
	// Logger receives a warning when the emulation stops or a question
	// fails. May be nil.
	Logger kgo.Logger
	// Force makes tokens for every broker, even one whose response
	// headers carry tokens of their own.
	Force bool
	// OnOff is called once, when the emulation turns itself off because
	// the cluster cannot support it (DescribeQuorum refused, no
	// FinalizedFeaturesEpoch). May be nil.
	OnOff func(reason error)
	// ClusterCheck: the clients send ApiVersions v5 naming the cluster
	// and node they expect (KIP-1242); OnClusterCheckOff is then called
	// once, with an error wrapping ErrClusterCheckUnsupported, when a
	// broker answers an older ApiVersions, which cannot check them. May
	// be nil.
	ClusterCheck      bool
	OnClusterCheckOff func(reason error)
	// OnLimited is called once, when DescribeQuorum is refused
	// (CLUSTER_AUTHORIZATION_FAILED) and the Oracle is a BrokerAsker: the
	// Emulator then keeps the tokens that need no cluster ACL (see
	// shown.go). reason says what is not covered and which ACL would
	// cover it. May be nil.
	OnLimited func(reason error)
	// OnWriteUnlearnt is called when the answer to a metadata write went
	// to its caller before the write's offset was learnt, because its
	// hold (LearnMaxWait, or kgo's read deadline) ended first; until the
	// offset is learnt, every request waits within its own bound. May be
	// nil.
	OnWriteUnlearnt func()
}

// ErrEmulationUnsupported wraps the reason an [Emulator] turned itself off.
var ErrEmulationUnsupported = errors.New("wire: the cluster cannot support emulated consistency tokens")

// Emulator makes consistency tokens from KRaft offsets; see the comment at
// the top of emulate.go. One Emulator serves every Interceptor of a
// factory, so that what one client learns of a broker serves all. Close
// ends its questions.
type Emulator struct {
	cfg     EmulationConfig
	healer  *Healer
	ownHeal bool // healer is the Emulator's own: Close closes it
	ask     *asker
	// committed asks DescribeQuorum and advances the store to the
	// committed offset; its first answer verifies the cluster.
	committed question

	off atomic.Bool
	// limited: DescribeQuorum is refused; write offsets come from the
	// first broker that shows the write (see shown.go).
	limited   atomic.Bool
	limitOnce sync.Once
	uncovered sync.Map // int16 write kinds said to be uncovered
	// verified: the cluster answered DescribeQuorum once. Until then no
	// token is made from what brokers say they applied: a server that
	// reports a FinalizedFeaturesEpoch but keeps no metadata log (kfake
	// answers a constant 1) must not get tokens.
	verified atomic.Bool
	// nativeSeen: some broker's response headers carried tokens.
	nativeSeen atomic.Bool
	// lastVerify is when verification was last asked (unix nanoseconds).
	lastVerify atomic.Int64
	offOnce    sync.Once
	// uncheckedOnce: OnClusterCheckOff was called.
	uncheckedOnce sync.Once

	mu      sync.Mutex
	brokers map[viewKey]*brokerView // at most maxViews

	// owed counts metadata writes whose answers went to their callers
	// before their offsets were in the store (see owe).
	owed atomic.Int64

	waits, probes, learnt, unlearnt atomic.Uint64
}

// brokerView is what the Emulator knows of one broker: a node of a
// cluster, named by kgo's ApiVersions v5 on the connection (KIP-1242), or,
// for connections that name none (to a seed, or with the check off), an
// address. A broker is never known by its address alone once a connection
// named its node: a new broker at a reused address has a view of its own.
//
// What a view knows only rises, from probes, except at a connection's
// ApiVersions answer: that is the broker there now, and what it says
// replaces what was known (reset), lower or not, so that a new broker at a
// reused address, behind the old one, is waited for. A probe asked before
// a reset does not raise the view after it (gen).
type brokerView struct {
	addr    string
	cluster string       // the node's cluster; "" for an address's view
	node    int32        // -1 for an address's view
	applied atomic.Int64 // highest applied offset known; -1 for none
	native  atomic.Bool  // its response headers carry tokens
	plain   atomic.Bool  // its flexible response headers carry none
	probe   question     // asks the broker how far it applied
	// answered is the cluster of the last probe answer taken: an applied
	// offset is a token of that cluster only.
	answered atomic.Pointer[string]

	mu  sync.Mutex // a leaf: gen, and applied against a reset
	gen uint64
}

// viewKey keys Emulator.brokers: a node of a cluster, or an address.
type viewKey struct {
	cluster string
	node    int32
	addr    string // only for an address's view
}

// maxViews bounds Emulator.brokers: a view is made per address a
// connection was dialed to and per node a connection named, so only a
// long life through much address churn comes near it. A view dropped
// from the table stays with the connections that hold it.
const maxViews = 4096

// NewEmulator returns an Emulator for cfg.
func NewEmulator(cfg EmulationConfig) (*Emulator, error) {
	if (cfg.Tokens == nil && cfg.Store == nil) || cfg.Oracle == nil {
		return nil, errors.New("wire: EmulationConfig needs Tokens (or a Store) and an Oracle")
	}
	if cfg.Tokens == nil {
		cfg.Tokens = tokens.New(cfg.Store, nil)
	}
	cfg.Store = cfg.Tokens.Store()
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 10 * time.Second
	}
	if cfg.LearnMaxWait <= 0 {
		cfg.LearnMaxWait = time.Second
	}
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = 5 * time.Second
	}
	e := &Emulator{cfg: cfg, brokers: make(map[viewKey]*brokerView), ask: newAsker(cfg.AskTimeout), healer: cfg.Healer}
	if e.healer == nil {
		e.healer = NewHealer(HealerConfig{Tokens: cfg.Tokens, Oracle: cfg.Oracle, Logger: cfg.Logger, Timeout: cfg.AskTimeout})
		e.ownHeal = true
	}
	e.committed.run = e.learnCommitted
	return e, nil
}

// Close ends the questions under way and waits for their goroutines (and
// closes the Emulator's own Healer). Connections still open go on as plain
// franz-go's would.
func (e *Emulator) Close() {
	e.ask.close()
	if e.ownHeal {
		e.healer.Close()
	}
}

// EmulationStats counts what an Emulator did.
type EmulationStats struct {
	Waits  uint64 // requests held for a broker to catch up
	Probes uint64 // questions about a broker's applied offset
	Learnt uint64 // committed offsets learnt
	// Unlearnt counts metadata writes answered before their offset was
	// learnt: their read deadline ended first (see OnWriteUnlearnt).
	Unlearnt uint64
	Off      bool // the emulation turned itself off
}

// Stats returns a snapshot of the counters.
func (e *Emulator) Stats() EmulationStats {
	return EmulationStats{Waits: e.waits.Load(), Probes: e.probes.Load(), Learnt: e.learnt.Load(), Unlearnt: e.unlearnt.Load(), Off: e.off.Load()}
}

// Off reports whether the emulation turned itself off.
func (e *Emulator) Off() bool { return e.off.Load() }

// view returns the view of the address addr, for a connection dialed to
// it: until the connection names a node (bind).
func (e *Emulator) view(addr string) *brokerView {
	return e.viewFor(viewKey{node: -1, addr: addr}, addr)
}

// bind returns the view of node of cluster, which a connection to addr
// named in kgo's ApiVersions v5; the writer's call, before the request is
// written.
func (e *Emulator) bind(addr string, cluster []byte, node int32) *brokerView {
	return e.viewFor(viewKey{cluster: string(cluster), node: node}, addr)
}

func (e *Emulator) viewFor(k viewKey, addr string) *brokerView {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.brokers[k]
	if v == nil {
		if len(e.brokers) >= maxViews {
			for old := range e.brokers { // drop any one
				delete(e.brokers, old)
				break
			}
		}
		v = &brokerView{addr: addr, cluster: k.cluster, node: k.node}
		v.applied.Store(-1)
		v.probe.run = func(ctx context.Context) bool { return e.askApplied(ctx, v) }
		e.brokers[k] = v
	}
	return v
}

// Applied returns the highest applied offset known of the broker at addr,
// as known by its address, or -1.
func (e *Emulator) Applied(addr string) int64 { return e.view(addr).applied.Load() }

// generation returns the number of resets of v so far.
func (v *brokerView) generation() uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.gen
}

// raise raises what v knows to applied, unless v was reset since gen.
func (v *brokerView) raise(gen uint64, applied int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.gen == gen && applied > v.applied.Load() {
		v.applied.Store(applied)
	}
}

// saw raises what v knows to applied.
func (v *brokerView) saw(applied int64) { v.raise(v.generation(), applied) }

// reset replaces what v knows by applied, the ApiVersions answer of a new
// connection: the broker there now.
func (v *brokerView) reset(applied int64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.gen++
	v.applied.Store(applied)
}

func (e *Emulator) turnOff(reason error) {
	e.offOnce.Do(func() {
		e.off.Store(true)
		e.log(kgo.LogLevelWarn, "consistency tokens are off: clients behave like plain franz-go", "reason", reason.Error())
		if e.cfg.OnOff != nil {
			e.cfg.OnOff(reason)
		}
	})
}

func (e *Emulator) log(level kgo.LogLevel, msg string, keyvals ...any) {
	if l := e.cfg.Logger; l != nil && l.Level() >= level {
		l.Log(level, msg, keyvals...)
	}
}

// active reports whether requests to v need the emulation.
//
// A broker not heard from yet is taken to be like the others: clusters
// run one broker version, and a broker that sends tokens holds a request
// behind the token itself, where a hold of the emulator's would only add
// to it.
func (e *Emulator) active(v *brokerView) bool {
	switch {
	case e.off.Load():
		return false
	case e.cfg.Force, v.plain.Load():
		return true
	case v.native.Load():
		return false
	}
	return !e.nativeSeen.Load()
}

// sawHeader notes whether a flexible response header of the broker of v
// carried a token.
func (e *Emulator) sawHeader(v *brokerView, token bool) {
	if token {
		if !v.native.Load() {
			v.native.Store(true)
			e.nativeSeen.Store(true)
		}
		return
	}
	if !v.plain.Load() {
		v.plain.Store(true)
	}
}

// beforeWrite is the writer's call, before a request of key goes to the
// broker of v with the store at cur: it returns once no metadata write's
// offset is owed to the store (see owe) and the broker is known to have
// applied the store's token, or the request's bound is over (see
// awaitOwed, waitFor). waited reports whether it held the request (the
// store may have moved meanwhile). With nothing owed it costs a few atomic
// loads.
func (e *Emulator) beforeWrite(v *brokerView, key int16, cur consistency.Token, deadline time.Time, stop func() error) (waited bool, err error) {
	if e.owed.Load() > 0 && !neverHeld(key) && e.active(v) {
		if err := e.awaitOwed(v, key, cur, deadline, stop); err != nil {
			return true, err
		}
		cur, waited = e.cfg.Store.Load(), true
	}
	if cur.IsUnknown() || v.applied.Load() >= cur.Offset() || neverHeld(key) || !e.active(v) ||
		(v.cluster != "" && v.cluster != cur.ClusterID()) { // a broker of another cluster reaches no token of cur's

		return waited, nil
	}
	return true, e.waitFor(v, key, cur, deadline, stop)
}

// waitEnd is when a wait for a request of key that began at start ends:
// MaxWait (dataMaxWait for data) after it, and never later than writeMargin
// before deadline (kgo's write deadline; zero for none).
func (e *Emulator) waitEnd(key int16, start, deadline time.Time) time.Time {
	wait := e.cfg.MaxWait
	if isData(key) {
		wait = min(wait, dataMaxWait)
	}
	end := start.Add(wait)
	if !deadline.IsZero() {
		end = minTime(end, deadline.Add(-writeMargin))
	}
	return end
}

// awaitOwed holds a request of key to the broker of v while a metadata
// write's offset is owed to the store (see owe), within the request's
// bound (waitEnd). When the bound ends first, Produce and Fetch go out, as
// in waitFor, and every other request fails with an
// *InconsistentMetadataError, which kgo retries: a read does not go out
// before the store covers every write whose answer went to a caller.
func (e *Emulator) awaitOwed(v *brokerView, key int16, cur consistency.Token, deadline time.Time, stop func() error) error {
	e.waits.Add(1)
	end := e.waitEnd(key, time.Now(), deadline)
	pause := pauseMin
	for e.owed.Load() > 0 && !e.off.Load() {
		if err := stop(); err != nil {
			return err
		}
		left := time.Until(end)
		if left <= 0 {
			e.log(kgo.LogLevelWarn, "a metadata write's offset is still unknown; the request goes on without it", "addr", v.addr, "key", key, "token", cur.Offset())
			if isData(key) {
				return nil
			}
			return &InconsistentMetadataError{Addr: v.addr, APIKey: key, Sent: cur.Offset(), BrokerAt: v.applied.Load()}
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, pauseMax)
	}
	return nil
}

// waitFor holds a request of key until the broker of v has applied cur,
// asking it again with a growing pause, for at most MaxWait (dataMaxWait
// for data) and never past deadline (kgo's write deadline; zero for none)
// or after stop reports an error. It returns nil once the broker caught
// up. When it did not, Produce and Fetch go out anyway (nil): a broker that
// does not know a topic yet answers them with a retriable error, which kgo
// handles as it would without tokens, while failing their connection
// would make an idempotent producer retry a batch forever. Every other
// request fails with an *InconsistentMetadataError, which kgo retries on a
// new connection and returns once its retry budget ends, as with a
// KIP-1243 broker that stayed behind.
func (e *Emulator) waitFor(v *brokerView, key int16, cur consistency.Token, deadline time.Time, stop func() error) error {
	target := cur.Offset()
	e.waits.Add(1)
	start := time.Now()
	end := e.waitEnd(key, start, deadline)
	if !e.verified.Load() {
		// Nothing is known to be behind until the cluster answered a
		// DescribeQuorum: wait for one within the bound, or go out.
		done := e.verify()
		if done == nil {
			return nil
		}
		if err := await(done, end, stop); err != nil {
			if err == errBound {
				return nil
			}
			return err
		}
		if !e.verified.Load() {
			return nil
		}
	}
	pause := pauseMin
	progress, moved := v.applied.Load(), time.Now()
	healAsked := false
	for {
		if v.applied.Load() >= target || e.off.Load() {
			return nil
		}
		if err := stop(); err != nil {
			return err
		}
		// The Healer may have lowered the store, or another cluster's
		// adoption reset it.
		if now := e.cfg.Store.Load(); now.ClusterID() != cur.ClusterID() {
			return nil
		} else if now.Offset() < target {
			target = now.Offset()
			continue
		}
		// A question that does not come back is no progress either.
		if err := await(e.ask.ask(&v.probe, false).done, minTime(end, moved.Add(stallAfter)), stop); err != nil && err != errBound {
			return err
		}
		if v.applied.Load() >= target || e.off.Load() {
			return nil
		}
		left := time.Until(end)
		if left <= 0 {
			break
		}
		if a := v.applied.Load(); a > progress {
			progress, moved = a, time.Now()
		} else if time.Since(moved) >= stallAfter {
			break // stuck: give up on it, so that kgo retries where it can
		}
		// A broker that stays behind for long may be behind a token no
		// broker will ever reach: have that checked (once per wait).
		if !healAsked && time.Since(start) > healAfter {
			healAsked = true
			e.healer.Check()
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, pauseMax)
	}
	e.log(kgo.LogLevelWarn, "broker stayed behind the consistency token", "addr", v.addr, "key", key, "token", target, "broker_at", v.applied.Load())
	if isData(key) {
		return nil
	}
	return &InconsistentMetadataError{Addr: v.addr, APIKey: key, Sent: target, BrokerAt: v.applied.Load()}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// askApplied asks how far the broker of v has applied; a probe question.
// It reports whether an answer of the broker of v was taken.
func (e *Emulator) askApplied(ctx context.Context, v *brokerView) bool {
	e.probes.Add(1)
	gen := v.generation()
	cluster, applied, err := e.cfg.Oracle.Applied(ctx, v.addr, v.node)
	switch {
	case err != nil:
		e.log(kgo.LogLevelDebug, "asking a broker for its applied metadata offset failed", "addr", v.addr, "err", err)
	case cluster == "" || v.cluster != "" && cluster != v.cluster:
		// Not the broker of this view: what it applied says nothing of it.
		e.log(kgo.LogLevelDebug, "a broker's applied metadata offset came from another cluster; not taken", "addr", v.addr, "node", v.node, "cluster", v.cluster, "answered", cluster)
	case applied < 0:
		e.turnOff(fmt.Errorf("%w: broker %s answers ApiVersions without FinalizedFeaturesEpoch (not a KRaft broker?)", ErrEmulationUnsupported, v.addr))
	default:
		if p := v.answered.Load(); p == nil || *p != cluster {
			v.answered.Store(&cluster)
		}
		v.raise(gen, applied)
		return true
	}
	return false
}

// verify returns a channel closed once the DescribeQuorum under way, or
// one asked now, is answered: its answer verifies the cluster. It returns
// nil when the last one began less than verifyEvery ago and is over: the
// cluster did not answer then, and is not asked again so soon.
func (e *Emulator) verify() <-chan struct{} {
	now := time.Now().UnixNano()
	last := e.lastVerify.Load()
	if (last != 0 && now-last < int64(verifyEvery)) || !e.lastVerify.CompareAndSwap(last, now) {
		if f := e.ask.joinRunning(&e.committed); f != nil {
			return f.done
		}
		return nil
	}
	return e.ask.ask(&e.committed, false).done
}

// holds reports whether the reader must hold the answer of key whose
// header was just parsed, for afterRead to learn from its body: the broker
// is emulated, the header carries no token of its own, and the request
// wrote or read metadata. It asks nothing.
func (e *Emulator) holds(v *brokerView, key int16, token bool) bool {
	return !token && (writesMetadata(key) || readsMetadata(key)) && e.active(v)
}

// answer is what afterRead is told of one response.
type answer struct {
	key, version int16
	flexible     bool          // its header is flexible
	token        bool          // its header carried a token
	apiVersions  []byte        // an ApiVersions body
	resp         kmsg.Response // the decoded body, when the reader held it
	req          kmsg.Request  // a metadata write's request, noted in limited mode (see noteWrite)
	deadline     time.Time     // the read deadline kgo set; zero for none
}

// afterRead is the reader's call, once per answer, before kgo reads it:
// it notes what the header says of the broker, and learns from a held
// answer what it implies, for at most LearnMaxWait and never past the read
// deadline.
func (e *Emulator) afterRead(v *brokerView, a *answer) {
	if a.flexible {
		e.sawHeader(v, a.token)
	}
	if a.apiVersions != nil {
		e.noteHandshake(v, a.version, a.apiVersions)
		if epoch := finalizedEpoch(a.version, a.apiVersions); epoch >= 0 {
			v.reset(epoch)
		}
		return
	}
	if a.token || a.resp == nil || !e.active(v) {
		return
	}
	end := time.Now().Add(e.cfg.LearnMaxWait)
	if !a.deadline.IsZero() {
		end = minTime(end, a.deadline)
	}
	switch {
	case writesMetadata(a.key):
		// The committed offset read after this answer covers the write:
		// the caller cannot send its next request before the token has it.
		// Without DESCRIBE on CLUSTER, a broker that shows it does.
		if !e.limited.Load() {
			e.lastVerify.Store(time.Now().UnixNano())
			e.learnWrite(end)
		}
		if e.limited.Load() {
			e.learnShown(a, end)
		}
	case readsMetadata(a.key):
		cluster := ""
		if m, ok := a.resp.(*kmsg.MetadataResponse); ok && m.ClusterID != nil {
			cluster = *m.ClusterID
		}
		e.learnApplied(v, cluster, end)
	}
}

// noteHandshake says once, when the cluster check is on, that a broker
// accepted a connection with an ApiVersions older than v5: it was not
// told, and did not check, which cluster and node the client expected
// (KIP-1242), so a misrouted connection to it is not refused.
func (e *Emulator) noteHandshake(v *brokerView, version int16, body []byte) {
	if !e.cfg.ClusterCheck || version >= clusterCheckVersion || len(body) < 2 || binary.BigEndian.Uint16(body) != 0 {
		return
	}
	e.uncheckedOnce.Do(func() {
		err := fmt.Errorf("%w: broker %s answers ApiVersions up to v%d; KIP-1242 needs v%d (Apache Kafka 4.4+)", ErrClusterCheckUnsupported, v.addr, version, clusterCheckVersion)
		e.log(kgo.LogLevelWarn, "the KIP-1242 cluster check is off for this cluster: a connection to an address that moved to another cluster is not refused", "reason", err.Error())
		if e.cfg.OnClusterCheckOff != nil {
			e.cfg.OnClusterCheckOff(err)
		}
	})
}

// ErrClusterCheckUnsupported wraps the reason the KIP-1242 check could not
// run on a cluster (OnClusterCheckOff).
var ErrClusterCheckUnsupported = errors.New("wire: the brokers cannot check which cluster a connection expected (KIP-1242)")

// finalizedEpoch returns an ApiVersions body's FinalizedFeaturesEpoch, or
// -1 when the version has none or the body does not decode.
func finalizedEpoch(version int16, body []byte) int64 {
	if version < 3 {
		return -1
	}
	var r kmsg.ApiVersionsResponse
	r.Default()
	r.SetVersion(version)
	if err := r.ReadFrom(body); err != nil {
		return -1
	}
	return r.FinalizedFeaturesEpoch
}
