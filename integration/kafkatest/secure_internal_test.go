package kafkatest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSecureOptionsValidate(t *testing.T) {
	t.Parallel()
	alice := SASLUser{"alice", "alice-secret"}
	for _, tc := range []struct {
		opt  Opt
		want string // "" for valid
	}{
		{SASLSSL(alice), ""},
		{SASLSSL(alice, SASLUser{"bob", "p@ss!word#1"}), ""},
		{SASLSSL(), "at least one user"},
		{SASLSSL(alice, alice), `user "alice" given twice`},
		{SASLSSL(SASLUser{"", "x"}), `user name "": empty`},
		{SASLSSL(SASLUser{"a,b", "x"}), `user name "a,b": character ','`},
		{SASLSSL(SASLUser{"a", "x]y"}), `password of user "a": character ']'`},
		{SASLSSL(SASLUser{"a", `x"y`}), `character '"'`},
		{SASLSSL(SASLUser{"a", "x y"}), `character ' '`},
		{SASLSSL(SASLUser{"a", "pässword"}), `character 'ä'`},
		{ReauthInterval(3 * time.Second), ""},
		{ReauthInterval(0), "ReauthInterval(0s)"},
	} {
		var c config
		err := tc.opt(&c)
		if tc.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.want)
	}
}

func TestReauthIntervalNeedsSASLSSL(t *testing.T) {
	t.Parallel()
	_, _, err := prepare(context.Background(), []Opt{ReauthInterval(time.Second)})
	require.ErrorContains(t, err, "ReauthInterval needs SASLSSL")
}

func TestSecureServerProperties(t *testing.T) {
	t.Parallel()
	n := &node{id: 1, dir: "/d/node-1", external: "127.0.0.1:1", internal: "127.0.0.1:2", controller: "127.0.0.1:3", advertised: "127.0.0.1:1",
		secure: "127.0.0.1:4", secureAdvertised: "localhost:4"}
	s := &secureConfig{users: []SASLUser{{"alice", "a1"}, {"bob", "b2"}}, reauth: 3 * time.Second}
	p := serverProperties(n, "1@a:3", config{nodes: 1, secure: s})
	for _, want := range []string{
		"listeners=EXTERNAL://127.0.0.1:1,INTERNAL://127.0.0.1:2,CONTROLLER://127.0.0.1:3,SECURE://127.0.0.1:4\n",
		"advertised.listeners=EXTERNAL://127.0.0.1:1,INTERNAL://127.0.0.1:2,SECURE://localhost:4\n",
		"listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SASL_SSL\n",
		"listener.name.secure.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN\n",
		"listener.name.secure.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n",
		`listener.name.secure.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a1" user_bob="b2";` + "\n",
		"listener.name.secure.ssl.keystore.type=PEM\n",
		"listener.name.secure.ssl.keystore.location=/d/node-1/keystore.pem\n",
		"listener.name.secure.connections.max.reauth.ms=3000\n",
		"inter.broker.listener.name=INTERNAL\n", // replication stays plaintext
	} {
		require.Contains(t, p, want)
	}
	require.Equal(t, []string{
		"--add-scram", "SCRAM-SHA-256=[name=alice,password=a1]",
		"--add-scram", "SCRAM-SHA-512=[name=alice,password=a1]",
		"--add-scram", "SCRAM-SHA-256=[name=bob,password=b2]",
		"--add-scram", "SCRAM-SHA-512=[name=bob,password=b2]",
	}, scramArgs(s))

	plain := serverProperties(n, "1@a:3", config{nodes: 1})
	require.NotContains(t, plain, "SECURE")
	require.NotContains(t, plain, "reauth")
	require.Nil(t, scramArgs(nil))
}

// TestTLSMaterial: the keystore holds a PKCS #8 key and the chain for
// SecureHost, which a client trusting only the CA verifies for SecureHost
// and refuses for 127.0.0.1.
func TestTLSMaterial(t *testing.T) {
	t.Parallel()
	m, err := newTLSMaterial()
	require.NoError(t, err)
	var blocks []string
	rest := m.keystorePEM
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks = append(blocks, b.Type)
	}
	require.Equal(t, []string{"PRIVATE KEY", "CERTIFICATE", "CERTIFICATE"}, blocks)
	require.Empty(t, strings.TrimSpace(string(rest)))

	cert, err := tls.X509KeyPair(m.keystorePEM, m.keystorePEM)
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	c := &Cluster{tls: m}
	dial := func(name string) error {
		cfg := c.TLSConfig()
		cfg.ServerName = name
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ln.Addr().String(), cfg)
		if err == nil {
			conn.Close()
		}
		return err
	}
	require.NoError(t, dial(SecureHost))
	var host x509.HostnameError
	require.ErrorAs(t, dial("127.0.0.1"), &host)
}

func TestWriteTLSFiles(t *testing.T) {
	t.Parallel()
	m, err := newTLSMaterial()
	require.NoError(t, err)
	dir := t.TempDir()
	n := &node{id: 1, dir: filepath.Join(dir, "node-1")}
	require.NoError(t, os.MkdirAll(n.dir, 0o755))
	c := &Cluster{dir: dir, tls: m, nodes: []*node{n}}
	require.NoError(t, c.writeTLSFiles())
	ca, err := os.ReadFile(c.CAFile())
	require.NoError(t, err)
	require.Equal(t, m.caPEM, ca)
	ks, err := os.Stat(keystorePath(n))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), ks.Mode().Perm(), "the private key is not world-readable")

	none := &Cluster{dir: dir}
	require.Nil(t, none.TLSConfig())
	require.Nil(t, none.SecureAddrs())
	require.Empty(t, none.CAFile())
}
