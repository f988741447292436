package wire

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
)

// What an Emulator learns after a metadata write: the committed offset
// (learnCommitted, learnWrite), owed when it comes too late (owe); and
// after a metadata read, what the broker applied (learnApplied). See the
// comment at the top of emulate.go.

// learnCommitted asks the committed offset and advances the store to it;
// the committed question. A failed answer (a broker that crashed, a
// quorum electing a new leader) is asked again, with a growing pause,
// until one comes or ctx ends. It reports whether the store got the
// committed offset.
func (e *Emulator) learnCommitted(ctx context.Context) bool {
	pause := committedRetryMin
	for {
		c, err := e.cfg.Oracle.Committed(ctx)
		if err == nil {
			e.learnt.Add(1)
			e.verified.Store(true)
			e.advance(c)
			return true
		}
		switch {
		case errors.Is(err, ErrEmulationUnsupported):
			e.turnOff(err)
			return false
		case isAuthorization(err):
			if _, ok := e.cfg.Oracle.(BrokerAsker); ok {
				e.limit(err)
			} else {
				e.turnOff(&describeClusterDenied{err: err})
			}
			return false
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			if e.ask.closing() {
				// Close ended the question: nothing waits for it.
				e.log(kgo.LogLevelDebug, "learning the committed metadata offset stopped: the factory is closing", "err", err)
				return false
			}
			e.log(kgo.LogLevelWarn, "learning the committed metadata offset failed; a write may not be visible at once", "err", err)
			return false
		case <-t.C:
		}
		e.log(kgo.LogLevelDebug, "learning the committed metadata offset failed; asking again", "err", err)
		pause = min(2*pause, committedRetryMax)
	}
}

// coverWrite learns the offset of a metadata write a KIP-1243 broker
// answered with a token that does not cover it (see uncoveredWrite), as
// afterRead does for an emulated broker's write, for at most LearnMaxWait
// and never past deadline: the answer goes to its caller once the store
// has the write. Without DESCRIBE on CLUSTER (limited) it cannot, and the
// answer goes on as it came.
func (e *Emulator) coverWrite(deadline time.Time) {
	if e.off.Load() || e.limited.Load() {
		return
	}
	end := time.Now().Add(e.cfg.LearnMaxWait)
	if !deadline.IsZero() {
		end = minTime(end, deadline)
	}
	e.lastVerify.Store(time.Now().UnixNano())
	e.learnWrite(end)
}

// learnWrite holds the answer to a metadata write until a committed
// offset read after it is in the store, asking again while the questions
// fail (a crashed broker, a quorum electing a new leader), until end
// (LearnMaxWait, or kgo's read deadline for the answer if sooner: kgo
// waits for an answer it wrote the request of even after its caller's
// context ended, up to the request's own timeout plus its overhead of
// 10 s: 25 s for kadm's CreateTopics by default, 70 s for a raw
// kmsg.CreateTopicsRequest). If end comes first, the answer goes on
// and the write's offset is owed (see owe).
func (e *Emulator) learnWrite(end time.Time) {
	for {
		began := time.Now()
		f := e.ask.ask(&e.committed, true)
		if await(f.done, end, nil) != nil {
			break
		}
		if f.ok || f == closedFlight || e.off.Load() || e.limited.Load() {
			return
		}
		if left := time.Until(end); left <= 0 {
			break
		} else if took := time.Since(began); took < committedRetryMin {
			time.Sleep(min(committedRetryMin-took, left))
		}
	}
	e.owe(e.payOwed)
}

// owe notes that the answer of a metadata write went to its caller before
// its offset was in the store: until pay, on a goroutine of its own, has
// put it there (a committed offset read after it: payOwed; a broker that
// shows it: learnShown) or given up, every request but the connection
// handshake waits (awaitOwed), so that no read started after the write's
// answer shows the cluster from before it. OnWriteUnlearnt is told.
func (e *Emulator) owe(pay func(ctx context.Context)) {
	if e.off.Load() {
		return
	}
	e.owed.Add(1)
	e.unlearnt.Add(1)
	e.log(kgo.LogLevelWarn, "a metadata write's answer reached its caller before its offset was learnt (its deadline ended); requests wait until it is", "owed", e.owed.Load())
	if e.cfg.OnWriteUnlearnt != nil {
		e.cfg.OnWriteUnlearnt()
	}
	if !e.ask.spawn(func(ctx context.Context) {
		defer e.owed.Add(-1)
		pay(ctx)
	}) {
		e.owed.Add(-1) // closed: nothing waits any more
	}
}

// payOwed asks the committed offset until an answer read after the owed
// write is in the store (or the emulation is off, limited or closed).
func (e *Emulator) payOwed(ctx context.Context) {
	pause := committedRetryMin
	for {
		f := e.ask.ask(&e.committed, true)
		select {
		case <-f.done:
		case <-ctx.Done():
			return
		}
		if f.ok || f == closedFlight || e.off.Load() || e.limited.Load() {
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, committedRetryMax)
	}
}

// advance is the one place the Emulator moves the store forward.
func (e *Emulator) advance(c consistency.Token) {
	if _, err := e.cfg.Tokens.Committed(c); err != nil {
		// Another cluster's token: the rebootstrap machinery decides.
		e.log(kgo.LogLevelDebug, "emulated token not stored", "token", c.String(), "err", err)
	}
}

// learnApplied advances the store to what the broker of v has applied
// now, after it answered a metadata read: at least what it showed.
// cluster is the cluster the answer named ("" for none). Nothing learnt
// from a broker of another cluster than the store's reaches the store: an
// answer naming another cluster, a view of another cluster's node, a
// probe answered by another cluster.
func (e *Emulator) learnApplied(v *brokerView, cluster string, end time.Time) {
	if cur := e.cfg.Store.Load(); !cur.IsUnknown() {
		if cluster != "" && cluster != cur.ClusterID() {
			return
		}
		cluster = cur.ClusterID()
	}
	if cluster == "" || v.cluster != "" && v.cluster != cluster {
		return
	}
	if !e.verified.Load() {
		e.verify() // in the background: a read's answer is not held for it
		return
	}
	// Only an answer given after this response can stand for what it
	// showed.
	if await(e.ask.ask(&v.probe, true).done, end, nil) != nil {
		return
	}
	applied := v.applied.Load()
	if p := v.answered.Load(); applied < 0 || p == nil || *p != cluster {
		return
	}
	if c, err := consistency.Of(cluster, applied); err == nil {
		e.advance(c)
	}
}
