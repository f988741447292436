package wire

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Pacing dials to an address that refused the client.
//
// A broker of another cluster answers kgo's ApiVersions v5 with
// REBOOTSTRAP_REQUIRED (KIP-1242). kgo rebootstraps and asks for metadata
// at once; while the cluster still lists the broker at that address, the
// answer sends kgo straight back to it, and nothing in kgo waits between
// the rounds: a misrouted broker was dialled every ~60 ms for as long as the
// misroute lasted. The Java client backs off its reconnects to a node.
//
// The interceptor backs off the dials it makes: after the n-th refusal in
// a row from an address, the next dial to it first waits until
// refusedPause(n) has passed since that refusal, the shortest wait of the
// producer's default retry backoff (the Java client's retry.backoff.ms,
// 100 ms doubling to 1 s, ±20%). A producer retrying a record finds the
// address open when its own backoff ends, and the dials kgo adds between
// its retries are held to the same pace. (With the Java client's reconnect
// backoff, 50 ms doubling, those extra dials came back before the
// producer's retries and the misrouted address refused one attempt more
// than the Java producer's.) A connection the address answers without a
// refusal ends the pacing, and so does refusedForget without a refusal.
// A dial to an address with no refusal on record costs one atomic load
// while the table is empty.

// Pacing bounds, the defaults of timing.refusedPauseMin, refusedPauseMax
// and refusedForget: how long after its last refusal an address is dialled
// as if it had never refused.
const (
	defaultRefusedPauseMin = 100 * time.Millisecond
	defaultRefusedPauseMax = time.Second
	defaultRefusedForget   = 30 * time.Second
)

// maxRefusedAddrs bounds the table: addresses beyond it are not paced.
const maxRefusedAddrs = 4096

// refusedPause is the pause after the n-th refusal in a row (n >= 1): the
// shortest wait of the producer's default retry backoff for n
// (factory/backoff.go: 100ms doubling up to 1s, the default pauseMin and pauseMax,
// then ±20% jitter), that is 80% of it, without jitter. A pause that
// could outlast the producer's own wait would hold its retry back: with
// jitter on both, each step waited for the later of two draws, and a
// misroute's sixth attempt came about 100 ms after the Java producer's.
func refusedPause(n int, pauseMin, pauseMax time.Duration) time.Duration {
	d := pauseMax
	if n < 16 {
		d = min(pauseMin<<(n-1), pauseMax)
	}
	return d * 8 / 10
}

// refusal is what the interceptor knows of an address that refused the
// client.
type refusal struct {
	n     int   // refusals in a row
	until int64 // unix nanoseconds before which no dial goes out
	last  int64 // unix nanoseconds of the last refusal
}

// refusals is an Interceptor's table of refusing addresses.
type refusals struct {
	count atomic.Int32 // entries in m: 0 spares dials the lock
	mu    sync.Mutex
	m     map[string]*refusal
}

// noteRefused records that addr answered an ApiVersions request with
// REBOOTSTRAP_REQUIRED.
func (i *Interceptor) noteRefused(addr string) {
	rs := &i.refused
	now := time.Now().UnixNano()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	r := rs.m[addr]
	if r == nil {
		if len(rs.m) >= maxRefusedAddrs {
			for a, old := range rs.m { // make room: forget the quiet ones
				if now-old.last > int64(i.timing.refusedForget) {
					delete(rs.m, a)
					rs.count.Add(-1)
				}
			}
		}
		if len(rs.m) >= maxRefusedAddrs {
			return
		}
		if rs.m == nil {
			rs.m = map[string]*refusal{}
		}
		r = &refusal{}
		rs.m[addr] = r
		rs.count.Add(1)
	} else if now-r.last > int64(i.timing.refusedForget) {
		r.n = 0
	}
	r.n++
	r.last = now
	r.until = now + int64(refusedPause(r.n, i.timing.refusedPauseMin, i.timing.refusedPauseMax))
}

// noteAccepted records that addr answered an ApiVersions request without
// a refusal: dials to it are no longer paced.
func (i *Interceptor) noteAccepted(addr string) {
	rs := &i.refused
	if rs.count.Load() == 0 {
		return
	}
	rs.mu.Lock()
	if _, ok := rs.m[addr]; ok {
		delete(rs.m, addr)
		rs.count.Add(-1)
	}
	rs.mu.Unlock()
}

// paceRefused waits, before a dial to addr, until the pause after the
// address's last refusal is over. It returns ctx's error if ctx ends
// first.
func (i *Interceptor) paceRefused(ctx context.Context, addr string) error {
	rs := &i.refused
	if rs.count.Load() == 0 {
		return nil
	}
	now := time.Now().UnixNano()
	rs.mu.Lock()
	r := rs.m[addr]
	var until, n int64
	if r != nil {
		until, n = r.until, int64(r.n)
		if now-r.last > int64(i.timing.refusedForget) { // long quiet: forget it
			delete(rs.m, addr)
			rs.count.Add(-1)
		}
	}
	rs.mu.Unlock()
	wait := time.Duration(until - now)
	if wait <= 0 {
		return nil
	}
	i.log(kgo.LogLevelDebug, "pausing the dial to an address that answered for another cluster", "addr", addr, "refusals", n, "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wire: dial %s: paused after %d refusals (REBOOTSTRAP_REQUIRED): %w", addr, n, context.Cause(ctx))
	}
}
