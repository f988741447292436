package realkafka

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"golang.org/x/sync/errgroup"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// The broker's SCRAM user, and how often it makes clients re-authenticate.
var alice = kafkatest.SASLUser{Name: "alice", Password: "alice-secret-7"}

const reauthEvery = 3 * time.Second

// TestMisconfig runs one Kafka 4.4 node with a SASL_SSL listener (PEM
// keystore from a test CA, SCRAM users written at format time, sessions
// of 3s) and, against it:
//   - GoodPath: a factory over SCRAM-SHA-512 moves records through
//     several forced re-authentications without losing one; PLAIN and
//     SCRAM-SHA-256 log in too.
//   - Refused: a wrong password, an untrusted CA and a certificate for
//     another host, each for a factory and for plain franz-go at once,
//     each through its own forwarder that counts the connections made.
//     The factory must fail Produce, Poll and an admin call with the
//     cause within a few seconds, and reach the broker not much more
//     often than franz-go does in the same window.
func TestMisconfig(t *testing.T) {
	t0 := time.Now()
	c := kafkatest.Start(t, kafkatest.SASLSSL(alice), kafkatest.ReauthInterval(reauthEvery))
	t.Logf("SASL_SSL cluster %s ready in %v", c.ClusterID(), time.Since(t0).Round(time.Millisecond))
	t.Run("GoodPath", func(t *testing.T) { testReauthGoodPath(t, c) })
	t.Run("Refused", func(t *testing.T) { testRefused(t, c) })
}

// testReauthGoodPath produces n records over more than two session
// lifetimes while a consumer reads them, so both re-authenticate while
// working, and checks that each record is read exactly once.
func testReauthGoodPath(t *testing.T, c *kafkatest.Cluster) {
	ctx := testkit.CtxFor(t, time.Minute)
	const topic, batches, perBatch = "reauth", 32, 100
	const n = batches * perBatch
	logs := &logTally{level: slog.LevelDebug}
	ev := &events{}
	f, err := factory.New(factory.BootstrapServers(c.SecureAddrs()...), factory.TLS(c.TLSConfig()),
		factory.SASL(factory.ScramSHA512, alice.Name, alice.Password), factory.ClientID("misconfig-good"),
		factory.AutoOffsetReset(factory.ResetEarliest), factory.Logger(slog.New(logs)), factory.WithObserver(ev))
	require.NoError(t, err)
	defer f.Close(context.Background())
	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	created, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, created.Err)

	cons, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(topic))
	require.NoError(t, err)
	defer cons.Close(context.Background())
	seen := make(map[string]int, n)
	var g errgroup.Group
	g.Go(func() error {
		for len(seen) < n {
			recs, err := cons.Poll(ctx, 0)
			if err != nil {
				return fmt.Errorf("poll after %d of %d records: %w", len(seen), n, err)
			}
			for _, r := range recs {
				seen[r.Value]++
			}
		}
		return nil
	})

	p, err := factory.NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer closeProducer(p)
	// Paced over about 8s: more than two 3s sessions for every connection.
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for b := range batches {
		recs := make([]producer.Record[string, string], perBatch)
		for i := range recs {
			recs[i] = producer.Record[string, string]{Topic: topic, Value: fmt.Sprintf("v%05d", b*perBatch+i)}
		}
		res, err := p.ProduceSync(ctx, recs...)
		require.NoError(t, err, "batch %d", b)
		require.NoError(t, res.FirstErr(), "batch %d", b)
		<-tick.C
	}
	require.NoError(t, g.Wait())
	require.Len(t, seen, n, "every record read")
	for v, k := range seen {
		require.Equal(t, 1, k, "record %s read %d times", v, k)
	}
	reauths := logs.count("sasl expiry limit reached")
	t.Logf("%d records through SASL_SSL/SCRAM-SHA-512 in %v with %d re-authentications, 0 lost, 0 duplicated",
		n, time.Since(start).Round(time.Millisecond), reauths)
	require.GreaterOrEqual(t, reauths, 4, "the producer's and the consumer's connections each re-authenticated at least twice")
	require.Zero(t, ev.kinds()[factory.EventAuthFailed])

	// The other mechanisms the listener offers.
	for _, mech := range []factory.Mechanism{factory.Plain, factory.ScramSHA256} {
		f, err := factory.New(factory.BootstrapServers(c.SecureAddrs()...), factory.TLS(c.TLSConfig()),
			factory.SASL(mech, alice.Name, alice.Password))
		require.NoError(t, err)
		adm, err := f.Admin()
		require.NoError(t, err)
		topics, err := adm.ListTopics(ctx, topic)
		require.NoError(t, err, mech)
		require.True(t, topics.Has(topic), mech)
		adm.Close(context.Background())
		f.Close(context.Background())
	}
}

// misconfig is one way to get the security settings wrong.
type misconfig struct {
	name     string
	host     string // what the client dials the listener as
	tls      *tls.Config
	password string
	cause    func(error) bool // whether an error carries the cause
}

