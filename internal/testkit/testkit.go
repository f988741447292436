// Package testkit holds the helpers the module's tests share, so that
// each exists once: a bounded context, a condition wait, a self-signed
// certificate and a partition's end offset. It is imported by tests only.
package testkit

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"log/slog"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultTimeout bounds Ctx: long enough for a loaded CI machine, short
// enough that a hang fails the test rather than the whole run.
const DefaultTimeout = 30 * time.Second

// Ctx returns a context that ends after DefaultTimeout or when t ends.
func Ctx(t testing.TB) context.Context { return CtxFor(t, DefaultTimeout) }

// CtxFor returns a context that ends after d or when t ends.
func CtxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// WaitFor polls cond until it holds, and fails t naming what it waited for
// if ctx ends first. It bounds nothing by the wall clock itself: the bound
// is ctx's.
func WaitFor(ctx context.Context, t testing.TB, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}

// SelfSigned returns a certificate for 127.0.0.1, ::1 and the given host
// names, signed by itself, and a pool that trusts it.
func SelfSigned(t testing.TB, hosts ...string) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kconsist test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              hosts,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// EndOffset returns the end offset of partition 0 of topic, asked of the
// cluster at addr by a plain franz-go client.
func EndOffset(ctx context.Context, t testing.TB, addr, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil {
		t.Fatalf("end offset of %s[0]: found %v, %v", topic, ok, o.Err)
	}
	return o.Offset
}

// Warnings is a slog.Handler that keeps the messages logged at Warn or
// above, with their attributes, for tests that count a program's
// warnings (slog.New(w) makes the logger).
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// Enabled is true for every level: the handler filters in Handle.
func (w *Warnings) Enabled(context.Context, slog.Level) bool { return true }

// Handle keeps r if it is a warning or worse.
func (w *Warnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		msg := r.Message
		r.Attrs(func(a slog.Attr) bool { msg += " " + a.String(); return true })
		w.mu.Lock()
		w.msgs = append(w.msgs, msg)
		w.mu.Unlock()
	}
	return nil
}

// WithAttrs returns w: attributes given to the logger are not kept.
func (w *Warnings) WithAttrs([]slog.Attr) slog.Handler { return w }

// WithGroup returns w.
func (w *Warnings) WithGroup(string) slog.Handler { return w }

// All returns the warnings kept so far.
func (w *Warnings) All() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.msgs...)
}
