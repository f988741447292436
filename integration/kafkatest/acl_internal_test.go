package kafkatest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAuthorizerOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		supers []string
		want   string // "" for valid
	}{
		{nil, ""},
		{[]string{"admin"}, ""},
		{[]string{"admin", "ops"}, ""},
		{[]string{"admin", "admin"}, `super user "admin" given twice`},
		{[]string{"ANONYMOUS"}, "User:ANONYMOUS is always a super user"},
		{[]string{""}, `super user "": empty`},
		{[]string{"a;b"}, `super user "a;b": character ';'`},
		{[]string{"a b"}, `character ' '`},
	} {
		var c config
		err := Authorizer(tc.supers...)(&c)
		if tc.want == "" {
			require.NoError(t, err, "%q", tc.supers)
			continue
		}
		require.ErrorContains(t, err, tc.want)
		require.Nil(t, c.brokerConfig, "a refused option leaves the config as it was")
	}
}

// TestAuthorizerProperties: every node gets KRaft's authorizer, denies
// what no ACL allows, and keeps the plaintext listeners' principal (and
// the named users) as super users; a later BrokerConfig wins.
func TestAuthorizerProperties(t *testing.T) {
	t.Parallel()
	n := &node{id: 1, dir: "/d/node-1", external: "127.0.0.1:1", internal: "127.0.0.1:2", controller: "127.0.0.1:3", advertised: "127.0.0.1:1",
		secure: "127.0.0.1:4", secureAdvertised: "localhost:4"}
	cfg := config{nodes: 1}
	for _, o := range []Opt{SASLSSL(SASLUser{"app", "a1"}, SASLUser{"admin", "b2"}), Authorizer("admin")} {
		require.NoError(t, o(&cfg))
	}
	p := serverProperties(n, "1@a:3", cfg)
	for _, want := range []string{
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n",
		"super.users=User:ANONYMOUS;User:admin\n",
		"allow.everyone.if.no.acl.found=false\n",
		"listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SASL_SSL\n",
	} {
		require.Contains(t, p, want)
	}

	require.NoError(t, BrokerConfig("super.users", "User:ANONYMOUS")(&cfg))
	require.Contains(t, serverProperties(n, "1@a:3", cfg), "super.users=User:ANONYMOUS\n")

	require.NotContains(t, serverProperties(n, "1@a:3", config{nodes: 1}), "authorizer")
}
