package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/internal/tokens"
)

// Event is something a Watcher observed.
type Event struct {
	// Rebootstrapped is set when the client rebootstrapped.
	Rebootstrapped bool
	// From and To are the cluster ids before and after, when known.
	From, To string
	// Changed is set when the cluster id after the rebootstrap differs from
	// the one before.
	Changed bool
	// StoreReset is set when the consistency store was reset because the
	// cluster changed.
	StoreReset bool
	// AuthFailure, when not nil, is why the bootstrap servers refused the
	// probe's credentials or TLS settings (see IsAuthFailure). It is
	// reported once per distinct failure, not at every probe.
	AuthFailure error
}

// Probe asks the bootstrap servers which cluster they belong to. It must
// not stamp a consistency token: a KIP-1243 broker of another cluster closes
// the connection of a request naming the old cluster, which is exactly the
// case a probe has to see through.
type Probe func(ctx context.Context) (clusterID string, err error)

// SeedProbe returns a Probe that sends Metadata requests to the seed brokers
// of a client made by newClient (and closed after each probe). Only seeds
// are asked: the bootstrap servers decide which cluster is the right one,
// while a discovered broker's address may be the very misroute being
// investigated.
func SeedProbe(newClient func() (*kgo.Client, error)) Probe {
	return func(ctx context.Context) (string, error) {
		cl, err := newClient()
		if err != nil {
			return "", err
		}
		defer cl.Close()
		var errs []error
		// No topics: only the cluster id is wanted, and a lagging broker's
		// topic list must not even look like a read.
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		for _, b := range cl.SeedBrokers() {
			resp, err := b.Request(ctx, req)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if m := resp.(*kmsg.MetadataResponse); m.ClusterID != nil {
				return *m.ClusterID, nil
			}
		}
		return "", fmt.Errorf("no seed named its cluster: %w", errors.Join(errs...))
	}
}

// Watcher keeps the cluster id a factory's clients talk to. One Watcher
// serves every client of a factory, since they share one store.
type Watcher struct {
	// Tokens owns the store the clients share: a move resets it, and is
	// reported, through Tokens.Moved. May be nil (no store).
	Tokens  *tokens.Owner
	OnEvent func(Event)
	// OnForeignStore, when not nil, is called (on the watcher's goroutine)
	// when a check found the bootstrap servers naming the cluster it
	// knows, or its first one, while an unpinned store holds a token of
	// another cluster: no cluster change, a foreign token to replace.
	OnForeignStore func()
	// Probe asks the bootstrap servers for their cluster id. Required.
	Probe Probe
	// Timeout bounds each check (default 30s); probes are retried within it.
	Timeout time.Duration
	// Pin, when set, is the only cluster the clients may talk to; it is the
	// "before" of every comparison.
	Pin string
	// Logger, when not nil, gets one line per distinct probe failure
	// (not one per attempt: probes are retried, and every client of a
	// misconfigured fleet would otherwise warn many times a second).
	Logger *slog.Logger

	// failed is the authentication or TLS failure of the last probe, nil
	// after a probe that worked. Read on every record a producer sends.
	failed atomic.Pointer[failure]
	// failing is set while failed is not nil (both changed under mu), for
	// clients that read it instead of calling AuthFailure (see Failing).
	failing atomic.Bool
	// authFails counts such failures in a row; logged holds the texts of
	// the failures logged since the last probe that worked. Both under mu.
	authFails   int
	logged      map[string]struct{}
	failureSubs map[*func(error)]struct{}

	// known is set once cluster is (under mu): Learning reads it on the
	// clients' read path.
	known atomic.Bool

	mu      sync.Mutex
	cluster string
	gen     uint64 // cluster changes seen
	// ended holds the cluster of each of the last generations that a
	// change ended (see ClusterOf), at most maxEnded of them.
	ended map[uint64]string
	// Checks are coalesced: requested counts Check calls, handled the
	// ones a finished probe has answered, and one goroutine probes while
	// handled < requested. A probe answers every request made before it
	// started, so a storm of Checks costs one probe at a time.
	requested, handled uint64
	running            bool
	rebootstrapped     bool          // some request since the last probe was a rebootstrap
	progress           chan struct{} // closed (and replaced) when handled moves
	subs               map[*func()]struct{}

	// life ends at Close; it bounds every probe. isClosed (under mu)
	// keeps goroutines from starting after Close, so that Close can wait
	// for those already started (wg) without racing a new Add.
	life     context.Context
	end      context.CancelFunc
	isClosed bool
	wg       sync.WaitGroup
}

