package wire

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
)

// holdingBroker is the far end of a net.Pipe: it reads requests and
// answers only those answer lets through, with an empty body and a
// flexible header carrying cluster c at applied.
func holdingBroker(peer net.Conn, answer func(corr int32) bool, applied int64) {
	for {
		f, err := readFrame(peer)
		if err != nil {
			return
		}
		var h reqHeader
		if parseRequest(append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...), &h) != nil {
			return
		}
		if answer(h.corr) {
			if writeFrame(peer, respFrame(h.corr, stateTags("c", applied), nil)[4:]) != nil {
				return
			}
		}
	}
}

// TestHeldRequestHeals: a request carrying a token that its broker holds
// (a KIP-1243 broker holds it up to its WaitMax, 5 s or more) has the
// store checked once it has been unanswered for healAfter, with nobody
// reading the connection (the caller gave up); once the store was
// lowered, the connection fails with a *HeldError at the next look, so
// that kgo sends the request again with the healed token. A request
// answered in time, and a store the cluster's last report covers, cost no
// check.
func TestHeldRequestHeals(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{committed: consistency.MustOf("c", 40)}
		store := knownStore(t, "c", 30)
		owner, healed := healLog(store)
		h := NewHealer(HealerConfig{Tokens: owner, Oracle: o})
		defer h.Close()
		i, err := New(Config{Tokens: owner, Healer: h})
		require.NoError(t, err)

		// Answered within 10ms: nothing is asked.
		client, peer := net.Pipe()
		go holdingBroker(peer, func(int32) bool { time.Sleep(10 * time.Millisecond); return true }, 30)
		c := i.Wrap(client, "127.0.0.1:9092")
		go io.Copy(io.Discard, c)
		_, err = c.Write(reqFrame(metadataReq(12), 1))
		require.NoError(t, err)
		time.Sleep(2 * healAfter)
		synctest.Wait()
		require.Zero(t, o.quorum.Load(), "an answered request is not held")

		// Held, the store unchecked yet: one check, which finds it sound.
		client2, peer2 := net.Pipe()
		go holdingBroker(peer2, func(corr int32) bool { return corr != 2 }, 30)
		c2 := i.Wrap(client2, "127.0.0.1:9093")
		_, err = c2.Write(reqFrame(metadataReq(12), 2))
		require.NoError(t, err)
		time.Sleep(healAfter - time.Nanosecond)
		synctest.Wait()
		require.Zero(t, o.quorum.Load(), "asked before healAfter")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.EqualValues(t, 1, o.quorum.Load())
		require.Empty(t, healed.get())
		time.Sleep(coveredHeld - healAfter)
		synctest.Wait()
		require.EqualValues(t, 1, o.quorum.Load(), "a store the last report covers is not checked again at once")
		require.False(t, c2.(*conn).dead.Load(), "a sound token's request stays")
		// Held coveredHeld for a covered token: checked once more (a log
		// restored under the same cluster id would never reach it).
		time.Sleep(healAfter)
		synctest.Wait()
		require.EqualValues(t, 2, o.quorum.Load(), "a covered token held coveredHeld is checked")
		require.Empty(t, healed.get())
		c2.Close()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.EqualValues(t, 2, o.quorum.Load(), "a closed connection's request asks nothing")

		// Poisoned: the next held request has it checked and lowered,
		// and its connection fails at the next look, unread.
		_, err = store.Advance(consistency.MustOf("c", 9_000))
		require.NoError(t, err)
		client3, peer3 := net.Pipe()
		go holdingBroker(peer3, func(int32) bool { return false }, 30)
		c3 := i.Wrap(client3, "127.0.0.1:9094")
		_, err = c3.Write(reqFrame(metadataReq(12), 3))
		require.NoError(t, err)
		time.Sleep(healAfter)
		synctest.Wait()
		require.EqualValues(t, 3, o.quorum.Load())
		require.Equal(t, [][2]consistency.Token{{consistency.MustOf("c", 9_000), consistency.MustOf("c", 40)}}, healed.get())
		require.False(t, c3.(*conn).dead.Load())
		time.Sleep(healAfter)
		synctest.Wait()
		require.True(t, c3.(*conn).dead.Load(), "the connection under the withdrawn token is failed")
		_, err = c3.Read(make([]byte, 64))
		var he *HeldError
		require.True(t, errors.As(err, &he), "%v", err)
		require.Equal(t, consistency.MustOf("c", 9_000), he.Sent)
		require.Equal(t, consistency.MustOf("c", 40), he.Now)
		require.EqualValues(t, kmsg.Metadata, he.APIKey)
		require.True(t, he.Temporary())

		c.Close()
		peer.Close()
		peer2.Close()
		peer3.Close()
	})
}

// TestHealerReplacesForeignToken: a store holding a token of another
// cluster than the bootstrap servers' is replaced by their committed
// offset only when Replace allows it (not pinned, no cluster change).
func TestHealerReplacesForeignToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, allow := range []bool{false, true} {
			o := &scriptedOracle{committed: consistency.MustOf("c", 40)}
			store := knownStore(t, "other", 9_000)
			var asked []string
			owner, heals := healLog(store)
			h := NewHealer(HealerConfig{Tokens: owner, Oracle: o,
				Replace: func(cluster string) bool { asked = append(asked, cluster); return allow }})
			h.Held()
			synctest.Wait()
			h.Close()
			require.Equal(t, []string{"c"}, asked)
			if allow {
				require.Len(t, heals.get(), 1)
				require.Equal(t, consistency.MustOf("c", 40), store.Load())
			} else {
				require.Empty(t, heals.get())
				require.Equal(t, consistency.MustOf("other", 9_000), store.Load())
			}
		}
	})
}

