package wire

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// Requests held for a token.
//
// A KIP-1243 broker holds a request whose token it has not applied, for up
// to its WaitMax (5 s on the local cluster, up to its request timeout on a
// real one), and a token no broker will reach is held that long at every
// try. Callers with shorter deadlines give up first and never see the
// INCONSISTENT_METADATA answer that would have the token checked; kgo may
// even close the connection under it. So a connection does not wait for
// the answer: a request carrying a token that stays unanswered for
// healAfter asks the Healer (Healer.Held, once per healAfter while it
// stays unanswered), which checks the store unless its cluster is known to
// have committed the token (then only once such requests were held
// coveredHeld in all); and once the store no longer holds the token such a request carried
// (the Healer lowered it, or a cluster change reset it), the connection
// fails with a *HeldError, which kgo retries on a new connection with the
// store's token, rather than leave the request, and every request queued
// behind it on the broker, held to the end of the broker's wait.
//
// The watch costs a request two atomic adds and, at most once per
// healAfter per connection, a timer: one per connection, armed by the
// writer when a watched request goes out and none is armed, re-armed by
// itself while watched requests stay unanswered. Requests a broker may
// hold for reasons of its own (a Fetch's long poll, a group's rebalance)
// are not watched (mayBlock).

// mayBlock reports whether a broker may hold a request of key for reasons
// other than a token: long polls and group barriers.
func mayBlock(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Fetch, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.ShareFetch:
		return true
	}
	return false
}

// heldWatch is a link's watch of its requests that carry a token. written
// is the writer's, answered the reader's; the fields below armed belong to
// whoever set armed (the writer arming the timer, or the timer re-arming
// itself) until it is cleared.
type heldWatch struct {
	written  atomic.Uint64 // watched requests written
	answered atomic.Uint64 // watched requests answered
	armed    atomic.Bool   // the timer is set
	timer    atomic.Pointer[time.Timer]
	aborted  atomic.Pointer[HeldError] // the connection was failed for a held request
	// The token the last watched request carried, and its api key: the
	// cluster kept apart, so that a new offset costs no allocation.
	lastCluster atomic.Pointer[string]
	lastOffset  atomic.Int64
	lastKey     atomic.Int32

	n   uint64            // the timer watches the n-th watched request
	tok consistency.Token // the token it carried
	key int16
}

// HeldError fails a connection whose request carried a token the store no
// longer holds (healed, or reset for another cluster) and was still held
// by the broker. kgo retries the request on a new connection: it is
// Temporary.
type HeldError struct {
	Addr   string
	APIKey int16
	Sent   consistency.Token // the token the request carried
	Now    consistency.Token // the store's token when the connection failed
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("wire: request (api key %d) to %s was held for token %v, which the store no longer holds (now %v); retrying on a new connection", e.APIKey, e.Addr, e.Sent, e.Now)
}

// Temporary reports true: the request is sent again on a new connection.
func (e *HeldError) Temporary() bool { return true }

// noteWatched is the writer's call after a request of key carrying tok
// was queued for its answer.
func (l *link) noteWatched(key int16, tok consistency.Token) {
	if p := l.held.lastCluster.Load(); p == nil || *p != tok.ClusterID() {
		l.noteLastCluster(tok.ClusterID())
	}
	l.held.lastOffset.Store(tok.Offset())
	l.held.lastKey.Store(int32(key))
	n := l.held.written.Add(1)
	if l.held.armed.CompareAndSwap(false, true) {
		l.held.n, l.held.tok, l.held.key = n, tok, key
		l.armHeld()
	}
}

// noteLastCluster keeps the cluster of the last watched request's token;
// apart from noteWatched, whose argument then stays on the stack.
func (l *link) noteLastCluster(cluster string) { l.held.lastCluster.Store(&cluster) }

// noteAnswered is the reader's call when the answer to a watched request
// was read.
func (l *link) noteAnswered() { l.held.answered.Add(1) }

// armHeld sets the timer; armed is the caller's.
func (l *link) armHeld() {
	if t := l.held.timer.Load(); t != nil {
		t.Reset(healAfter)
		return
	}
	l.held.timer.Store(time.AfterFunc(healAfter, l.heldFired))
}

// heldFired runs healAfter after the timer was set.
func (l *link) heldFired() {
	w := &l.held
	if w.answered.Load() < w.n { // still unanswered
		if l.dead.Load() {
			w.armed.Store(false)
			return
		}
		now := l.i.store.Load()
		if now != w.tok && (now.ClusterID() != w.tok.ClusterID() || now.Offset() < w.tok.Offset()) {
			l.abortHeld(now)
			w.armed.Store(false)
			return
		}
		l.i.healer.Held()
		l.armHeld() // to see the heal, and fail the connection then
		return
	}
	w.armed.Store(false)
	// Watched requests written since the one watched: watch the latest.
	if l.dead.Load() {
		return
	}
	if n := w.written.Load(); w.answered.Load() < n && w.armed.CompareAndSwap(false, true) {
		tok, err := consistency.Of(*w.lastCluster.Load(), w.lastOffset.Load())
		if err != nil {
			tok = l.i.store.Load()
		}
		w.n, w.tok, w.key = n, tok, int16(w.lastKey.Load())
		l.armHeld()
	}
}

// abortHeld fails the connection under its held request: the reader
// returns a *HeldError once the socket read ends.
func (l *link) abortHeld(now consistency.Token) {
	e := &HeldError{Addr: l.addr, APIKey: l.held.key, Sent: l.held.tok, Now: now}
	if l.held.aborted.CompareAndSwap(nil, e) {
		l.i.log(kgo.LogLevelInfo, "request held for a token the store no longer holds; failing its connection so that it is sent again", "addr", l.addr, "key", e.APIKey, "sent", e.Sent.String(), "now", now.String())
		l.dead.Store(true)
		l.Conn.Close()
	}
}