// OnChange calls fn (on the watcher's goroutine) after each cluster change
// it detects, until cancel is called.
func (w *Watcher) OnChange(fn func()) (cancel func()) {
	key := &fn
	w.mu.Lock()
	if w.subs == nil {
		w.subs = map[*func()]struct{}{}
	}
	w.subs[key] = struct{}{}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.subs, key)
		w.mu.Unlock()
	}
}

// OnAuthFailure calls fn (on the watcher's goroutine) each time a probe
// finds the bootstrap servers refusing the factory's credentials or TLS
// settings, until cancel is called. fn must not block.
func (w *Watcher) OnAuthFailure(fn func(error)) (cancel func()) {
	key := &fn
	w.mu.Lock()
	if w.failureSubs == nil {
		w.failureSubs = map[*func(error)]struct{}{}
	}
	w.failureSubs[key] = struct{}{}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.failureSubs, key)
		w.mu.Unlock()
	}
}

// AuthFailure returns why the last probe failed authentication or TLS
// verification, or nil if it did not. It is cheap when nil: producers ask
// on every record. Once the quiet period after the failure is over, the
// first call starts a new check, whose probe clears the failure if the
// cluster accepts the client again.
func (w *Watcher) AuthFailure() error {
	f := w.failed.Load()
	if f == nil {
		return nil
	}
	if !time.Now().Before(f.until) && f.rechecked.CompareAndSwap(false, true) {
		w.Check(false)
	}
	return f.err
}

// Failing returns a flag set while an authentication or TLS failure holds:
// reading it costs a producer one atomic load per record, and only when it
// is set need AuthFailure be called (which starts the re-check after the
// quiet period). It is set before OnAuthFailure's subscribers are called
// and cleared when a probe works again.
func (w *Watcher) Failing() *atomic.Bool { return &w.failing }

// Close stops checks in flight and waits until the watcher's goroutines
// have returned, OnEvent and OnChange callbacks included (so those must not
// call Close). Later checks do nothing. The factory calls it when it is
// done; calling it again is harmless.
func (w *Watcher) Close() {
	w.mu.Lock()
	w.isClosed = true
	w.lifeLocked()
	w.end()
	w.mu.Unlock()
	w.wg.Wait()
}

// lifeLocked returns the context that Close ends; w.mu held.
func (w *Watcher) lifeLocked() context.Context {
	if w.life == nil {
		w.life, w.end = context.WithCancel(context.Background())
	}
	return w.life
}

func (w *Watcher) lifetime() context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lifeLocked()
}

// goLocked runs fn on a goroutine Close waits for, unless the watcher is
// closed; w.mu held. It reports whether fn runs.
func (w *Watcher) goLocked(fn func()) bool {
	if w.isClosed {
		return false
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		fn()
	}()
	return true
}

// Generation returns how many cluster changes the watcher has seen.
func (w *Watcher) Generation() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

// Settle waits until every check requested before the call has been
// answered (or ctx ends) and returns the generation then. Checks requested
// later do not hold it up.
func (w *Watcher) Settle(ctx context.Context) uint64 {
	w.mu.Lock()
	target := w.requested
	for w.handled < target {
		ch := w.progressCh()
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return w.Generation()
		case <-w.lifetime().Done():
			return w.Generation()
		}
		w.mu.Lock()
	}
	gen := w.gen
	w.mu.Unlock()
	return gen
}

// progressCh returns the channel closed at the next progress; w.mu held.
func (w *Watcher) progressCh() chan struct{} {
	if w.progress == nil {
		w.progress = make(chan struct{})
	}
	return w.progress
}

// Cluster returns the cluster id last learnt, or "".
func (w *Watcher) Cluster() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cluster
}

// maxEnded bounds Watcher.ended: cluster changes are rare, and only the
// recent ones are asked about.
const maxEnded = 16

