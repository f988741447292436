package wire

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
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
//     request before its write is in the token.
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

// Oracle answers the two questions an [Emulator] asks a cluster. Both are
// called from connection goroutines of other clients; an implementation
// must not send its requests through an Emulator (it would ask itself).
type Oracle interface {
	// Committed returns the cluster's id and the offset of the last
	// committed record of its metadata log (DescribeQuorum's high
	// watermark less one).
	Committed(ctx context.Context) (consistency.Token, error)
	// Applied returns the offset of the last metadata record the broker at
	// addr has applied (ApiVersions FinalizedFeaturesEpoch), or -1 when the
	// broker does not say.
	Applied(ctx context.Context, addr string) (int64, error)
}

// EmulationConfig configures an [Emulator].
type EmulationConfig struct {
	// Store is the store the tokens go to: the one every Interceptor that
	// uses the Emulator stamps from. Required.
	Store consistency.Store
	// Oracle asks the cluster. Required.
	Oracle Oracle
	// MaxWait bounds how long a request waits for its broker to catch up
	// before it fails with an *InconsistentMetadataError (Produce and
	// Fetch are written anyway, as a broker without KIP-1243 would
	// answer them: see waitFor). Zero or less means 10s.
	MaxWait time.Duration
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
	// OnHealed is called when a wait found the store beyond the cluster's
	// committed offset and lowered it (see Heal). May be nil.
	OnHealed func(from, to consistency.Token)
}

// ErrEmulationUnsupported wraps the reason an [Emulator] turned itself off.
var ErrEmulationUnsupported = errors.New("wire: the cluster cannot support emulated consistency tokens")

// Emulator makes consistency tokens from KRaft offsets; see the comment at
// the top of emulate.go. One Emulator serves every Interceptor of a
// factory, so that what one client learns of a broker serves all.
type Emulator struct {
	cfg EmulationConfig
	off atomic.Bool
	// verified: the cluster answered DescribeQuorum once. Until then no
	// token is made from what brokers say they applied: a server that
	// reports a FinalizedFeaturesEpoch but keeps no metadata log (kfake
	// answers a constant 1) must not get tokens.
	verified atomic.Bool
	// nativeSeen: some broker's response headers carried tokens.
	nativeSeen atomic.Bool
	// lastVerify is when verify last asked (unix nanoseconds), so that a
	// cluster that cannot answer is asked at most once a second.
	lastVerify atomic.Int64
	lastHeal   atomic.Int64 // when heal last asked (unix nanoseconds)
	offOnce    sync.Once

	mu      sync.Mutex
	brokers map[string]*brokerView

	waits, probes, learnt atomic.Uint64
}

// brokerView is what the Emulator knows of one broker address.
type brokerView struct {
	applied atomic.Int64 // highest applied offset known; -1 for none
	native  atomic.Bool  // its response headers carry tokens
	plain   atomic.Bool  // its flexible response headers carry none
	probe   sync.Mutex   // one question to the broker at a time
}

// NewEmulator returns an Emulator for cfg.
func NewEmulator(cfg EmulationConfig) (*Emulator, error) {
	if cfg.Store == nil || cfg.Oracle == nil {
		return nil, errors.New("wire: EmulationConfig needs a Store and an Oracle")
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 10 * time.Second
	}
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = 5 * time.Second
	}
	return &Emulator{cfg: cfg, brokers: make(map[string]*brokerView)}, nil
}

// EmulationStats counts what an Emulator did.
type EmulationStats struct {
	Waits  uint64 // requests held for a broker to catch up
	Probes uint64 // questions about a broker's applied offset
	Learnt uint64 // committed offsets learnt after writes
	Off    bool   // the emulation turned itself off
}

// Stats returns a snapshot of the counters.
func (e *Emulator) Stats() EmulationStats {
	return EmulationStats{Waits: e.waits.Load(), Probes: e.probes.Load(), Learnt: e.learnt.Load(), Off: e.off.Load()}
}

// Off reports whether the emulation turned itself off.
func (e *Emulator) Off() bool { return e.off.Load() }