// refusal is what one client of one misconfig saw.
type refusal struct {
	err     error         // the first error the user saw
	after   time.Duration // how long that took
	conns   uint64        // connections made in the window
	later   int           // further Produce calls in the window
	laterOK bool          // each failed at once with the cause
	logs    int           // warn and error log lines in the window
	checks  int           // the factory's "cluster check" log lines
}

// refusalWindow is how long each client is watched. The factory's quiet
// period after an auth failure starts at 1s and doubles, so 12s spans
// several of its back-offs.
const refusalWindow = 12 * time.Second

// extraConnsAllowed bounds how many more connections than plain franz-go a
// refused factory may make in refusalWindow: two a second. The factory's
// clients retry at the Java client's pace (retry.backoff.ms 100ms doubling
// to 1s, MetadataMinAge 250ms), about one attempt a second once backed
// off, where franz-go alone waits its 5s MetadataMinAge; the background
// check adds about 5 in 12s (a quiet period of 1s, doubling, jittered down
// to half). Measured on a loaded 2-core machine: 10 to 19 in 12s against
// franz-go's 3. The fixed 100ms probe retry this replaces made about 9 a
// second, some 110 in the window, four times over the bound.
const extraConnsAllowed = 2 * uint64(refusalWindow/time.Second)

func testRefused(t *testing.T, c *kafkatest.Cluster) {
	listener, err := c.SecureListenerAddr(1)
	require.NoError(t, err)
	cases := []misconfig{
		{name: "WrongPassword", host: kafkatest.SecureHost, tls: c.TLSConfig(), password: "not-" + alice.Password,
			cause: func(err error) bool { return errors.Is(err, kerr.SaslAuthenticationFailed) }},
		{name: "UntrustedCA", host: kafkatest.SecureHost, tls: otherCA(t), password: alice.Password,
			cause: func(err error) bool { _, ok := errors.AsType[x509.UnknownAuthorityError](err); return ok }},
		{name: "OtherHost", host: "127.0.0.1", tls: c.TLSConfig(), password: alice.Password,
			cause: func(err error) bool { _, ok := errors.AsType[x509.HostnameError](err); return ok }},
	}
	logBefore := failedAuthLines(t, c)
	type result struct{ sdk, kgo refusal }
	results := make([]result, len(cases))
	var accepted atomic.Uint64
	var g errgroup.Group
	for i, mc := range cases {
		g.Go(func() error {
			r, n, err := refuseFactory(mc, listener)
			results[i].sdk = r
			accepted.Add(n)
			return err
		})
		g.Go(func() error {
			r, n, err := refuseKgo(mc, listener)
			results[i].kgo = r
			accepted.Add(n)
			return err
		})
	}
	require.NoError(t, g.Wait())
	brokerLines := failedAuthLines(t, c) - logBefore

	for i, mc := range cases {
		sdk, plain := results[i].sdk, results[i].kgo
		t.Run(mc.name, func(t *testing.T) {
			t.Logf("factory: %v after %v; %d connections in %v (%d later Produce calls, each refused at once: %v); %d warn/error log lines, %d from the cluster check",
				sdk.err, sdk.after.Round(time.Millisecond), sdk.conns, refusalWindow, sdk.later, sdk.laterOK, sdk.logs, sdk.checks)
			t.Logf("franz-go: %v after %v; %d connections in %v; %d warn/error log lines",
				plain.err, plain.after.Round(time.Millisecond), plain.conns, refusalWindow, plain.logs)
			require.True(t, mc.cause(sdk.err), "Produce returns the cause: %v", sdk.err)
			var aerr *kconsist.AuthError
			require.ErrorAs(t, sdk.err, &aerr)
			require.Less(t, sdk.after, 5*time.Second, "Produce fails within a few seconds")
			require.True(t, sdk.laterOK, "records produced while the failure holds fail at once with it")
			require.Equal(t, 1, sdk.checks, "the cluster check logs the failure once")
			require.LessOrEqual(t, sdk.conns, plain.conns+extraConnsAllowed, "connections reaching the broker, factory vs franz-go")
		})
	}
	t.Logf("broker: %d 'Failed authentication' lines, %d connections accepted by the forwarders", brokerLines, accepted.Load())
	require.Positive(t, brokerLines, "the attempts reached the broker")
	require.LessOrEqual(t, uint64(brokerLines), accepted.Load(), "at most one broker line per connection")
}

