package kafkatest_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// A cluster set up as in production: SASL_SSL, SCRAM users, sessions that
// must be renewed every 3s. A stream forwarder in front of the listener
// counts the connections a client makes.
func ExampleSASLSSL() {
	_ = func(t *testing.T) {
		alice := kafkatest.SASLUser{Name: "alice", Password: "alice-secret"}
		c := kafkatest.Start(t, kafkatest.SASLSSL(alice), kafkatest.ReauthInterval(3*time.Second))
		listener, err := c.SecureListenerAddr(1)
		if err != nil {
			t.Fatal(err)
		}
		fwd, err := kafkatest.NewStreamForwarder(listener)
		if err != nil {
			t.Fatal(err)
		}
		defer fwd.Close()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.SecureAddrs()...), kgo.DialTLSConfig(c.TLSConfig()),
			kgo.SASL(scram.Auth{User: alice.Name, Pass: alice.Password}.AsSha512Mechanism()))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		t.Logf("%d connections through the forwarder", fwd.Accepted())
	}
}
