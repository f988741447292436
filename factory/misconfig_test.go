package factory

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/internal/wire"
	"github.com/kconsist/kconsist/producer"
)

// refuseSASL makes kc answer every SaslAuthenticate as Kafka answers a
// wrong password, and counts the attempts.
func refuseSASL(kc *kfake.Cluster, attempts *atomic.Int64) {
	kc.ControlKey(36, func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		attempts.Add(1)
		r := req.(*kmsg.SASLAuthenticateRequest)
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.Version = r.Version
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
}

// lineCounter counts log lines that contain a text.
type lineCounter struct {
	text string
	n    atomic.Int64
}

func (l *lineCounter) Write(p []byte) (int, error) {
	l.n.Add(int64(strings.Count(string(p), l.text)))
	return len(p), nil
}

// TestWrongPasswordFailsFast: with a password the cluster refuses,
// Produce and Poll return SASL_AUTHENTICATION_FAILED within a few seconds
// (franz-go alone waits for the caller's deadline), a second Produce fails
// at once, the failure is logged and reported once, and the factory's
// background check does not hammer the broker.
func TestWrongPasswordFailsFast(t *testing.T) {
	kc := newKfake(t, kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "u", "p"), kfake.SeedTopics(1, "t"))
	var attempts atomic.Int64
	refuseSASL(kc, &attempts)
	checkLogs := &lineCounter{text: "cluster check"}
	var reported atomic.Int64
	f, err := New(BootstrapServers(kc.ListenAddrs()...), SASL(ScramSHA256, "u", "wrong"),
		Logger(slog.New(slog.NewTextHandler(checkLogs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		WithObserver(ObserverFunc(func(ev Event) {
			if ev.Kind == EventAuthFailed && errors.Is(ev.Err, kerr.SaslAuthenticationFailed) {
				reported.Add(1)
			}
		})))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	start := time.Now()

	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "v"})
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	var perr *kconsist.AuthError
	require.ErrorAs(t, err, &perr)
	require.Less(t, time.Since(t0), 5*time.Second, "Produce")

	// While the failure holds, records fail without reaching the client.
	t0 = time.Now()
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "v"})
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	require.Less(t, time.Since(t0), 100*time.Millisecond, "second Produce")
	errc := make(chan error, 1)
	require.NoError(t, p.ProduceAsync(ctx, producer.Record[string, string]{Topic: "t", Value: "v"},
		func(_ producer.Result, err error) { errc <- err }))
	require.Zero(t, p.Kgo().BufferedProduceRecords(), "an async record reached the client while the failure holds")
	require.ErrorIs(t, <-errc, kerr.SaslAuthenticationFailed)

	c, err := NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"))
	require.NoError(t, err)
	defer c.Close(context.Background())
	t0 = time.Now()
	_, err = c.Poll(ctx, 10)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	require.Less(t, time.Since(t0), 5*time.Second, "Poll")

	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	_, err = adm.ListTopics(ctx)
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)

	// A fixed window from the factory's start: the background check
	// alone used to probe every 100ms, some 30 attempts in 3s. Now three
	// clients retry at the Java client's pace (50ms doubling to 1s, as
	// reconnect.backoff.ms and reconnect.backoff.max.ms) and the check
	// goes quiet after the first failure.
	time.Sleep(time.Until(start.Add(3 * time.Second)))
	require.LessOrEqual(t, attempts.Load(), int64(20), "SASL attempts in 3s")
	require.EqualValues(t, 1, reported.Load(), "EventAuthFailed")
	require.EqualValues(t, 1, checkLogs.n.Load(), "the background check's log lines")
	t.Logf("%d SASL attempts in 3s", attempts.Load())
}

// TestUntrustedCAFailsFast: a broker whose certificate no trusted CA
// signed fails Produce with the x509 error within a few seconds.
func TestUntrustedCAFailsFast(t *testing.T) {
	cert, _ := testkit.SelfSigned(t)
	kc := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	// A pool without the broker's CA.
	f, err := New(BootstrapServers(kc.ListenAddrs()...), TLS(&tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	t0 := time.Now()
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "v"})
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)
	require.Less(t, time.Since(t0), 5*time.Second)
}

// TestTLSToPlaintextFailsFast: a TLS client pointed at a plaintext port
// fails as fast as plain franz-go does, with an error that says so; it
// used to be retried three times under AlwaysRetryEOF (1.85s).
func TestTLSToPlaintextFailsFast(t *testing.T) {
	f, err := New(BootstrapServers(plaintextPort(t)), SecurityProtocol(SSL))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	t0 := time.Now()
	_, err = adm.ListTopics(testkit.Ctx(t))
	require.ErrorIs(t, err, wire.ErrNotTLS)
	require.Less(t, time.Since(t0), 500*time.Millisecond)
}

// plaintextPort listens on loopback as a plaintext Kafka listener meets a
// ClientHello: it reads a size, finds it impossible and closes.
func plaintextPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			// Read what came, so that the close is a FIN, not a reset.
			buf := make([]byte, 64<<10)
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			for n, err := c.Read(buf); n > 0 && err == nil; n, err = c.Read(buf) {
				_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			}
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// TestAuthWatchOnlyForBaseSecurity: the background check probes with the
// factory's own settings, so its verdict applies only to clients that use
// them: a client with other credentials or bootstrap servers is not failed
// for the factory's wrong password.
func TestAuthWatchOnlyForBaseSecurity(t *testing.T) {
	f, err := New(BootstrapServers("127.0.0.1:1"), SASL(ScramSHA256, "u", "wrong"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	client := func(opts ...Opt) config {
		cfg := f.base.clone()
		for _, o := range opts {
			o.apply(&cfg)
		}
		return cfg
	}
	require.True(t, f.sameSecurity(client()))
	require.True(t, f.sameSecurity(client(ClientID("other"), RequiredAcks(LeaderAck))))
	require.False(t, f.sameSecurity(client(SASL(ScramSHA256, "u", "right"))))
	require.False(t, f.sameSecurity(client(BootstrapServers("127.0.0.1:2"))))
	require.False(t, f.sameSecurity(client(SecurityProtocol(SASLSSL))))
}
