package kafkatest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// SecureHost is the only name the SASL_SSL listener's certificate is
// issued for. A client that dials it (as [Cluster.SecureAddrs] do) verifies
// the certificate; one that dials the same listener as 127.0.0.1 meets a
// certificate for another host.
const SecureHost = "localhost"

// SASLUser is a user of the SASL_SSL listener: known to SCRAM-SHA-256,
// SCRAM-SHA-512 (credentials written into the metadata log when storage is
// formatted) and PLAIN (in the listener's JAAS config).
type SASLUser struct {
	Name, Password string
}

type secureConfig struct {
	users  []SASLUser
	reauth time.Duration // connections.max.reauth.ms; 0 leaves Kafka's default (off)
}

// SASLSSL gives every node a fourth listener, SECURE, for clients: SASL_SSL
// with the mechanisms SCRAM-SHA-512, SCRAM-SHA-256 and PLAIN for users, as
// a production cluster would be set up. Its certificate is made at Start by
// a test CA (see [Cluster.TLSConfig], [Cluster.CAFile]), names SecureHost
// only, and reaches Kafka as a PEM keystore. The EXTERNAL listener stays
// plaintext, for tools and for the readiness check.
//
// Names and passwords are restricted to characters that Kafka's
// --add-scram syntax and a JAAS config take literally.
func SASLSSL(users ...SASLUser) Opt {
	return func(c *config) error {
		if len(users) == 0 {
			return fmt.Errorf("SASLSSL: want at least one user")
		}
		seen := make(map[string]bool, len(users))
		for _, u := range users {
			if err := saslWord(u.Name); err != nil {
				return fmt.Errorf("SASLSSL: user name %q: %w", u.Name, err)
			}
			if err := saslWord(u.Password); err != nil {
				return fmt.Errorf("SASLSSL: password of user %q: %w", u.Name, err)
			}
			if seen[u.Name] {
				return fmt.Errorf("SASLSSL: user %q given twice", u.Name)
			}
			seen[u.Name] = true
		}
		if c.secure == nil {
			c.secure = &secureConfig{}
		}
		c.secure.users = append([]SASLUser(nil), users...)
		return nil
	}
}

// ReauthInterval sets connections.max.reauth.ms on the SASL_SSL listener:
// the broker tells each client its session ends after d, and closes a
// connection that is used after that without re-authenticating (KIP-368).
// It needs [SASLSSL]; Kafka's default is no re-authentication.
func ReauthInterval(d time.Duration) Opt {
	return func(c *config) error {
		if d < time.Millisecond {
			return fmt.Errorf("ReauthInterval(%v): want at least 1ms", d)
		}
		if c.secure == nil {
			c.secure = &secureConfig{}
		}
		c.secure.reauth = d
		return nil
	}
}

// saslWord refuses what would need quoting: ',', '[', ']' and '=' end a
// field of --add-scram, '"', '\\' and ';' end a JAAS value.
func saslWord(s string) error {
	if s == "" {
		return fmt.Errorf("empty")
	}
	for _, r := range s {
		if r <= ' ' || r > '~' || strings.ContainsRune(`,[]="\;`, r) {
			return fmt.Errorf("character %q is not allowed (printable ASCII without space or any of ,[]=\"\\;)", r)
		}
	}
	return nil
}

// tlsMaterial is the SASL_SSL listener's CA and certificate, made once per
// cluster.
type tlsMaterial struct {
	caPEM       []byte
	pool        *x509.CertPool
	keystorePEM []byte // private key (PKCS #8), then the chain: leaf, CA
}

// newTLSMaterial makes a CA and a server certificate it signs for
// SecureHost. ECDSA P-256 keeps generation instant; Kafka's PEM keystore
// reads PKCS #8 EC keys.
func newTLSMaterial() (*tlsMaterial, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kafkatest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: CA certificate: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: server key: %w", err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: SecureHost},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(7 * 24 * time.Hour),
		DNSNames:     []string{SecureHost},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: server certificate: %w", err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("kafkatest: server key: %w", err)
	}
	m := &tlsMaterial{
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool:  x509.NewCertPool(),
	}
	m.pool.AddCert(ca)
	m.keystorePEM = pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	m.keystorePEM = append(m.keystorePEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})...)
	m.keystorePEM = append(m.keystorePEM, m.caPEM...)
	return m, nil
}

