package wire

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// fakeBroker answers every request with a four-byte body and closes its
// connections on demand.
type fakeBroker struct {
	ln       net.Listener
	accepted atomic.Int64
	apiErr   atomic.Uint32 // the error code of its ApiVersions answers
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

func newFakeBroker(t *testing.T) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{ln: ln}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.accepted.Add(1)
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				b.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.closeConns()
		b.wg.Wait()
	})
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

// waitAccepted waits until b accepted n connections; the accept loop may
// count one after the dial returned.
func (b *fakeBroker) waitAccepted(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for b.accepted.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s accepted %d connections, want %d", b.addr(), b.accepted.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// serve answers each request with an empty body (an ApiVersions with
// apiErr). It reuses its buffers: it runs in the test's process, and a
// test counting the allocations of a write (testing.AllocsPerRun counts
// the whole process's) would count its own when it answers at once.
func (b *fakeBroker) serve(c net.Conn) {
	defer c.Close()
	var size [4]byte
	var req, out []byte
	body := make([]byte, 4)
	for {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(size[:]))
		if cap(req) < n {
			req = make([]byte, n)
		}
		req = req[:n]
		if _, err := io.ReadFull(c, req); err != nil {
			return
		}
		corr := binary.BigEndian.Uint32(req[4:8])
		clear(body)
		if int16(binary.BigEndian.Uint16(req)) == apiVersionsKey {
			binary.BigEndian.PutUint16(body, uint16(b.apiErr.Load()))
		}
		out = binary.BigEndian.AppendUint32(out[:0], uint32(4+len(body)))
		out = binary.BigEndian.AppendUint32(out, corr)
		out = append(out, body...)
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

func (b *fakeBroker) closeConns() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
	b.conns = nil
}

// fakeRelocator answers Locate with to (or err, or waits for ctx when
// block is set) and counts calls.
type fakeRelocator struct {
	mu        sync.Mutex
	to        string
	err       error
	block     bool
	located   []string      // "addr cluster node" per call
	allowed   time.Duration // what the last Locate's context left it
	relocated atomic.Int64
}

func (r *fakeRelocator) Locate(ctx context.Context, addr, cluster string, node int32) (string, error) {
	r.mu.Lock()
	r.located = append(r.located, addr+" "+cluster+" "+string(rune('0'+node)))
	if dl, ok := ctx.Deadline(); ok {
		r.allowed = time.Until(dl)
	}
	to, err, block := r.to, r.err, r.block
	r.mu.Unlock()
	if block {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return to, err
}

func (r *fakeRelocator) Relocated(string, string, int32) { r.relocated.Add(1) }

func (r *fakeRelocator) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.located...)
}

func apiVersionsV5(cluster string, node int32) kmsg.Request {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 5
	r.ClientSoftwareName, r.ClientSoftwareVersion = "kgo", "1"
	r.ClusterID = &cluster
	r.NodeID = node
	return r
}

// exchange writes req and reads its four-byte answer.
func exchange(t *testing.T, c net.Conn, req kmsg.Request, corr int32) {
	t.Helper()
	frame := reqFrame(req, corr)
	if n, err := c.Write(frame); err != nil || n != len(frame) {
		t.Fatalf("write %d: %d of %d bytes, %v", corr, n, len(frame), err)
	}
	resp := make([]byte, len(respFrame(corr, nil, []byte{0, 0, 0, 0})))
	if _, err := io.ReadFull(c, resp); err != nil {
		t.Fatalf("read %d: %v", corr, err)
	}
}

// knownThenClosed dials old, names node 3 of cluster "c" there as kgo's
// ApiVersions v5 does, and has the broker close the connection, which the
// reader sees.
func knownThenClosed(t *testing.T, ctx context.Context, ic *Interceptor, old *fakeBroker) {
	t.Helper()
	c := dialKnownThenCut(t, ctx, ic, old)
	defer c.Close()
	if _, err := c.Read(make([]byte, 16)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after the broker's close: %v, want io.EOF", err)
	}
}

// dialKnownThenCut dials old, names node 3 of cluster "c" there and has
// the broker close the connection; it returns the connection, which has
// not looked yet.
func dialKnownThenCut(t *testing.T, ctx context.Context, ic *Interceptor, old *fakeBroker) net.Conn {
	t.Helper()
	c, err := ic.DialContext(ctx, "tcp", old.addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() }) // also when exchange fails the test
	exchange(t, c, apiVersionsV5("c", 3), 1)
	old.closeConns()
	return c
}