// ClusterOf returns the cluster the watcher knew in generation gen: the
// current one for the current generation, the one a change ended for an
// earlier one (the last 16 are kept), "" when it never knew one. A
// transaction that began before the watcher learnt the cluster id names
// the cluster it began on with it.
func (w *Watcher) ClusterOf(gen uint64) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if gen == w.gen {
		return w.cluster
	}
	return w.ended[gen]
}

// Learning reports whether an unpinned watcher knows no cluster yet. It
// implements wire.Learner: the clients' first Metadata answers teach it
// the cluster they reached, which its own first probe, made in the
// background, may only see after the bootstrap servers moved to another.
func (w *Watcher) Learning() bool { return w.Pin == "" && !w.known.Load() }

// Learn records the cluster the clients talk to, unless one is known.
func (w *Watcher) Learn(id string) {
	w.mu.Lock()
	if w.cluster == "" && w.Pin == "" && id != "" {
		w.cluster = id
		w.known.Store(true)
	}
	w.mu.Unlock()
	// A store given to the factory holding another cluster's token is
	// found here too: a KIP-1243 broker refuses every connection that
	// names that cluster (ApiVersions included), so no answer of the
	// bootstrap servers' would ever replace it.
	if id != "" && w.Pin == "" && w.Tokens != nil && w.OnForeignStore != nil {
		if c := w.Tokens.Load().ClusterID(); c != "" && c != id {
			w.OnForeignStore()
		}
	}
}

// Watch learns the cluster id in the background, so that a later check can
// tell whether the cluster changed.
func (w *Watcher) Watch() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.goLocked(func() { w.Learn(w.ask()) })
}

// Rebootstrapped is the hook to call from kgo's OnRebootstrapRequired. It
// returns at once and checks the cluster id in the background, because kgo
// calls the hook with its own locks held.
func (w *Watcher) Rebootstrapped() { w.Check(true) }

// Check asks, in the background, which cluster the bootstrap servers name
// now, and reports a change. Clients call it when something hints at one
// even without a rebootstrap (a topic id that stopped matching, a bootstrap
// server closing the connection of a stamped request): franz-go reconnects
// to a seed without the KIP-1242 check, so a cluster moved behind the
// bootstrap address shows only that way.
func (w *Watcher) Check(rebootstrapped bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.isClosed {
		return
	}
	w.requested++
	w.rebootstrapped = w.rebootstrapped || rebootstrapped
	if !w.running {
		w.running = w.goLocked(w.loop)
	}
}

// loop probes until every requested check is answered.
func (w *Watcher) loop() {
	for {
		w.mu.Lock()
		if w.handled == w.requested {
			w.running = false
			w.mu.Unlock()
			return
		}
		target, reb := w.requested, w.rebootstrapped
		w.rebootstrapped = false
		w.mu.Unlock()
		w.check(reb)
		w.mu.Lock()
		w.handled = target
		if w.progress != nil {
			close(w.progress)
			w.progress = nil
		}
		w.mu.Unlock()
	}
}

// ask returns the cluster id the seeds name, or "" if none answered in
// time, or if they refused the client's credentials or TLS settings (now,
// or a moment ago: then no probe is made until the quiet period is over).
func (w *Watcher) ask() string {
	if w.Probe == nil {
		return ""
	}
	if f := w.failed.Load(); f != nil && time.Now().Before(f.until) {
		return ""
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	// Close ends a probe in flight too.
	ctx, cancel := context.WithTimeout(w.lifetime(), timeout)
	defer cancel()
	// Right after a rebootstrap the old connections are being torn down,
	// so the first tries may fail: retry, backing off.
	delay := probeBackoffMin
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		id, err := w.Probe(ctx)
		if err == nil && id != "" {
			w.probeWorked()
			return id
		}
		if ctx.Err() != nil {
			return ""
		}
		if IsAuthFailure(err) {
			w.authFailed(err)
			return ""
		}
		if err != nil {
			w.logOnce(slog.LevelInfo, "cluster check: the bootstrap servers did not answer; retrying with backoff", err)
		}
		timer.Reset(jitter(delay))
		select {
		case <-ctx.Done():
			return ""
		case <-timer.C:
		}
		delay = min(2*delay, probeBackoffMax)
	}
}