// writeTLSFiles writes the CA (the clients' truststore) into the cluster
// directory and the keystore into each node's. The key is for this test
// only, but is still kept from other users of the machine.
func (c *Cluster) writeTLSFiles() error {
	if c.tls == nil {
		return nil
	}
	if err := os.WriteFile(filepath.Join(c.dir, "ca.pem"), c.tls.caPEM, 0o644); err != nil {
		return fmt.Errorf("write truststore: %w", err)
	}
	for _, n := range c.nodes {
		if err := os.WriteFile(keystorePath(n), c.tls.keystorePEM, 0o600); err != nil {
			return fmt.Errorf("node %d: write keystore: %w", n.id, err)
		}
	}
	return nil
}

func keystorePath(n *node) string { return filepath.Join(n.dir, "keystore.pem") }

// secureProperties adds the SECURE listener to p (listeners and the
// protocol map already hold the other three).
func secureProperties(p map[string]string, n *node, s *secureConfig) {
	p["listeners"] += ",SECURE://" + n.secure
	p["advertised.listeners"] += ",SECURE://" + n.secureAdvertised
	p["listener.security.protocol.map"] += ",SECURE:SASL_SSL"
	const pre = "listener.name.secure."
	p[pre+"sasl.enabled.mechanisms"] = "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN"
	const scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
	p[pre+"scram-sha-512.sasl.jaas.config"] = scram
	p[pre+"scram-sha-256.sasl.jaas.config"] = scram
	var plain strings.Builder
	plain.WriteString("org.apache.kafka.common.security.plain.PlainLoginModule required")
	for _, u := range s.users {
		fmt.Fprintf(&plain, " user_%s=\"%s\"", u.Name, u.Password)
	}
	plain.WriteString(";")
	p[pre+"plain.sasl.jaas.config"] = plain.String()
	p[pre+"ssl.keystore.type"] = "PEM"
	p[pre+"ssl.keystore.location"] = keystorePath(n)
	if s.reauth > 0 {
		p[pre+"connections.max.reauth.ms"] = fmt.Sprint(s.reauth.Milliseconds())
	}
}

// scramArgs are the format arguments that write every user's SCRAM
// credentials into the metadata log.
func scramArgs(s *secureConfig) []string {
	if s == nil {
		return nil
	}
	var args []string
	for _, u := range s.users {
		for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
			args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u.Name, u.Password))
		}
	}
	return args
}

// SecureAddrs returns every node's SASL_SSL address as clients should
// bootstrap from it (SecureHost:port, what the certificate names), in node
// id order; nil without [SASLSSL].
func (c *Cluster) SecureAddrs() []string {
	if c.tls == nil {
		return nil
	}
	addrs := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		addrs = append(addrs, n.secureAdvertised)
	}
	return addrs
}

// SecureListenerAddr returns the loopback address node id's SASL_SSL
// listener is bound to, e.g. for a forwarder to forward to.
func (c *Cluster) SecureListenerAddr(id int32) (string, error) {
	n, err := c.node(id)
	if err != nil {
		return "", err
	}
	if c.tls == nil {
		return "", fmt.Errorf("kafkatest: the cluster has no SASL_SSL listener (see SASLSSL)")
	}
	return n.secure, nil
}

// TLSConfig returns a client TLS configuration that trusts the cluster's
// CA and nothing else; nil without [SASLSSL]. Each call returns a new one.
func (c *Cluster) TLSConfig() *tls.Config {
	if c.tls == nil {
		return nil
	}
	return &tls.Config{RootCAs: c.tls.pool, MinVersion: tls.VersionTLS12}
}

// CAFile returns the path of the PEM truststore holding the cluster's CA,
// for clients configured by file (ssl.ca.location,
// ssl.truststore.location); "" without [SASLSSL].
func (c *Cluster) CAFile() string {
	if c.tls == nil {
		return ""
	}
	return filepath.Join(c.dir, "ca.pem")
}

// secureAddr is SecureHost with the port of a loopback listener address.
func secureAddr(listener string) string {
	_, port, _ := net.SplitHostPort(listener) // made by this package: always host:port
	return net.JoinHostPort(SecureHost, port)
}
