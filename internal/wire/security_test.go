package wire

import (
	"crypto/tls"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/testkit"
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
			ctx := testkit.Ctx(t)
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

func TestKfakeTLS(t *testing.T) {
	cert, pool := testkit.SelfSigned(t)
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
	ctx := testkit.Ctx(t)
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
