package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// answerAPIVersions has kgo's ApiVersions request on c answered with code,
// and reads the answer through c, as kgo would.
func answerAPIVersions(t *testing.T, c *conn, m *memConn, code int16) {
	t.Helper()
	sendRequests(t, c, apiVersionsReq(5))
	r := kmsg.NewPtrApiVersionsResponse()
	r.Version = 5
	r.ErrorCode = code
	m.in = respFrame(0, nil, r.AppendTo(nil))
	_, err := readAll(c, 4096)
	require.ErrorIs(t, err, io.EOF)
}

// TestRefusedAddressIsPaced: after an address answers REBOOTSTRAP_REQUIRED
// (or an older broker's INCONSISTENT_CLUSTER_ID), the next dial to it waits
// out a pause that doubles with each refusal in a row, up to the maximum;
// other addresses are dialled at once, a dial whose context ends during
// the pause fails with the cause, and an answer without a refusal ends the
// pacing.
func TestRefusedAddressIsPaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const addr = "127.0.0.1:9092" // newTestConn's
		var dials []time.Time
		_, _, ic := newTestConn(t, consistency.NewMemoryStore(), func(cfg *Config) {
			cfg.timing = timing{refusedPauseMin: 40 * time.Millisecond, refusedPauseMax: 160 * time.Millisecond}
			cfg.Dial = func(context.Context, string, string) (net.Conn, error) {
				dials = append(dials, time.Now())
				return &memConn{}, nil
			}
		})
		refuse := func(code int16) {
			m := &memConn{}
			answerAPIVersions(t, ic.Wrap(m, addr).(*conn), m, code)
		}
		dial := func(ctx context.Context, a string) (time.Duration, error) {
			t0 := time.Now()
			c, err := ic.DialContext(ctx, "tcp", a)
			if c != nil {
				c.Close()
			}
			return time.Since(t0), err
		}
		ctx := context.Background()

		d, err := dial(ctx, addr)
		require.NoError(t, err)
		require.Zero(t, d, "no refusal yet: no pause")

		// Pauses after refusals 1..4: 80% of 40, 80, 160, 160 ms.
		for n, want := range []time.Duration{40, 80, 160, 160} {
			want *= time.Millisecond
			refuse([]int16{129, 104}[n%2])
			d, err := dial(ctx, addr)
			require.NoError(t, err)
			require.Equal(t, want*8/10, d, "refusal %d", n+1)
			other, err := dial(ctx, "127.0.0.1:9093")
			require.NoError(t, err)
			require.Zero(t, other, "another address is not paced")
		}

		refuse(129)
		short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		n := len(dials)
		d, err = dial(short, addr)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Contains(t, err.Error(), "REBOOTSTRAP_REQUIRED")
		require.Equal(t, 10*time.Millisecond, d, "the dial ends with its context")
		require.Equal(t, n, len(dials), "nothing dialled")

		refuse(0) // the address answers for the right cluster again
		d, err = dial(ctx, addr)
		require.NoError(t, err)
		require.Zero(t, d, "no pause once the address accepted the client")
		require.Zero(t, ic.refused.count.Load())

		// Other answers (UNSUPPORTED_VERSION) neither start nor end pacing.
		refuse(35)
		require.Zero(t, ic.refused.count.Load())
		refuse(129)
		refuse(35)
		require.Equal(t, int32(1), ic.refused.count.Load())
	})
}

// TestRefusedPause: the pause is 80% of the producer's default backoff
// for the same step, the shortest wait that backoff's jitter gives: it
// doubles from the minimum and stops at the maximum.
func TestRefusedPause(t *testing.T) {
	pause := func(n int) time.Duration { return refusedPause(n, defaultRefusedPauseMin, defaultRefusedPauseMax) }
	for n := 1; n < 70; n++ {
		want := defaultRefusedPauseMax
		if n < 16 {
			want = min(defaultRefusedPauseMin<<(n-1), defaultRefusedPauseMax)
		}
		require.Equal(t, want*8/10, pause(n), "n=%d", n)
	}
	require.Equal(t, 80*time.Millisecond, pause(1))
	require.Equal(t, 800*time.Millisecond, pause(5))
	require.Equal(t, 800*time.Millisecond, pause(6))
}

// TestRefusedTableBounded: the table holds at most maxRefusedAddrs
// addresses; beyond them, dials are not paced, until addresses quiet for
// refusedForget make room. A dial to a quiet address forgets it.
func TestRefusedTableBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ic, err := New(Config{Store: consistency.NewMemoryStore(), timing: timing{refusedForget: time.Minute}, Dial: func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("no dial")
		}})
		require.NoError(t, err)
		addr := func(k int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k)) }
		for k := range maxRefusedAddrs + 10 {
			ic.noteRefused(addr(k))
		}
		require.Equal(t, int32(maxRefusedAddrs), ic.refused.count.Load())
		require.Len(t, ic.refused.m, maxRefusedAddrs)
		require.NotContains(t, ic.refused.m, addr(maxRefusedAddrs))

		time.Sleep(time.Minute)
		ic.noteRefused(addr(maxRefusedAddrs))
		require.Len(t, ic.refused.m, maxRefusedAddrs, "refusedForget not passed yet: no room")
		time.Sleep(time.Nanosecond)
		ic.noteRefused(addr(maxRefusedAddrs)) // the quiet ones make room
		require.Equal(t, int32(1), ic.refused.count.Load())
		require.Contains(t, ic.refused.m, addr(maxRefusedAddrs))

		time.Sleep(time.Minute + time.Nanosecond)
		require.NoError(t, ic.paceRefused(context.Background(), addr(maxRefusedAddrs)))
		require.Zero(t, ic.refused.count.Load(), "a dial to a quiet address forgets it")
		require.Empty(t, ic.refused.m)
	})
}
