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
)

// Following a broker that moved.
//
// When a broker gets a new address and its old one now leads to a broker
// of another cluster, kgo learns the move only the slow way: its next dial
// reaches the other cluster, the KIP-1242 ApiVersions check there answers
// REBOOTSTRAP_REQUIRED, kgo rebootstraps, and the request that needed the
// connection, failed twice by then, waits out the producer's backoff. The
// Java client asks for metadata as soon as it sees the close and sends
// nothing before.
//
// The interceptor does the same at the one point it controls, the dial. A
// dial to an address whose broker closed a connection within
// relocateWindow first asks the Relocator (the bootstrap servers) where
// the node kgo knows at that address lives now. If it moved, the dial goes
// to the new address, and that connection must open with the ApiVersions
// v5 request naming the same cluster and node, which the broker there
// checks (KIP-1242): nothing else is written to it before the broker
// answered that request without error. The Relocator
// is told once the connection has been answered, so that kgo refreshes its
// metadata and dials the new address itself from then on; telling it
// earlier would have kgo replace the broker, and kill the redirected
// connection, under the very request it carries.
//
// A dial that did not follow a close costs one atomic load. The node an
// address belongs to is learnt from the ApiVersions v5 requests kgo writes
// (one per connection); the table holds one entry per broker address.

// Relocator tells the interceptor where a broker went; see Config.Relocator.
type Relocator interface {
	// Locate asks the bootstrap servers where node of cluster, which kgo
	// knows at addr, lives now. It returns the address to dial instead,
	// or "" when the node is still at addr or cannot be followed there
	// (the bootstrap servers name another cluster or do not list the
	// node; addr is a bootstrap server). It must return when ctx ends.
	Locate(ctx context.Context, addr, cluster string, node int32) (string, error)
	// Relocated is told, once per redirected connection, after the
	// connection's first answer beyond ApiVersions: dials to addr for
	// node went to to. It should make the client learn the new address
	// (kgo's ForceMetadataRefresh). It must return quickly.
	Relocated(addr, to string, node int32)
}

// defaultRelocateWindow is how long after a broker closed a connection a
// dial to its address asks the Relocator first (timing.relocateWindow).
const defaultRelocateWindow = time.Second

// maxRelocateAddrs bounds the address table; kgo talks to one address per
// broker, so only a long life through many broker replacements fills it.
const maxRelocateAddrs = 4096

// nodeAt is what the interceptor knows about one broker address.
type nodeAt struct {
	cluster string // named by kgo's last ApiVersions v5 to the address
	node    int32
	closed  int64 // unix nanoseconds of the broker's last close; 0: none
	probed  int64 // when the last Locate for the address started
	target  string
	wait    chan struct{} // closed when the Locate in progress ends
}

// moved is the node a redirected connection must name in its first
// request.
type moved struct {
	cluster string
	node    int32
	to      string
}

// relocation holds an Interceptor's address table.
type relocation struct {
	r         Relocator
	lastClose atomic.Int64 // unix nanoseconds of the last close of a known address
	mu        sync.Mutex
	addrs     map[string]*nodeAt
}

// noteClose records that the broker at addr closed a connection. Called
// when a connection ends, never on a request.
func (i *Interceptor) noteClose(addr string) {
	if i.reloc.r == nil {
		return
	}
	now := time.Now().UnixNano()
	i.reloc.mu.Lock()
	if n := i.reloc.addrs[addr]; n != nil {
		n.closed = now
		i.reloc.lastClose.Store(now)
	}
	i.reloc.mu.Unlock()
}

