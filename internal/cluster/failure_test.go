package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/internal/wire"
)

func TestIsAuthFailure(t *testing.T) {
	sasl := fmt.Errorf("no seed named its cluster: %w", errors.Join(
		fmt.Errorf("%w: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512", kerr.SaslAuthenticationFailed),
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
	))
	unknownCA := fmt.Errorf("wire: tls handshake with b:9093: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}})
	otherHost := fmt.Errorf("wire: tls handshake with b:9093: %w", x509.HostnameError{Host: "b"})
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"sasl among seeds":   {sasl, true},
		"mechanism":          {kerr.UnsupportedSaslMechanism, true},
		"unknown authority":  {unknownCA, true},
		"another host":       {otherHost, true},
		"broker alert":       {&net.OpError{Op: "remote error", Err: errors.New("tls: bad certificate")}, true},
		"not tls":            {fmt.Errorf("wire: tls handshake with b:9092: %w (EOF)", wire.ErrNotTLS), true},
		"non-tls answer":     {tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, true},
		"nil":                {nil, false},
		"eof":                {io.EOF, false},
		"refused":            {&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, false},
		"deadline":           {context.DeadlineExceeded, false},
		"authorization only": {kerr.TopicAuthorizationFailed, false},
	} {
		require.Equal(t, tc.want, IsAuthFailure(tc.err), name)
	}
}

// countingProbe fails with err and counts its calls.
type countingProbe struct {
	mu    sync.Mutex
	err   error
	id    string
	calls int
}

func (p *countingProbe) probe(context.Context) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return p.id, p.err
}

func (p *countingProbe) set(id string, err error) {
	p.mu.Lock()
	p.id, p.err = id, err
	p.mu.Unlock()
}

func (p *countingProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// syncBuffer is a log destination safe for the watcher's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProbeBacksOff: a check whose probes keep failing (brokers down)
// backs off exponentially instead of probing every 100ms, and logs the
// failure once, not at every attempt. On synctest's clock: the count
// depends on the backoff alone, not on how busy the machine is.
func TestProbeBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &countingProbe{err: errors.New("unable to dial: connection refused")}
		var logs syncBuffer
		w := &Watcher{Probe: p.probe, Timeout: 1500 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
		defer w.Close()
		start := time.Now()
		w.Check(false)
		w.Settle(context.Background())
		require.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "the check ended before its timeout")
		// 100ms apart for 1.5s would be 15 probes; 100, 200, 400, 800ms
		// (each jittered down to half) leave at most 6.
		require.GreaterOrEqual(t, p.count(), 3)
		require.LessOrEqual(t, p.count(), 6, "probes in 1.5s")
		require.Equal(t, 1, strings.Count(logs.String(), "connection refused"), logs.String())
		require.NoError(t, w.AuthFailure(), "brokers that are down are no authentication failure")
	})
}

// TestAuthFailureQuiet: a probe refused for its credentials ends the check
// at once, and later checks make no probe during the quiet period (a
// producer asks for one at every failed record); the failure is logged,
// reported and told to subscribers, and clears once a probe works again.
// The Failing flag is set before subscribers are told and cleared with the
// failure. On synctest's clock: a busy machine cannot stretch the quiet
// period's checks past its end (it did, in a CI clone at load 30).
func TestAuthFailureQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sasl := fmt.Errorf("%w: Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512", kerr.SaslAuthenticationFailed)
		p := &countingProbe{err: sasl}
		var logs syncBuffer
		var events, told atomic.Int32
		w := &Watcher{
			Probe:  p.probe,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			OnEvent: func(ev Event) {
				if ev.AuthFailure != nil {
					events.Add(1)
				}
			},
		}
		defer w.Close()
		var flagged atomic.Bool
		cancel := w.OnAuthFailure(func(err error) {
			if errors.Is(err, kerr.SaslAuthenticationFailed) {
				told.Add(1)
			}
			flagged.Store(w.Failing().Load())
		})
		defer cancel()
		require.False(t, w.Failing().Load(), "no failure yet")
		ctx := context.Background()
		start := time.Now()
		w.Check(false)
		w.Settle(ctx)
		require.Zero(t, time.Since(start), "the check waited to retry an authentication failure")
		require.ErrorIs(t, w.AuthFailure(), kerr.SaslAuthenticationFailed)
		// The quiet period is at least half a second: checks until just
		// before its shortest end make no probe.
		for time.Since(start) < 490*time.Millisecond {
			w.Check(false)
			w.Settle(ctx)
			require.ErrorIs(t, w.AuthFailure(), kerr.SaslAuthenticationFailed)
			time.Sleep(10 * time.Millisecond)
		}
		require.Equal(t, 1, p.count(), "probes during the quiet period")
		require.Equal(t, 1, strings.Count(logs.String(), "SASL_AUTHENTICATION_FAILED"), logs.String())
		synctest.Wait() // the watcher's goroutine has told the observer
		require.EqualValues(t, 1, events.Load())
		require.EqualValues(t, 1, told.Load())
		require.True(t, flagged.Load(), "the flag was not set when subscribers were told")
		require.True(t, w.Failing().Load())

		// The credentials are fixed on the broker: once the quiet period
		// (at most a second) is over, asking starts a check, which clears
		// the failure.
		p.set("cluster-a", nil)
		time.Sleep(time.Second - time.Since(start))
		require.Error(t, w.AuthFailure())
		w.Settle(ctx)
		require.NoError(t, w.AuthFailure())
		require.False(t, w.Failing().Load(), "the flag outlived the failure")
		require.Equal(t, "cluster-a", w.Cluster())
		require.Equal(t, 2, p.count())
	})
}

// TestAuthQuietGrows: the quiet period doubles with each failure in a row,
// up to its cap.
func TestAuthQuietGrows(t *testing.T) {
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 6: 30 * time.Second, 60: 30 * time.Second} {
		got := authQuiet(n)
		require.True(t, got >= want/2 && got <= want, "after %d failures: %v, want within [%v, %v]", n, got, want/2, want)
	}
}