// probeWorked clears an authentication failure: the cluster accepts the
// client (again).
func (w *Watcher) probeWorked() {
	w.mu.Lock()
	hadFailure := w.failed.Swap(nil) != nil
	w.failing.Store(false)
	w.authFails = 0
	w.logged = nil
	w.mu.Unlock()
	if hadFailure && w.Logger != nil {
		w.Logger.Info("cluster check: the bootstrap servers accept the client again")
	}
}

// authFailed records err, an authentication or TLS failure, starts a quiet
// period without probes, and tells the subscribers. A failure seen for the
// first time is logged and reported as an event.
func (w *Watcher) authFailed(err error) {
	w.mu.Lock()
	w.authFails++
	w.failed.Store(&failure{err: err, until: time.Now().Add(authQuiet(w.authFails))})
	w.failing.Store(true)
	fresh := w.firstSeenLocked(err)
	subs := make([]func(error), 0, len(w.failureSubs))
	for fn := range w.failureSubs {
		subs = append(subs, *fn)
	}
	w.mu.Unlock()
	if fresh {
		if w.Logger != nil {
			w.Logger.Error("cluster check: the bootstrap servers refuse the client's credentials or TLS settings; requests fail with this error until they accept them, and checks back off", "err", err)
		}
		if w.OnEvent != nil {
			w.OnEvent(Event{AuthFailure: err})
		}
	}
	for _, fn := range subs {
		fn(err)
	}
}

// logOnce logs err at level unless its text was logged since the last
// probe that worked.
func (w *Watcher) logOnce(level slog.Level, msg string, err error) {
	w.mu.Lock()
	fresh := w.firstSeenLocked(err)
	w.mu.Unlock()
	if fresh && w.Logger != nil {
		w.Logger.Log(context.Background(), level, msg, "err", err)
	}
}

// maxLogged bounds the failure texts remembered: a text that changes at
// every attempt must not grow the set forever.
const maxLogged = 64

// firstSeenLocked reports whether err's text is new since the last probe
// that worked, and remembers it; w.mu held.
func (w *Watcher) firstSeenLocked(err error) bool {
	text := err.Error()
	if _, ok := w.logged[text]; ok {
		return false
	}
	if w.logged == nil || len(w.logged) >= maxLogged {
		w.logged = map[string]struct{}{}
	}
	w.logged[text] = struct{}{}
	return true
}

func (w *Watcher) check(rebootstrapped bool) {
	now := w.ask()
	w.mu.Lock()
	prev := w.cluster
	before := prev
	if w.Pin != "" {
		before = w.Pin
	}
	// A store's cluster is not a "before": a watcher that never learnt
	// one cannot tell a move from a token given to a fresh factory, which
	// is the Healer's to replace (OnForeignStore).
	ev := Event{Rebootstrapped: rebootstrapped, From: before, To: now}
	if now != "" {
		w.cluster = now
		w.known.Store(true)
		// A pinned watcher reports a move away from the pin once, not at
		// every check while the bootstrap servers name the other cluster:
		// each report fails records and warns.
		if before != "" && now != before && (w.Pin == "" || now != prev) {
			if w.ended == nil {
				w.ended = map[uint64]string{}
			}
			w.ended[w.gen] = before
			delete(w.ended, w.gen-maxEnded)
			w.gen++
			ev.Changed = true
			// A pinned factory never follows the change, so its tokens
			// stay valid; otherwise they mean nothing on the new cluster.
			// The owner reports the move (once, whoever saw it first).
			if w.Tokens != nil {
				ev.StoreReset = w.Tokens.Moved("", before, now, w.Pin == "")
			}
		}
	}
	var subs []func()
	if ev.Changed {
		for fn := range w.subs {
			subs = append(subs, *fn)
		}
	}
	foreign := false
	if !ev.Changed && now != "" && w.Pin == "" && w.Tokens != nil {
		c := w.Tokens.Load().ClusterID()
		foreign = c != "" && c != now
	}
	w.mu.Unlock()
	if foreign && w.OnForeignStore != nil {
		w.OnForeignStore()
	}
	// Report before the check counts as handled, so that whoever waits in
	// Settle sees the event's effects (a reset store, failed records)
	// already in place.
	if w.OnEvent != nil {
		w.OnEvent(ev)
	}
	for _, fn := range subs {
		fn()
	}
}