// noteNode records the cluster and node kgo named for addr in an
// ApiVersions v5 request. Once per connection; it allocates only when the
// address is new or its node changed.
func (i *Interceptor) noteNode(addr string, cluster []byte, node int32) {
	rl := &i.reloc
	rl.mu.Lock()
	defer rl.mu.Unlock()
	n := rl.addrs[addr]
	if n != nil && n.node == node && n.cluster == string(cluster) {
		return
	}
	if n == nil {
		if rl.addrs == nil {
			rl.addrs = map[string]*nodeAt{}
		}
		if len(rl.addrs) >= maxRelocateAddrs {
			for a, old := range rl.addrs { // drop any idle entry
				if old.wait == nil {
					delete(rl.addrs, a)
					break
				}
			}
		}
		n = &nodeAt{}
		rl.addrs[addr] = n
	}
	// Another node, or another cluster, at this address: what was known
	// about the old one no longer applies.
	*n = nodeAt{cluster: string(cluster), node: node, wait: n.wait}
}

// relocate returns where a dial to addr should go: the node's new address
// and what its connection must name first, or "" and nil to dial addr.
// ctx bounds the Locate, which gets at most half of what is left (see
// locate), so that the dial keeps time of its own.
func (i *Interceptor) relocate(ctx context.Context, addr string) (string, *moved) {
	rl := &i.reloc
	if rl.r == nil {
		return "", nil
	}
	now := time.Now().UnixNano()
	if last := rl.lastClose.Load(); last == 0 || now-last > int64(i.timing.relocateWindow) {
		return "", nil
	}
	rl.mu.Lock()
	n := rl.addrs[addr]
	for n != nil && n.wait != nil { // another dial is asking already
		w := n.wait
		rl.mu.Unlock()
		select {
		case <-w:
		case <-ctx.Done():
			return "", nil
		}
		rl.mu.Lock()
		n = rl.addrs[addr]
	}
	if n == nil || n.closed == 0 || now-n.closed > int64(i.timing.relocateWindow) {
		rl.mu.Unlock()
		return "", nil
	}
	if n.probed >= n.closed { // answered since the close: reuse it
		to, cluster, node := n.target, n.cluster, n.node
		rl.mu.Unlock()
		if to == "" {
			return "", nil
		}
		return to, &moved{cluster: cluster, node: node, to: to}
	}
	n.probed, n.target = now, ""
	wait := make(chan struct{})
	n.wait = wait
	cluster, node := n.cluster, n.node
	rl.mu.Unlock()

	to, err := i.locate(ctx, addr, cluster, node)

	rl.mu.Lock()
	same := n.node == node && n.cluster == cluster
	if n.wait == wait {
		n.wait = nil
		if same {
			n.target = to
		} else { // noteNode replaced the node meanwhile: ask again
			n.probed = 0
		}
	}
	close(wait)
	rl.mu.Unlock()
	if !same {
		return "", nil
	}
	if err != nil {
		i.log(kgo.LogLevelInfo, "could not ask the bootstrap servers where a broker that closed its connection went; dialing its old address", "addr", addr, "broker", node, "err", err)
		return "", nil
	}
	if to == "" {
		return "", nil
	}
	i.log(kgo.LogLevelInfo, "the broker moved: dialing its new address, which the cluster check of the connection confirms", "addr", addr, "to", to, "broker", node, "cluster", cluster)
	return to, &moved{cluster: cluster, node: node, to: to}
}

// maxLocate bounds a Locate: a dial that followed a close waits for it, and
// a broker that merely restarted must not be reached later than that for
// a seed that does not answer.
const maxLocate = time.Second

// locate runs the Relocator's Locate within half of ctx's time (the
// interceptor's dial timeout when ctx has no deadline), at most maxLocate.
func (i *Interceptor) locate(ctx context.Context, addr, cluster string, node int32) (string, error) {
	budget := i.timeout / 2
	if dl, ok := ctx.Deadline(); ok {
		budget = time.Until(dl) / 2
	}
	pctx, cancel := context.WithTimeout(ctx, min(budget, maxLocate))
	defer cancel()
	to, err := i.reloc.r.Locate(pctx, addr, cluster, node)
	if err != nil {
		return "", err
	}
	if to == addr {
		return "", nil
	}
	return to, nil
}