// refuseFactory runs mc with a factory for refusalWindow: one Produce
// that must fail with the cause, then one a second as a retrying
// application would make, then (outside the window) a Poll and an admin
// call.
func refuseFactory(mc misconfig, listener string) (refusal, uint64, error) {
	var r refusal
	fwd, err := kafkatest.NewStreamForwarder(listener)
	if err != nil {
		return r, 0, err
	}
	defer fwd.Close()
	logs := &logTally{level: slog.LevelInfo}
	f, err := factory.New(factory.BootstrapServers(clientAddr(mc.host, fwd)), factory.TLS(mc.tls),
		factory.SASL(factory.ScramSHA512, alice.Name, mc.password), factory.ClientID("misconfig-"+mc.name),
		factory.Logger(slog.New(logs)))
	if err != nil {
		return r, 0, err
	}
	defer f.Close(context.Background())
	start := time.Now()
	end := start.Add(refusalWindow)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	if err != nil {
		return r, 0, err
	}
	defer closeProducer(p)
	rec := producer.Record[string, string]{Topic: "misconfig", Value: "v"}
	t0 := time.Now()
	_, r.err = p.Produce(ctx, rec)
	r.after = time.Since(t0)

	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	r.laterOK = true
	for time.Until(end) > time.Second {
		<-tick.C
		t0 := time.Now()
		_, err := p.Produce(ctx, rec)
		r.later++
		if !mc.cause(err) || time.Since(t0) > 100*time.Millisecond {
			r.laterOK = false
		}
	}
	time.Sleep(time.Until(end)) // the window is fixed, for a fair count
	r.conns = fwd.Accepted()
	r.logs, r.checks = logs.warnings(), logs.count("cluster check")

	// Outside the window: a consumer and an admin client fail with the
	// cause as well.
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	cons, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics("misconfig"))
	if err != nil {
		return r, 0, err
	}
	defer cons.Close(context.Background())
	t0 = time.Now()
	if _, err := cons.Poll(cctx, 10); !mc.cause(err) || time.Since(t0) > 5*time.Second {
		return r, 0, fmt.Errorf("%s: Poll returned %v after %v, want the cause within 5s", mc.name, err, time.Since(t0))
	}
	adm, err := f.Admin()
	if err != nil {
		return r, 0, err
	}
	defer adm.Close(context.Background())
	t0 = time.Now()
	if _, err := adm.ListTopics(cctx); !mc.cause(err) || time.Since(t0) > 5*time.Second {
		return r, 0, fmt.Errorf("%s: ListTopics returned %v after %v, want the cause within 5s", mc.name, err, time.Since(t0))
	}
	return r, fwd.Accepted(), nil
}

// refuseKgo runs mc with plain franz-go for refusalWindow: one
// ProduceSync that waits for as long as the window lasts.
func refuseKgo(mc misconfig, listener string) (refusal, uint64, error) {
	var r refusal
	fwd, err := kafkatest.NewStreamForwarder(listener)
	if err != nil {
		return r, 0, err
	}
	defer fwd.Close()
	logs := &kgoTally{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(clientAddr(mc.host, fwd)), kgo.DialTLSConfig(mc.tls),
		kgo.SASL(scram.Auth{User: alice.Name, Pass: mc.password}.AsSha512Mechanism()),
		kgo.ClientID("misconfig-kgo-"+mc.name), kgo.WithLogger(logs))
	if err != nil {
		return r, 0, err
	}
	defer cl.Close()
	end := time.Now().Add(refusalWindow)
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	t0 := time.Now()
	r.err = cl.ProduceSync(ctx, &kgo.Record{Topic: "misconfig", Value: []byte("v")}).FirstErr()
	r.after = time.Since(t0)
	time.Sleep(time.Until(end))
	r.conns = fwd.Accepted()
	r.logs = int(logs.n.Load())
	return r, r.conns, nil
}

// clientAddr is the forwarder's address as host would name it.
func clientAddr(host string, fwd *kafkatest.Forwarder) string {
	_, port, _ := net.SplitHostPort(fwd.Addr())
	return net.JoinHostPort(host, port)
}

// failedAuthLines counts the lines in which the broker logged a failed
// authentication (SASL or TLS).
func failedAuthLines(t *testing.T, c *kafkatest.Cluster) int {
	t.Helper()
	logs, err := c.Logs(1)
	require.NoError(t, err)
	return strings.Count(logs, "Failed authentication with")
}

// otherCA trusts only a CA that did not sign the cluster's certificate.
func otherCA(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// logTally is a slog handler that counts messages, never formatting them.
type logTally struct {
	level slog.Level
	mu    sync.Mutex
	msgs  map[string]int // by message, every level from level up
	warns int            // warn and above
}

func (l *logTally) Enabled(_ context.Context, lv slog.Level) bool { return lv >= l.level }
func (l *logTally) WithAttrs([]slog.Attr) slog.Handler            { return l }
func (l *logTally) WithGroup(string) slog.Handler                 { return l }
func (l *logTally) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.msgs == nil {
		l.msgs = map[string]int{}
	}
	l.msgs[r.Message]++
	if r.Level >= slog.LevelWarn {
		l.warns++
	}
	return nil
}

// count returns how many messages contained text.
func (l *logTally) count(text string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for m, k := range l.msgs {
		if strings.Contains(m, text) {
			n += k
		}
	}
	return n
}

func (l *logTally) warnings() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.warns
}

// kgoTally counts franz-go's warn and error lines.
type kgoTally struct{ n atomic.Int64 }

func (k *kgoTally) Level() kgo.LogLevel              { return kgo.LogLevelWarn }
func (k *kgoTally) Log(kgo.LogLevel, string, ...any) { k.n.Add(1) }