// TestLargeHeldAnswerNotKept: a connection keeps no buffer of a large
// held answer once kgo has read it (a 4 MiB Metadata answer to a pinned
// client must not stay 4 MiB per connection); a small one is reused.
func TestLargeHeldAnswerNotKept(t *testing.T) {
	for _, size := range []int{1 << 10, 4 << 20} {
		c, m, _ := newTestConn(t, consistency.NewMemoryStore(), func(cfg *Config) {
			cfg.ExpectedCluster = func() string { return "c" }
		})
		if _, err := c.Write(reqFrame(metadataReq(12), 1)); err != nil {
			t.Fatal(err)
		}
		m.in = respFrame(1, []byte{0}, make([]byte, size))
		got, err := readAll(c, 64<<10)
		require.ErrorIs(t, err, io.EOF)
		require.Len(t, got, len(respFrame(1, []byte{0}, make([]byte, size))))
		if size > maxKeptHold {
			require.Zero(t, cap(c.r.hold), "a %d-byte held answer is kept", size)
		} else {
			require.GreaterOrEqual(t, cap(c.r.hold), size, "a small buffer is reused")
		}
	}
}

// TestHeldWatchAllocatesNothing: a watched request costs no allocation,
// whether the token moved since the last one or not: a connection with
// the watch allocates what one without it does (the store's advance).
func TestHeldWatchAllocatesNothing(t *testing.T) {
	allocs := func(watched bool) float64 {
		store := knownStore(t, "c", 1)
		h := NewHealer(HealerConfig{Store: store, Oracle: &scriptedOracle{committed: consistency.MustOf("c", 1)}})
		defer h.Close()
		c, _, _ := newTestConn(t, store, func(cfg *Config) {
			if watched {
				cfg.Healer = h
			}
		})
		frame := reqFrame(metadataReq(12), 1)
		off := int64(1)
		return testing.AllocsPerRun(200, func() {
			c.w.lastWrite = time.Now().UnixNano() // no idle peek
			c.q.pop()                             // as if answered
			c.noteAnswered()
			off++
			if _, err := store.Advance(consistency.MustOf("c", off)); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Write(frame); err != nil {
				t.Fatal(err)
			}
		})
	}
	base, watched := allocs(false), allocs(true)
	require.Equal(t, base, watched, "allocations per request: %v without the watch, %v with it", base, watched)
}

// TestHeldTokenFromAnswersAsksNothing: a native client's token was learnt
// from a broker's answer, so its cluster committed it; a request carrying
// it that another broker holds for a moment (it applies the write a
// little later) asks the cluster nothing, until such requests were held
// coveredHeld in all. A token beyond what the answers showed is checked
// at healAfter.
func TestHeldTokenFromAnswersAsksNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := &scriptedOracle{committed: consistency.MustOf("c", 50)}
		store := knownStore(t, "c", 1)
		owner := tokens.New(store, nil) // one owner, as a session has
		h := NewHealer(HealerConfig{Tokens: owner, Oracle: o})
		defer h.Close()
		i, err := New(Config{Tokens: owner, Healer: h})
		require.NoError(t, err)

		// A broker answers at applied 50: the store learns 50.
		client, peer := net.Pipe()
		go holdingBroker(peer, func(int32) bool { return true }, 50)
		c := i.Wrap(client, "127.0.0.1:9092")
		defer func() { c.Close(); peer.Close() }()
		_, err = c.Write(reqFrame(metadataReq(12), 1))
		require.NoError(t, err)
		_, err = c.Read(make([]byte, 64))
		require.NoError(t, err)
		require.Equal(t, consistency.MustOf("c", 50), store.Load())

		// Another broker holds a request carrying 50.
		client2, peer2 := net.Pipe()
		go holdingBroker(peer2, func(int32) bool { return false }, 49)
		c2 := i.Wrap(client2, "127.0.0.1:9093")
		defer peer2.Close()
		_, err = c2.Write(reqFrame(metadataReq(12), 2))
		require.NoError(t, err)
		time.Sleep(coveredHeld - healAfter)
		synctest.Wait()
		require.Zero(t, o.quorum.Load(), "a token a broker answered with is checked while another broker catches up")
		time.Sleep(healAfter)
		synctest.Wait()
		require.EqualValues(t, 1, o.quorum.Load(), "held coveredHeld in all")
		c2.Close()

		// A token beyond the answers: checked at healAfter.
		_, err = store.Advance(consistency.MustOf("c", 60))
		require.NoError(t, err)
		time.Sleep(time.Second) // past the Healer's Every
		client3, peer3 := net.Pipe()
		go holdingBroker(peer3, func(int32) bool { return false }, 50)
		c3 := i.Wrap(client3, "127.0.0.1:9094")
		defer func() { c3.Close(); peer3.Close() }()
		_, err = c3.Write(reqFrame(metadataReq(12), 3))
		require.NoError(t, err)
		time.Sleep(healAfter)
		synctest.Wait()
		require.EqualValues(t, 2, o.quorum.Load())
	})
}