func (e *Emulator) view(addr string) *brokerView {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.brokers[addr]
	if v == nil {
		v = new(brokerView)
		v.applied.Store(-1)
		e.brokers[addr] = v
	}
	return v
}

// Applied returns the highest applied offset known of the broker at addr,
// or -1.
func (e *Emulator) Applied(addr string) int64 { return e.view(addr).applied.Load() }

func (v *brokerView) saw(applied int64) {
	for {
		cur := v.applied.Load()
		if applied <= cur || v.applied.CompareAndSwap(cur, applied) {
			return
		}
	}
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

// needsWait reports whether a request of key sent to v with the store at
// cur must first wait for the broker: only handshake requests never do.
// It is on every request's path: two atomic loads when nothing is owed.
func (e *Emulator) needsWait(v *brokerView, key int16, cur consistency.Token) bool {
	if cur.IsUnknown() || !e.active(v) || (e.verified.Load() && v.applied.Load() >= cur.Offset()) {
		return false
	}
	switch key {
	case apiVersionsKey, saslHandshakeKey, saslAuthenticateKey:
		return false
	}
	return true
}

// waitFor holds a request of key until the broker at addr has applied
// target, asking it again with a growing pause, for at most MaxWait and
// never past deadline (kgo's write deadline; zero for none) or after
// stop reports an error. It returns nil once the broker caught up. When it
// did not, Produce and Fetch go out anyway (nil): a broker that does not
// know a topic yet answers them with a retriable error, which kgo handles
// as it would without tokens, while failing their connection would make an
// idempotent producer retry a batch forever. Every other request fails
// with an *InconsistentMetadataError, which kgo retries on a new
// connection and returns once its retry budget ends, as with a KIP-1243
// broker that stayed behind.
func (e *Emulator) waitFor(v *brokerView, addr string, key int16, target int64, deadline time.Time, stop func() error) error {
	start := time.Now()
	healed := false
	if !e.verify() {
		return nil // not (yet) known to keep a metadata log: no waiting
	}
	if v.applied.Load() >= target {
		return nil
	}
	e.waits.Add(1)
	wait := e.cfg.MaxWait
	if key == produceKey || key == fetchKey {
		wait = min(wait, dataMaxWait)
	}
	end := time.Now().Add(wait)
	if !deadline.IsZero() {
		// Leave the write itself time before kgo's write deadline.
		end = minTime(end, deadline.Add(-writeMargin))
	}
	pause := time.Millisecond
	progress, moved := v.applied.Load(), time.Now()
	for {
		if v.applied.Load() >= target || e.off.Load() {
			return nil
		}
		if err := stop(); err != nil {
			return err
		}
		e.probe(v, addr, end, false)
		if v.applied.Load() >= target || e.off.Load() {
			return nil
		}
		left := time.Until(end)
		if left <= 0 {
			break
		}
		if a := v.applied.Load(); a > progress {
			progress, moved = a, time.Now()
		} else if time.Since(moved) > stallAfter {
			// A KRaft broker applies a no-op record every 500ms even
			// when idle: one that shows no progress at all is stuck
			// (fenced, partitioned from the quorum). Give up on it, so
			// that kgo retries where it can.
			break
		}
		// A broker that stays behind for long may be behind a token no
		// broker will ever reach: check that once, and follow the store
		// down if it was lowered.
		if !healed && time.Since(start) > healAfter {
			healed = true
			if e.heal() {
				if cur := e.cfg.Store.Load(); cur.Offset() < target {
					target = cur.Offset()
				}
				continue
			}
		}
		time.Sleep(min(pause, left))
		pause = min(2*pause, 50*time.Millisecond)
	}
	e.log(kgo.LogLevelWarn, "broker stayed behind the consistency token", "addr", addr, "key", key, "token", target, "broker_at", v.applied.Load())
	if key == produceKey || key == fetchKey {
		return nil
	}
	return &InconsistentMetadataError{Addr: addr, APIKey: key, Sent: target, BrokerAt: v.applied.Load()}
}

// dataMaxWait bounds the hold of a Produce or Fetch, which go out
// afterwards anyway (see waitFor): a leader that knows the partition
// serves them correctly, only perhaps under an older config, and a longer
// hold would only slow every batch while one broker lags. writeMargin is
// left before kgo's write deadline for the write itself.
const (
	dataMaxWait = time.Second
	writeMargin = 100 * time.Millisecond
)

// stallAfter is how long a broker may show no progress at all before a
// request waiting for it gives up early.
const stallAfter = 1500 * time.Millisecond

// healAfter is how long a request waits for its broker before the token
// itself is checked against the committed offset.
const healAfter = 250 * time.Millisecond

// probe asks the broker at addr how far it has applied. A caller that
// found a probe under way waits for it and, unless it needs an answer
// given after its call began (fresh), uses that one instead of asking too.
func (e *Emulator) probe(v *brokerView, addr string, end time.Time, fresh bool) {
	before := v.applied.Load()
	v.probe.Lock()
	defer v.probe.Unlock()
	if !fresh && v.applied.Load() > before {
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), minTime(end, time.Now().Add(e.cfg.AskTimeout)))
	defer cancel()
	e.probes.Add(1)
	applied, err := e.cfg.Oracle.Applied(ctx, addr)
	switch {
	case err != nil:
		e.log(kgo.LogLevelDebug, "asking a broker for its applied metadata offset failed", "addr", addr, "err", err)
	case applied < 0:
		e.turnOff(fmt.Errorf("%w: broker %s answers ApiVersions without FinalizedFeaturesEpoch (not a KRaft broker?)", ErrEmulationUnsupported, addr))
	default:
		v.saw(applied)
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// verify reports whether the cluster answered DescribeQuorum, asking it
// when nobody did in the last second.
func (e *Emulator) verify() bool {
	if e.verified.Load() {
		return true
	}
	now := time.Now().UnixNano()
	last := e.lastVerify.Load()
	if now-last < int64(time.Second) || !e.lastVerify.CompareAndSwap(last, now) {
		return false
	}
	e.learnCommitted()
	return e.verified.Load()
}

// learnCommitted advances the store to the cluster's committed offset,
// after a response to a metadata write.
func (e *Emulator) learnCommitted() {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.AskTimeout)
	defer cancel()
	c, err := e.cfg.Oracle.Committed(ctx)
	if err != nil {
		switch {
		case errors.Is(err, ErrEmulationUnsupported):
			e.turnOff(err)
			return
		case isAuthorization(err):
			e.turnOff(fmt.Errorf("%w: DescribeQuorum refused: %w", ErrEmulationUnsupported, err))
			return
		}
		e.log(kgo.LogLevelWarn, "learning the committed metadata offset after a write failed; the write may not be visible at once", "err", err)
		return
	}
	e.learnt.Add(1)
	e.verified.Store(true)
	e.advance(c)
}

// learnApplied advances the store to what the broker at addr has applied
// now, after it answered a metadata read: at least what it showed.
// cluster names the cluster when the store does not know it yet.
func (e *Emulator) learnApplied(v *brokerView, addr, cluster string) {
	if cur := e.cfg.Store.Load(); !cur.IsUnknown() {
		cluster = cur.ClusterID()
	}
	if cluster == "" {
		return
	}
	if !e.verify() {
		return
	}
	// Only an answer given after this response can stand for what it
	// showed: probe asks unless a newer answer arrives meanwhile.
	e.probe(v, addr, time.Now().Add(e.cfg.AskTimeout), true)
	applied := v.applied.Load()
	if applied < 0 {
		return
	}
	if c, err := consistency.Of(cluster, applied); err == nil {
		e.advance(c)
	}
}

func (e *Emulator) advance(c consistency.Token) {
	if _, err := e.cfg.Store.Advance(c); err != nil {
		// Another cluster's token: the rebootstrap machinery decides.
		e.log(kgo.LogLevelDebug, "emulated token not stored", "token", c.String(), "err", err)
	}
}

const (
	fetchKey            = 1
	saslAuthenticateKey = 36
)

// isAuthorization reports whether err says the principal may not describe
// the quorum (CLUSTER_AUTHORIZATION_FAILED), which no retry changes.
func isAuthorization(err error) bool {
	return errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// writesMetadata reports whether a request of key changes the cluster
// metadata that reads serve, so that its answer must teach the store the
// committed offset:
//
//   - 19 CreateTopics, 20 DeleteTopics, 37 CreatePartitions: topics and
//     partitions every client routes by.
//   - 33 AlterConfigs, 44 IncrementalAlterConfigs: configs DescribeConfigs
//     reads back.
//   - 30 CreateAcls, 31 DeleteAcls: what DescribeAcls reads and what the
//     broker authorizes.
//   - 45 AlterPartitionReassignments, 43 ElectLeaders: replicas and
//     leaders in Metadata.
//   - 49 AlterClientQuotas, 51 AlterUserScramCredentials, 57
//     UpdateFeatures: read back by their Describe calls.
//
// Group offsets and records live in data logs, not the metadata log, and
// are not in the list.
func writesMetadata(key int16) bool {
	switch key {
	case 19, 20, 37, 33, 44, 30, 31, 45, 43, 49, 51, 57:
		return true
	}
	return false
}

// readsMetadata reports whether an answer to key shows the broker's
// metadata image, so that a later read must not show an older one:
// Metadata (3), DescribeConfigs (32), DescribeAcls (29),
// ListPartitionReassignments (46), DescribeClientQuotas (48),
// DescribeUserScramCredentials (50), DescribeCluster (60) and
// DescribeTopicPartitions (75).
func readsMetadata(key int16) bool {
	switch key {
	case 3, 32, 29, 46, 48, 50, 60, 75:
		return true
	}
	return false
}

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

// emulates reports whether the answer whose header was just parsed must be
// held for the Emulator: it carries no token of its own, and the request
// wrote or read metadata.
func (c *conn) emulates(req *inflight, h *respHeader) bool {
	if c.view == nil || h.hasState || !c.i.emu.active(c.view) || c.rbody <= 0 || c.rbody > maxHeldFrame {
		return false
	}
	return writesMetadata(req.key) || readsMetadata(req.key)
}

// emulate teaches the store what the held answer resp to req implies,
// before kgo reads it.
func (c *conn) emulate(req inflight, resp kmsg.Response) {
	e := c.i.emu
	if writesMetadata(req.key) {
		e.learnCommitted()
		return
	}
	cluster := ""
	if m, ok := resp.(*kmsg.MetadataResponse); ok && m.ClusterID != nil {
		cluster = *m.ClusterID
	}
	e.learnApplied(c.view, c.addr, cluster)
}

// Heal checks store against the cluster's committed metadata offset and,
// when it holds a token of that cluster beyond it (a token no broker can
// ever reach: forged, or a metadata log restored under the same cluster
// id), swaps it down to the committed offset. It reports the token it
// replaced and the one it stored; healed is false when the store was
// sound (or changed meanwhile).
func Heal(ctx context.Context, store consistency.Store, o Oracle) (from, to consistency.Token, healed bool, err error) {
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

// heal runs Heal on the emulator's store, at most once a second, and
// reports whether the store was lowered.
func (e *Emulator) heal() bool {
	now := time.Now().UnixNano()
	last := e.lastHeal.Load()
	if now-last < int64(time.Second) || !e.lastHeal.CompareAndSwap(last, now) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.AskTimeout)
	defer cancel()
	from, to, healed, err := Heal(ctx, e.cfg.Store, e.cfg.Oracle)
	if err != nil {
		e.log(kgo.LogLevelDebug, "checking the consistency token against the committed offset failed", "err", err)
		return false
	}
	if healed {
		e.log(kgo.LogLevelWarn, "consistency token was beyond the cluster's committed metadata offset; lowered to it", "from", from.String(), "to", to.String())
		if e.cfg.OnHealed != nil {
			e.cfg.OnHealed(from, to)
		}
	}
	return healed
}