// errMovedCheck is Write's error for a redirected connection whose first
// request is not the ApiVersions v5 naming the node it was redirected for.
var errMovedCheck = errors.New("wire: a connection to a broker's new address must open with the ApiVersions v5 request naming its cluster and node")

// checkMoved lets a request through a redirected connection, until the
// broker answered the ApiVersions v5 naming the node without error
// (movedOK, set by the reader), only if it is the whole ApiVersions v5
// request naming the cluster and node the connection was redirected for:
// the broker's KIP-1242 check of that request is what makes the new
// address trustworthy, and only an answer without error says the check
// ran and passed. A server that answers UNSUPPORTED_VERSION gets no
// downgraded ApiVersions, no SASL, nothing else.
func (w *requestWriter) checkMoved(p []byte) error {
	if parseRequest(p, &w.wh) != nil || 4+int(w.wh.size) != len(p) || w.wh.key != apiVersionsKey || w.wh.version < 5 {
		return fmt.Errorf("%w (addr %s, new address %s)", errMovedCheck, w.addr, w.moved.to)
	}
	cluster, node, ok := apiVersionsIDs(p[w.wh.hdrLen:])
	if !ok || node != w.moved.node || string(cluster) != w.moved.cluster {
		return fmt.Errorf("%w (addr %s, new address %s: want cluster %q node %d)", errMovedCheck, w.addr, w.moved.to, w.moved.cluster, w.moved.node)
	}
	return nil
}

// noteAPIVersions records the cluster and node that a whole ApiVersions
// request p (parsed into w.wh) names, if it is v5 and names them: for the
// Relocator's table, and for the Emulator, which keys what it knows of a
// broker by node and cluster (Emulator.bind).
func (w *requestWriter) noteAPIVersions(p []byte) {
	if w.wh.version < 5 || len(p) < w.wh.hdrLen || (w.i.reloc.r == nil && w.i.emu == nil) {
		return
	}
	cluster, node, ok := apiVersionsIDs(p[w.wh.hdrLen:])
	if !ok {
		return
	}
	if w.i.reloc.r != nil {
		w.i.noteNode(w.addr, cluster, node)
	}
	if w.i.emu != nil {
		w.view.Store(w.i.emu.bind(w.addr, cluster, node))
	}
}

// apiVersionsIDs reads ClusterId and NodeId from an ApiVersions v5 request
// body: ClientSoftwareName and ClientSoftwareVersion (compact strings),
// ClusterId (compact nullable string), NodeId (int32). ok is false for a
// null cluster or a negative node (kgo's requests to seed brokers) and for
// a body that does not parse.
func apiVersionsIDs(b []byte) (cluster []byte, node int32, ok bool) {
	for range 2 {
		n, w := binary.Uvarint(b)
		if w <= 0 || n == 0 || n-1 > uint64(len(b)-w) {
			return nil, 0, false
		}
		b = b[w+int(n-1):]
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n == 0 || n-1 > MaxClusterIDLen || n-1 > uint64(len(b)-w) {
		return nil, 0, false
	}
	cluster, b = b[w:w+int(n-1)], b[w+int(n-1):]
	if len(b) < 4 {
		return nil, 0, false
	}
	node = int32(binary.BigEndian.Uint32(b))
	return cluster, node, node >= 0
}

// announceMove tells the Relocator, once, that this redirected connection
// works; see Relocator.Relocated.
func (l *link) announceMove() {
	if l.moved != nil && l.movedAnnounced.CompareAndSwap(false, true) {
		l.i.reloc.r.Relocated(l.addr, l.moved.to, l.moved.node)
	}
}

// isSetupKey reports whether key is one of the requests kgo sends while it
// sets a connection up, before the request it dialed for.
func isSetupKey(key int16) bool {
	return key == apiVersionsKey || key == saslHandshakeKey || key == saslAuthenticateKey
}
