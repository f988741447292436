package wire

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kconsist/kconsist/consistency"
)

func TestKfakeSASL(t *testing.T) {
	for _, tc := range []struct {
		method string
		mech   sasl.Mechanism
	}{
		{"PLAIN", plain.Auth{User: "u", Pass: "p"}.AsMechanism()},
		{"SCRAM-SHA-256", scram.Auth{User: "u", Pass: "p"}.AsSha256Mechanism()},
		{"SCRAM-SHA-512", scram.Auth{User: "u", Pass: "p"}.AsSha512Mechanism()},
	} {
		t.Run(tc.method, func(t *testing.T) {
			sc := newSpyCluster(t, 1, kfake.EnableSASL(), kfake.Superuser(tc.method, "u", "p"), kfake.SeedTopics(1, testTopic))
			sc.setHooks(spyHooks{token: func(string, int16) (int64, bool) { return 20, true }})
			store := consistency.NewMemoryStore()
			if _, err := store.Advance(consistency.MustOf("kfake", 10)); err != nil {
				t.Fatal(err)
			}
			i := newInterceptor(t, Config{Store: store, Dial: sc.dial})
			ctx := testCtx(t)
			cl := newClient(t, sc.seeds(), i, kgo.SASL(tc.mech))
			produceN(t, ctx, cl, testTopic, 0, 5)
			consumeAll(t, ctx, sc.seeds(), i, testTopic, 5, kgo.SASL(tc.mech))
			var authStamped bool
			for _, r := range sc.requests() {
				if r.key == 36 && r.hasState { // SaslAuthenticate
					authStamped = true
				}
			}
			if !authStamped {
				t.Fatal("no SaslAuthenticate request carried a token")
			}
			if got := store.Load(); got != consistency.MustOf("kfake", 20) {
				t.Fatalf("store %v", got)
			}
		})
	}
}

// selfSigned returns a server certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
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
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
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

func TestKfakeTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	kf, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(2, testTopic),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer kf.Close()
	store := consistency.NewMemoryStore()
	if _, err := store.Advance(consistency.MustOf("kfake", 3)); err != nil {
		t.Fatal(err)
	}
	// No ServerName: the interceptor fills it from each broker's host.
	clientTLS := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	i := newInterceptor(t, Config{Store: store, TLS: clientTLS})
	ctx := testCtx(t)
	cl := newClient(t, kf.ListenAddrs(), i)
	produceN(t, ctx, cl, testTopic, 0, 10)
	consumeAll(t, ctx, kf.ListenAddrs(), i, testTopic, 10)
	if clientTLS.ServerName != "" {
		t.Fatal("the caller's tls.Config was modified")
	}
	if st := i.Stats(); st.RequestsStamped == 0 || st.ResponsesRead == 0 {
		t.Fatalf("stats %+v: nothing went through the interceptor", st)
	}
}