func newRelocating(t *testing.T, r Relocator) *Interceptor {
	t.Helper()
	ic, err := New(Config{Store: consistency.NewMemoryStore(), Relocator: r, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// TestRelocateFollowsMove: after the broker at an address closed a
// connection, the next dial there asks where the node went and goes to its
// new address; that connection lets nothing but the ApiVersions v5 naming
// the node through first, and the Relocator hears of the move after the
// first answer beyond ApiVersions. Later dials in the window reuse the
// answer.
func TestRelocateFollowsMove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old, moved := newFakeBroker(t), newFakeBroker(t)
	r := &fakeRelocator{to: moved.addr()}
	ic := newRelocating(t, r)

	// No close yet: a dial goes where it is told, asking nobody.
	c, err := ic.DialContext(ctx, "tcp", old.addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := len(r.calls()); n != 0 {
		t.Fatalf("a dial that followed no close asked the Relocator %d times", n)
	}

	knownThenClosed(t, ctx, ic, old)
	oldAccepts := old.accepted.Load()
	c = dialRelocated(t, ctx, ic, r, old, moved)
	defer c.Close()
	if moved.accepted.Load() != 1 || old.accepted.Load() != oldAccepts {
		t.Fatalf("the dial reached the new address %d times, the old one %d more times; want 1 and 0",
			moved.accepted.Load(), old.accepted.Load()-oldAccepts)
	}
	// Nothing but the node's own ApiVersions v5 goes first.
	for _, req := range []kmsg.Request{metadataReq(1), apiVersionsReq(4), apiVersionsV5("c", 4), apiVersionsV5("other", 3)} {
		if n, err := c.Write(reqFrame(req, 9)); n != 0 || !errors.Is(err, errMovedCheck) {
			t.Fatalf("first request %T v%d on a redirected connection: %d bytes, %v; want 0 and errMovedCheck", req, req.GetVersion(), n, err)
		}
	}
	exchange(t, c, apiVersionsV5("c", 3), 1)
	if r.relocated.Load() != 0 {
		t.Fatal("the Relocator was told before the connection answered anything beyond ApiVersions")
	}
	exchange(t, c, metadataReq(1), 2)
	exchange(t, c, metadataReq(1), 3)
	if n := r.relocated.Load(); n != 1 {
		t.Fatalf("Relocated called %d times, want once", n)
	}

	// A second connection within the window goes there too, without
	// asking again.
	c2, err := ic.DialContext(ctx, "tcp", old.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	moved.waitAccepted(t, 2)
	if n := len(r.calls()); n != 1 || moved.accepted.Load() != 2 {
		t.Fatalf("second dial: %d Locate calls and %d accepts at the new address; want 1 and 2", n, moved.accepted.Load())
	}

	// The request path allocates nothing more for the redirect.
	cn := c.(*conn)
	frame := reqFrame(metadataReq(1), 4)
	if n := testing.AllocsPerRun(100, func() {
		cn.w.lastWrite = time.Now().UnixNano() // no idle peek
		cn.q.pop()                             // as if answered
		if _, err := cn.Write(frame); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("write on a redirected connection: %v allocations", n)
	}
}

// TestRelocateNeedsCheckedAnswer: a redirected connection counts as
// checked once the broker answered its ApiVersions v5 without error, not
// once the request was written: a server there that answers
// UNSUPPORTED_VERSION gets no downgraded ApiVersions (which names no node)
// and nothing else, while the v5 may be sent again.
func TestRelocateNeedsCheckedAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old, moved := newFakeBroker(t), newFakeBroker(t)
	moved.apiErr.Store(35) // UNSUPPORTED_VERSION
	ic := newRelocating(t, &fakeRelocator{to: moved.addr()})
	knownThenClosed(t, ctx, ic, old)
	c, err := ic.DialContext(ctx, "tcp", old.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	moved.waitAccepted(t, 1)
	exchange(t, c, apiVersionsV5("c", 3), 1)
	for _, req := range []kmsg.Request{apiVersionsReq(3), metadataReq(1)} {
		if n, err := c.Write(reqFrame(req, 2)); n != 0 || !errors.Is(err, errMovedCheck) {
			t.Fatalf("%T v%d after an UNSUPPORTED_VERSION answer to the v5 check: %d bytes, %v; want 0 and errMovedCheck", req, req.GetVersion(), n, err)
		}
	}
	moved.apiErr.Store(0)
	exchange(t, c, apiVersionsV5("c", 3), 2)
	exchange(t, c, metadataReq(1), 3)
}

// TestRelocateBounds: whenever the Relocator cannot tell where the node
// went, or it did not move, the dial goes to the address kgo asked for;
// dials that follow no recent close of a known node do not ask at all.
func TestRelocateBounds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		r         func(old, moved string) *fakeRelocator
		setup     func(t *testing.T, ctx context.Context, ic *Interceptor, old *fakeBroker)
		wantCalls int
	}{
		{
			name:      "seed fails",
			r:         func(_, _ string) *fakeRelocator { return &fakeRelocator{err: errors.New("seed down")} },
			wantCalls: 1,
		},
		{
			name:      "node unknown to the seed",
			r:         func(_, _ string) *fakeRelocator { return &fakeRelocator{} },
			wantCalls: 1,
		},
		{
			name:      "node did not move",
			r:         func(old, _ string) *fakeRelocator { return &fakeRelocator{to: old} },
			wantCalls: 1,
		},
		{
			name:      "seed does not answer in time",
			r:         func(_, _ string) *fakeRelocator { return &fakeRelocator{block: true} },
			wantCalls: 1,
		},
		{
			name: "node not named on the address",
			r:    func(_, moved string) *fakeRelocator { return &fakeRelocator{to: moved} },
			setup: func(t *testing.T, ctx context.Context, ic *Interceptor, old *fakeBroker) {
				c, err := ic.DialContext(ctx, "tcp", old.addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				exchange(t, c, apiVersionsReq(4), 1) // a seed's: no cluster, no node
				old.closeConns()
				_, _ = c.Read(make([]byte, 16))
			},
		},
		{
			name: "close too long ago",
			r:    func(_, moved string) *fakeRelocator { return &fakeRelocator{to: moved} },
			setup: func(t *testing.T, ctx context.Context, ic *Interceptor, old *fakeBroker) {
				knownThenClosed(t, ctx, ic, old)
				ic.reloc.mu.Lock()
				ic.reloc.addrs[old.addr()].closed -= int64(2 * ic.timing.relocateWindow)
				ic.reloc.mu.Unlock()
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			old, moved := newFakeBroker(t), newFakeBroker(t)
			r := tc.r(old.addr(), moved.addr())
			ic := newRelocating(t, r)
			if tc.setup != nil {
				tc.setup(t, ctx, ic, old)
			} else {
				knownThenClosed(t, ctx, ic, old)
			}
			before := old.accepted.Load()
			c, err := ic.DialContext(ctx, "tcp", old.addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// The Locate gets at most half of the 1s dial timeout, the
			// rest is the dial's (judged from its context, not the clock:
			// a loaded machine may take longer to get there).
			r.mu.Lock()
			allowed := r.allowed
			r.mu.Unlock()
			if allowed > 500*time.Millisecond {
				t.Fatalf("the Locate was allowed %v; at most half of the 1s dial timeout", allowed)
			}
			old.waitAccepted(t, before+1)
			if c.(*conn).moved != nil || moved.accepted.Load() != 0 {
				t.Fatal("the dial was redirected")
			}
			// kgo's ApiVersions v5 goes through as on any connection.
			exchange(t, c, apiVersionsV5("c", 3), 1)
			if n := len(r.calls()); n != tc.wantCalls {
				t.Fatalf("Locate called %d times, want %d", n, tc.wantCalls)
			}
			// A second dial in the window does not ask again.
			c2, err := ic.DialContext(ctx, "tcp", old.addr())
			if err != nil {
				t.Fatal(err)
			}
			c2.Close()
			if n := len(r.calls()); n != tc.wantCalls {
				t.Fatalf("second dial: Locate called %d times, want %d", n, tc.wantCalls)
			}
		})
	}
}

// TestAPIVersionsIDs reads the cluster and node of ApiVersions v5 bodies
// and refuses what kgo sends seeds and truncated bodies.
func TestAPIVersionsIDs(t *testing.T) {
	body := func(req kmsg.Request) []byte {
		var h reqHeader
		f := reqFrame(req, 1)
		if err := parseRequest(f, &h); err != nil {
			t.Fatal(err)
		}
		return f[h.hdrLen:]
	}
	b := body(apiVersionsV5("cluster-x", 7))
	cluster, node, ok := apiVersionsIDs(b)
	if !ok || string(cluster) != "cluster-x" || node != 7 {
		t.Fatalf("got %q %d %v", cluster, node, ok)
	}
	for n := range len(b) - 1 { // drop the tag count and more
		if _, _, ok := apiVersionsIDs(b[:n]); ok {
			t.Fatalf("a body cut to %d bytes parsed", n)
		}
	}
	seed := kmsg.NewPtrApiVersionsRequest()
	seed.Version = 5
	if _, _, ok := apiVersionsIDs(body(seed)); ok {
		t.Fatal("a request naming no cluster parsed")
	}
	noNode := apiVersionsV5("c", -1)
	if _, _, ok := apiVersionsIDs(body(noNode)); ok {
		t.Fatal("a request naming no node parsed")
	}
}

// TestRelocateTiming: the Locate after a close gets half of the dial's
// time, at most maxLocate; one Locate serves the dials that come while it
// runs and, once answered, every dial of the window; a close older than
// the window asks nothing.
func TestRelocateTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := &fakeRelocator{block: true}
		ic, err := New(Config{Store: consistency.NewMemoryStore(), Relocator: r, DialTimeout: time.Second,
			timing: timing{relocateWindow: 3 * time.Second}})
		require.NoError(t, err)
		const addr = "127.0.0.1:1"
		ic.noteNode(addr, []byte("c"), 3)
		dial := func(timeout time.Duration) time.Duration {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			start := time.Now()
			to, mv := ic.relocate(ctx, addr)
			require.Empty(t, to)
			require.Nil(t, mv)
			return time.Since(start)
		}

		require.Zero(t, dial(time.Second), "no close: no Locate")
		require.Empty(t, r.calls())

		ic.noteClose(addr)
		done := make(chan time.Duration)
		go func() { done <- dial(time.Second) }()
		synctest.Wait() // the first dial is in its Locate
		require.Equal(t, 500*time.Millisecond, dial(time.Second), "a second dial waits for the Locate under way")
		require.Equal(t, 500*time.Millisecond, <-done, "half of the dial's second")
		require.Len(t, r.calls(), 1)
		require.Zero(t, dial(time.Second), "answered since the close: not asked again")
		require.Len(t, r.calls(), 1)

		time.Sleep(2500 * time.Millisecond)
		ic.noteClose(addr)
		require.Equal(t, maxLocate, dial(4*time.Second), "half of 4s, at most maxLocate")
		require.Len(t, r.calls(), 2)

		time.Sleep(3*time.Second + time.Nanosecond)
		require.Zero(t, dial(time.Second), "a close older than the window")
		require.Len(t, r.calls(), 2)
	})
}

// TestRelocateAfterRefusedWrite: a write the broker's close refused
// (EPIPE, ECONNRESET) counts as the close a read would have seen: kgo
// dials again at once after a failed write, often before any read of the
// connection saw the close, and that dial must follow the node too. (In
// the factory's misroute test under load, such a dial went to the old
// address, which led to another cluster.)
func TestRelocateAfterRefusedWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	old, moved := newFakeBroker(t), newFakeBroker(t)
	r := &fakeRelocator{to: moved.addr()}
	ic := newRelocating(t, r)
	ic.timing.idleCheckAfter = time.Hour // no idle peek: only the write can tell

	c := dialKnownThenCut(t, ctx, ic, old)
	defer c.Close()
	// The first write after the close may still be taken by the socket;
	// the peer's reset refuses a later one.
	var werr error
	for corr := int32(2); werr == nil && corr < 100; corr++ {
		_, werr = c.Write(reqFrame(metadataReq(1), corr))
		if werr == nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if !writeRefused(werr) {
		t.Fatalf("writes after the broker's close: %v, want EPIPE or ECONNRESET", werr)
	}
	if n := len(r.calls()); n != 0 {
		t.Fatalf("the Relocator was asked %d times before any dial", n)
	}
	dialRelocated(t, ctx, ic, r, old, moved).Close()
}

// dialRelocated dials old, node 3 of cluster c, after its close: the dial
// must ask r once and reach moved.
func dialRelocated(t *testing.T, ctx context.Context, ic *Interceptor, r *fakeRelocator, old, moved *fakeBroker) net.Conn {
	t.Helper()
	c, err := ic.DialContext(ctx, "tcp", old.addr())
	if err != nil {
		t.Fatal(err)
	}
	if got := r.calls(); len(got) != 1 || got[0] != old.addr()+" c 3" {
		c.Close()
		t.Fatalf("Locate calls %q, want one for node 3 of c at %s", got, old.addr())
	}
	moved.waitAccepted(t, 1)
	return c
}
