package factory

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/rebootstrap"
)

func apply(t *testing.T, props map[string]string) config {
	t.Helper()
	opts, err := FromProperties(props)
	require.NoError(t, err)
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	return cfg
}

func TestPropertiesEveryKey(t *testing.T) {
	dir := t.TempDir()
	cfg := apply(t, map[string]string{
		"bootstrap.servers":             "a:9092, b:9093",
		"client.id":                     "svc",
		"consistency.mode":              "emulated",
		"metadata.recovery.strategy":    "NONE",
		"metadata.cluster.check.enable": "false",
		"request.timeout.ms":            "1500",
		"retry.backoff.ms":              "20",
		"acks":                          "1",
		"enable.idempotence":            "false",
		"linger.ms":                     "5",
		"delivery.timeout.ms":           "30000",
		"compression.type":              "zstd",
		"group.id":                      "g",
		"auto.offset.reset":             "earliest",
		"isolation.level":               "read_committed",
		"security.protocol":             "SASL_SSL",
		"sasl.mechanism":                "SCRAM-SHA-512",
		"sasl.username":                 "u",
		"sasl.password":                 "p",
		"ssl.ca.location":               filepath.Join(dir, "ca.pem"),
		"ssl.certificate.location":      filepath.Join(dir, "c.pem"),
		"ssl.key.location":              filepath.Join(dir, "k.pem"),
	})
	require.Equal(t, connConfig{
		seeds: "a:9092,b:9093", clientID: "svc", strategy: rebootstrap.None, clusterCheck: false,
		requestTimeout: 1500 * time.Millisecond, retryBackoff: 20 * time.Millisecond, retryBackoffSet: true,
	}, cfg.conn)
	require.Equal(t, ModeEmulated, cfg.mode)
	require.Equal(t, produceConfig{
		acks: LeaderAck, idempotence: 0, linger: 5 * time.Millisecond, lingerSet: true,
		deliveryTimeout: 30 * time.Second, compression: CodecZstd,
	}, cfg.produce)
	require.Equal(t, consumeConfig{groupID: "g", reset: ResetEarliest, isolation: ReadCommitted}, cfg.consume)
	require.Equal(t, securityConfig{
		protocolSet: SASLSSL,
		sasl:        saslConfig{mechanism: ScramSHA512, user: "u", pass: "p"},
		caFile:      filepath.Join(dir, "ca.pem"), caFrom: "ssl.ca.location",
		certFile: filepath.Join(dir, "c.pem"), keyFile: filepath.Join(dir, "k.pem"),
	}, cfg.security)
	// +2: transactional.id and transaction.timeout.ms, in TestTransactionalOptions.
	require.Len(t, PropertyKeys(), 22+2+len(javaOnlyKeys), "every documented key is tested above, in TestPropertiesJavaNames or TestTransactionalOptions")
}

func TestPropertiesBadValues(t *testing.T) {
	for key, bad := range map[string]string{
		"bootstrap.servers":             "nohost",
		"client.id":                     " ",
		"metadata.recovery.strategy":    "sometimes",
		"metadata.cluster.check.enable": "yes",
		"request.timeout.ms":            "0",
		"retry.backoff.ms":              "-1",
		"acks":                          "2",
		"enable.idempotence":            "1",
		"linger.ms":                     "1.5",
		"compression.type":              "brotli",
		"group.id":                      "",
		"auto.offset.reset":             "smallest",
		"isolation.level":               "serializable",
		"security.protocol":             "TLS",
		"sasl.mechanism":                "GSSAPI",
		"sasl.username":                 "",
		"ssl.ca.location":               "",
		"ssl.certificate.location":      "",
		"ssl.key.location":              "",
	} {
		t.Run(key, func(t *testing.T) {
			_, err := FromProperties(map[string]string{key: bad})
			require.ErrorIs(t, err, ErrConfig)
			require.Contains(t, err.Error(), key+":", "the error names the key")
		})
	}
	for _, bad := range []string{"a:", ":9092", "a:0", "a:70000", "a:b", ",,"} {
		_, err := FromProperties(map[string]string{"bootstrap.servers": bad})
		require.ErrorIs(t, err, ErrConfig, bad)
	}
}

func TestPropertiesUnknownKey(t *testing.T) {
	_, err := FromProperties(map[string]string{"bootstrap.server": "a:1", "acks": "7"})
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "bootstrap.server: unknown configuration key")
	require.Contains(t, err.Error(), "acks:", "every error is reported, not only the first")
}

func TestParsePropertiesFormat(t *testing.T) {
	in := `# comment
! another comment
bootstrap.servers = a:1,\
    b:2
client.id: my\ client
acks all
key\=with\:seps = v\u0041\t
empty=
`
	props, err := ParseProperties(strings.NewReader(in))
	require.NoError(t, err)
	require.Equal(t, map[string]string{
		"bootstrap.servers": "a:1,b:2",
		"client.id":         "my client",
		"acks":              "all",
		"key=with:seps":     "vA\t",
		"empty":             "",
	}, props)

	_, err = ParseProperties(strings.NewReader("k=\\u00zz\n"))
	require.ErrorIs(t, err, ErrConfig)
	_, err = ParseProperties(strings.NewReader("=value\n"))
	require.ErrorIs(t, err, ErrConfig)
}

func TestLoadProperties(t *testing.T) {
	path := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(path, []byte("bootstrap.servers=127.0.0.1:9092\nacks=1\n"), 0o600))
	opts, err := LoadProperties(path)
	require.NoError(t, err)
	f, err := New(opts...)
	require.NoError(t, err)
	require.Equal(t, LeaderAck, f.base.produce.acks)

	_, err = LoadProperties(filepath.Join(t.TempDir(), "missing.properties"))
	require.ErrorIs(t, err, ErrConfig)
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		opts []Opt
		want string
	}{
		"no seeds":              {nil, "bootstrap.servers: required"},
		"idempotence needs all": {[]Opt{BootstrapServers("a:1"), RequiredAcks(LeaderAck), Idempotence(true)}, "enable.idempotence"},
		"sasl without mech":     {[]Opt{BootstrapServers("a:1"), SecurityProtocol(SASLPlaintext)}, "sasl.mechanism: required"},
		"sasl on plaintext":     {[]Opt{BootstrapServers("a:1"), SecurityProtocol(Plaintext), SASL(Plain, "u", "p")}, "security.protocol: PLAINTEXT, but SASL settings are given"},
		"plaintext after sasl":  {[]Opt{BootstrapServers("a:1"), SASL(Plain, "u", "p"), SecurityProtocol(Plaintext)}, "security.protocol: PLAINTEXT, but SASL settings are given"},
		"bad protocol option":   {[]Opt{BootstrapServers("a:1"), SecurityProtocol(Protocol(9))}, "security.protocol"},
		"default protocol":      {[]Opt{BootstrapServers("a:1"), SecurityProtocol(ProtocolDefault)}, "security.protocol"},
		"bad mechanism":         {[]Opt{BootstrapServers("a:1"), SASL(Mechanism(7), "u", "p")}, "sasl.mechanism"},
		"tls on plaintext":      {[]Opt{BootstrapServers("a:1"), TLS(&tls.Config{}), SecurityProtocol(Plaintext)}, "security.protocol: PLAINTEXT, but TLS settings are given"},
		"missing ca file":       {[]Opt{BootstrapServers("a:1"), security(func(c *config) { c.security.caFile = "/nonexistent/ca.pem" })}, "ssl.ca.location"},
		"cert without key":      {[]Opt{BootstrapServers("a:1"), security(func(c *config) { c.security.certFile = "x" })}, "ssl.key.location"},
		"bad acks option":       {[]Opt{BootstrapServers("a:1"), RequiredAcks(Acks(7))}, "acks:"},
		"bad codec":             {[]Opt{BootstrapServers("a:1"), Compression(Codec(9))}, "compression.type"},
		"bad reset":             {[]Opt{BootstrapServers("a:1"), AutoOffsetReset(OffsetReset(9))}, "auto.offset.reset"},
		"bad isolation":         {[]Opt{BootstrapServers("a:1"), IsolationLevel(Isolation(9))}, "isolation.level"},
		"nil store":             {[]Opt{BootstrapServers("a:1"), WithStore(nil)}, "WithStore"},
		"nil option":            {[]Opt{BootstrapServers("a:1"), nil}, "option 2 of 2 is nil"},
		"negative linger":       {[]Opt{BootstrapServers("a:1"), Linger(-time.Second)}, "linger.ms"},
		"bad code":              {[]Opt{BootstrapServers("a:1"), InconsistentMetadataCode(-3)}, "InconsistentMetadataCode"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.opts...)
			require.ErrorIs(t, err, ErrConfig)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// acks=1 without an explicit idempotence setting turns idempotence off.
	f, err := New(BootstrapServers("a:1"), RequiredAcks(LeaderAck))
	require.NoError(t, err)
	require.Equal(t, int8(-1), f.base.produce.idempotence)
	require.False(t, errors.Is(err, ErrConfig))
}

func FuzzParseProperties(f *testing.F) {
	f.Add("a=b\nc: d\\\n e\n# x\n")
	f.Add("k\\u0041=\\t\\")
	f.Fuzz(func(t *testing.T, s string) {
		props, err := ParseProperties(strings.NewReader(s))
		if err != nil {
			require.ErrorIs(t, err, ErrConfig)
			return
		}
		// Whatever parses must not crash the key table either.
		_, _ = FromProperties(props)
	})
}

// TestGoSecurityOptions: SASL and TLS decide security.protocol, in any
// order, so Go options alone configure every protocol.
func TestGoSecurityOptions(t *testing.T) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	for name, tc := range map[string]struct {
		opts []Opt
		want string
	}{
		"sasl":          {[]Opt{SASL(Plain, "u", "p")}, "SASL_PLAINTEXT"},
		"tls":           {[]Opt{TLS(tlsCfg)}, "SSL"},
		"sasl then tls": {[]Opt{SASL(ScramSHA256, "u", "p"), TLS(tlsCfg)}, "SASL_SSL"},
		"tls then sasl": {[]Opt{TLS(tlsCfg), SASL(ScramSHA512, "u", "p")}, "SASL_SSL"},
		"explicit ssl":  {[]Opt{SecurityProtocol(SSL)}, "SSL"},
		"ssl then tls":  {[]Opt{SecurityProtocol(SASLSSL), TLS(tlsCfg), SASL(Plain, "u", "p")}, "SASL_SSL"},
		"tls then ssl":  {[]Opt{TLS(tlsCfg), SASL(Plain, "u", "p"), SecurityProtocol(SASLSSL)}, "SASL_SSL"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := New(append([]Opt{BootstrapServers("127.0.0.1:1")}, tc.opts...)...)
			require.NoError(t, err)
			require.Equal(t, tc.want, f.base.security.protocol().String())
		})
	}
}

// TestZeroDurationsApply: linger.ms=0 and retry.backoff.ms=0 are real
// settings, not "use the default".
func TestZeroDurationsApply(t *testing.T) {
	cfg := apply(t, map[string]string{"bootstrap.servers": "a:1", "linger.ms": "0", "retry.backoff.ms": "0"})
	require.True(t, cfg.produce.lingerSet)
	require.Zero(t, cfg.produce.linger)
	require.True(t, cfg.conn.retryBackoffSet)
	cfg.role = RoleProducer // linger.ms is a producer's
	kopts, err := cfg.validate()
	require.NoError(t, err)
	cl, err := kgo.NewClient(kopts...)
	require.NoError(t, err)
	defer cl.Close()
	require.Equal(t, time.Duration(0), cl.OptValue(kgo.ProducerLinger))
	def := defaultConfig()
	def.conn.seeds = "a:1"
	def.role = RoleProducer
	kopts, err = def.validate()
	require.NoError(t, err)
	cl2, err := kgo.NewClient(kopts...)
	require.NoError(t, err)
	defer cl2.Close()
	require.Equal(t, 10*time.Millisecond, cl2.OptValue(kgo.ProducerLinger), "the default is franz-go's")
}

// javaOnlyKeys are the Java client's names for what the keys of
// TestPropertiesEveryKey say in librdkafka's.
var javaOnlyKeys = []string{
	"sasl.jaas.config", "ssl.key.password", "ssl.keystore.location",
	"ssl.keystore.type", "ssl.truststore.location", "ssl.truststore.type",
}

const keyPass = "kconsist-test" // testdata/README.md

// TestPropertiesJavaNames: the Java client's TLS and SASL names set what
// librdkafka's do.
func TestPropertiesJavaNames(t *testing.T) {
	cfg := apply(t, map[string]string{
		"bootstrap.servers":       "a:1",
		"security.protocol":       "SASL_SSL",
		"sasl.mechanism":          "SCRAM-SHA-256",
		"sasl.jaas.config":        scramLoginModule + ` required username="alice" password="p\"w";`,
		"ssl.truststore.location": "testdata/ca.pem",
		"ssl.truststore.type":     "PEM",
		"ssl.keystore.location":   "testdata/client-keystore.pem",
		"ssl.keystore.type":       "pem",
		"ssl.key.password":        keyPass,
	})
	require.Equal(t, saslConfig{mechanism: ScramSHA256, user: "alice", pass: `p"w`, module: "SCRAM"}, cfg.security.sasl)
	require.Equal(t, "testdata/ca.pem", cfg.security.caFile)
	require.Equal(t, "ssl.truststore.location", cfg.security.caFrom)
	require.Equal(t, "testdata/client-keystore.pem", cfg.security.keystore)
	require.Equal(t, secret(keyPass), cfg.security.keyPass)
	b, err := cfg.build()
	require.NoError(t, err)
	require.Len(t, b.tls.Certificates, 1)
	require.Len(t, b.tls.Certificates[0].Certificate, 2, "the keystore's chain: client certificate and CA")
	for _, k := range javaOnlyKeys {
		require.Contains(t, PropertyKeys(), k)
	}
}

// TestPropertiesJavaNamesConnect: a client configured with nothing but the
// Java client's names connects to a broker that demands a client
// certificate (encrypted PEM keystore) and SASL (sasl.jaas.config).
func TestPropertiesJavaNamesConnect(t *testing.T) {
	server, err := tls.LoadX509KeyPair("testdata/server.pem", "testdata/server.pem")
	require.NoError(t, err)
	caPEM, err := os.ReadFile("testdata/ca.pem")
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-256"} {
		t.Run(mech, func(t *testing.T) {
			kc := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"),
				kfake.EnableSASL(), kfake.Superuser(mech, "alice", "s3cret"),
				kfake.TLS(&tls.Config{Certificates: []tls.Certificate{server}, ClientCAs: pool,
					ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}))
			module := plainLoginModule
			if mech != "PLAIN" {
				module = scramLoginModule
			}
			opts, err := FromProperties(map[string]string{
				"bootstrap.servers":       strings.Join(kc.ListenAddrs(), ","),
				"security.protocol":       "SASL_SSL",
				"sasl.mechanism":          mech,
				"sasl.jaas.config":        module + ` required username="alice" password="s3cret";`,
				"ssl.truststore.location": "testdata/ca.pem",
				"ssl.truststore.type":     "PEM",
				"ssl.keystore.location":   "testdata/client-keystore.pem",
				"ssl.keystore.type":       "PEM",
				"ssl.key.password":        keyPass,
			})
			require.NoError(t, err)
			f, err := New(opts...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = f.Close(context.Background()) })
			adm, err := f.Admin()
			require.NoError(t, err)
			defer adm.Close(context.Background())
			topics, err := adm.ListTopics(testkit.Ctx(t))
			require.NoError(t, err)
			require.True(t, topics.Has("t"))
		})
	}
}

// TestPEMKeys: PEM keystores and key files as OpenSSL writes them, and
// each way to get the key password wrong.
func TestPEMKeys(t *testing.T) {
	const ks = "ssl.keystore.location"
	for name, tc := range map[string]struct {
		props map[string]string
		want  string // "": loads
	}{
		"aes-256 keystore":  {map[string]string{ks: "testdata/client-keystore.pem", "ssl.key.password": keyPass}, ""},
		"3des keystore":     {map[string]string{ks: "testdata/client-keystore-des3.pem", "ssl.key.password": keyPass}, ""},
		"plain keystore":    {map[string]string{ks: "testdata/client-keystore-plain.pem"}, ""},
		"librdkafka names":  {map[string]string{"ssl.certificate.location": "testdata/client-cert.pem", "ssl.key.location": "testdata/client-keystore.pem", "ssl.key.password": keyPass}, ""},
		"no password":       {map[string]string{ks: "testdata/client-keystore.pem"}, "ssl.key.password: required: the private key in testdata/client-keystore.pem is encrypted"},
		"wrong password":    {map[string]string{ks: "testdata/client-keystore.pem", "ssl.key.password": password}, "ssl.key.password: the private key in testdata/client-keystore.pem: does not decrypt"},
		"needless password": {map[string]string{ks: "testdata/client-keystore-plain.pem", "ssl.key.password": password}, "ssl.key.password: given, but the private key in testdata/client-keystore-plain.pem is not encrypted"},
		"legacy encryption": {map[string]string{"ssl.certificate.location": "testdata/client-cert.pem", "ssl.key.location": "testdata/client-key-legacy.pem", "ssl.key.password": keyPass}, "ssl.key.location: the private key in testdata/client-key-legacy.pem uses OpenSSL's legacy encryption"},
		"no key":            {map[string]string{ks: "testdata/ca.pem"}, "ssl.keystore.location: testdata/ca.pem holds no PEM private key"},
		"no certificate":    {map[string]string{"ssl.certificate.location": "testdata/client-key-legacy.pem", "ssl.key.location": "testdata/client-keystore-plain.pem"}, "ssl.certificate.location: testdata/client-key-legacy.pem holds no PEM certificate"},
		"key of another":    {map[string]string{"ssl.certificate.location": "testdata/ca.pem", "ssl.key.location": "testdata/client-keystore-plain.pem"}, "ssl.certificate.location: testdata/ca.pem: tls: private key does not match public key"},
		"missing file":      {map[string]string{ks: "testdata/missing.pem"}, "ssl.keystore.location: open testdata/missing.pem"},
		"password, no key":  {map[string]string{"ssl.key.password": keyPass}, "ssl.key.password: given, but no key to decrypt"},
		"truststore":        {map[string]string{"ssl.truststore.location": "testdata/client-key-legacy.pem"}, "ssl.truststore.location: testdata/client-key-legacy.pem holds no PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			props := map[string]string{"bootstrap.servers": "a:1", "security.protocol": "SSL"}
			for k, v := range tc.props {
				props[k] = v
				if strings.HasSuffix(k, "store.location") {
					props[strings.TrimSuffix(k, "location")+"type"] = "PEM"
				}
			}
			cfg := apply(t, props)
			b, err := cfg.build()
			if tc.want == "" {
				require.NoError(t, err)
				require.Len(t, b.tls.Certificates, 1)
				return
			}
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), password)
			require.NotContains(t, err.Error(), keyPass)
		})
	}
}

// TestDecryptPKCS8Malformed: damaged encrypted keys fail with an error,
// never a panic or a long wait.
func TestDecryptPKCS8Malformed(t *testing.T) {
	data, err := os.ReadFile("testdata/client-keystore.pem")
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.Equal(t, "ENCRYPTED PRIVATE KEY", block.Type)
	_, err = decryptPKCS8(block.Bytes, keyPass)
	require.NoError(t, err)
	for i := range block.Bytes {
		for _, b := range []byte{0, 0xff, block.Bytes[i] ^ 1} {
			der := bytes.Clone(block.Bytes)
			der[i] = b
			if _, err := decryptPKCS8(der, keyPass); err != nil {
				require.NotContains(t, err.Error(), keyPass)
			}
		}
	}
	_, err = decryptPKCS8(block.Bytes[:len(block.Bytes)-16], keyPass)
	require.Error(t, err)
}

// TestPropertiesStoreTypes: what the Java client's store keys cannot say
// here is refused, naming the key.
func TestPropertiesStoreTypes(t *testing.T) {
	for name, tc := range map[string]struct {
		props map[string]string
		want  string
	}{
		"jks truststore":         {map[string]string{"ssl.truststore.location": "ts.jks", "ssl.truststore.type": "JKS"}, "ssl.truststore.type: JKS stores are not read, only PEM"},
		"pkcs12 keystore":        {map[string]string{"ssl.keystore.location": "ks.p12", "ssl.keystore.type": "PKCS12"}, "ssl.keystore.type: PKCS12 stores are not read, only PEM"},
		"other type":             {map[string]string{"ssl.keystore.type": "BKS"}, `ssl.keystore.type: "BKS" is not PEM`},
		"truststore, no type":    {map[string]string{"ssl.truststore.location": "ca.pem"}, "ssl.truststore.type: required as PEM with ssl.truststore.location"},
		"keystore, no type":      {map[string]string{"ssl.keystore.location": "ks.pem"}, "ssl.keystore.type: required as PEM with ssl.keystore.location"},
		"truststore password":    {map[string]string{"ssl.truststore.password": password}, "ssl.truststore.password: a PEM truststore has no password"},
		"keystore password":      {map[string]string{"ssl.keystore.password": password}, "ssl.keystore.password: a PEM keystore has no store password"},
		"truststore and ca":      {map[string]string{"ssl.truststore.location": "a.pem", "ssl.truststore.type": "PEM", "ssl.ca.location": "b.pem"}, "ssl.truststore.location and ssl.ca.location: both given"},
		"keystore and cert":      {map[string]string{"ssl.keystore.location": "a.pem", "ssl.keystore.type": "PEM", "ssl.certificate.location": "b.pem"}, "ssl.keystore.location and ssl.certificate.location: both given"},
		"jaas and username":      {map[string]string{"sasl.jaas.config": plainLoginModule + ` required username="u" password="p";`, "sasl.username": "u"}, "sasl.jaas.config and sasl.username: both given"},
		"jaas, bad, shows error": {map[string]string{"sasl.jaas.config": plainLoginModule + ` required username="u" pass="` + password + `";`}, "sasl.jaas.config: unknown option at byte"},
	} {
		t.Run(name, func(t *testing.T) {
			props := map[string]string{"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
			for k, v := range tc.props {
				props[k] = v
			}
			_, err := FromProperties(props)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), password)
		})
	}
}

// TestPropertiesClientReplacesStore: a client's properties in one set of
// names replace the factory's in the other.
func TestPropertiesClientReplacesStore(t *testing.T) {
	cfg := apply(t, map[string]string{
		"security.protocol": "SSL", "ssl.keystore.location": "testdata/client-keystore.pem", "ssl.keystore.type": "PEM",
		"ssl.truststore.location": "x.pem", "ssl.truststore.type": "PEM",
	})
	opts, err := FromProperties(map[string]string{"security.protocol": "SSL", "ssl.certificate.location": "c.pem", "ssl.key.location": "k.pem", "ssl.ca.location": "ca.pem"})
	require.NoError(t, err)
	for _, o := range opts {
		o.apply(&cfg)
	}
	require.Empty(t, cfg.security.keystore)
	require.Equal(t, "ca.pem", cfg.security.caFile)
	require.Equal(t, "ssl.ca.location", cfg.security.caFrom)
}

func TestParseJAAS(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want jaasLogin
	}{
		"plain":  {plainLoginModule + ` required username="alice" password="secret";`, jaasLogin{"PLAIN", "alice", "secret", false}},
		"scram":  {scramLoginModule + ` required username="bob" password="pw";`, jaasLogin{"SCRAM", "bob", "pw", false}},
		"token":  {scramLoginModule + ` required username="tokenid" password="hmac" tokenauth="true";`, jaasLogin{"SCRAM", "tokenid", "hmac", true}},
		"words":  {plainLoginModule + " REQUIRED username=alice password=pa$$-w_rd.1;", jaasLogin{"PLAIN", "alice", "pa$$-w_rd.1", false}},
		"quotes": {plainLoginModule + ` optional username='al"ice' password='it\'s';`, jaasLogin{"PLAIN", `al"ice`, "it's", false}},
		"escapes": {plainLoginModule + ` sufficient username="a\\b" password="q\"\t\101\7777\3777";`,
			jaasLogin{"PLAIN", `a\b`, "q\"\tA?77\u00ff7", false}},
		"comments and lines": {"  // from the docs\n" + plainLoginModule + " /* flag */ requisite\n  username=\"u\"\n  password=\"p\" ;  \n// end",
			jaasLogin{"PLAIN", "u", "p", false}},
		"empty password": {plainLoginModule + ` required username="u" password="";`, jaasLogin{"PLAIN", "u", "", false}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := parseJAAS(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseJAASErrors(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"empty":         {"", "expected a login module class name at byte 0"},
		"oauth":         {"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;", "OAuthBearerLoginModule (OAUTHBEARER) is not supported"},
		"kerberos":      {"com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;", "Krb5LoginModule (GSSAPI) is not supported"},
		"other module":  {password + ` required;`, "the login module is not " + plainLoginModule},
		"no flag":       {plainLoginModule + ` username="u" password="` + password + `";`, "expected a control flag"},
		"quoted flag":   {plainLoginModule + ` "required" username="u" password="p";`, "expected a control flag"},
		"no semicolon":  {plainLoginModule + ` required username="u" password="` + password + `"`, "expected an option or ';'"},
		"no equals":     {plainLoginModule + ` required username "u" password="p";`, "expected '=' after username at byte"},
		"no value":      {plainLoginModule + ` required username=;`, "expected a value for username"},
		"unknown":       {plainLoginModule + ` required username="u" ` + password + `="x" password="p";`, "unknown option at byte 78 (PlainLoginModule takes username and password)"},
		"tokenauth":     {plainLoginModule + ` required username="u" password="p" tokenauth=true;`, "unknown option"},
		"bad tokenauth": {scramLoginModule + ` required username="u" password="p" tokenauth=yes;`, "tokenauth is not true or false"},
		"twice":         {plainLoginModule + ` required username="u" password="` + password + `" password="x";`, "option password given twice"},
		"two modules":   {plainLoginModule + ` required username="u" password="p"; ` + plainLoginModule + ` required;`, "more than one login module"},
		"no username":   {plainLoginModule + ` required password="` + password + `";`, "no username option"},
		"no password":   {plainLoginModule + ` required username="u";`, "no password option"},
		"empty user":    {plainLoginModule + ` required username="" password="p";`, "username is empty"},
		"unterminated":  {plainLoginModule + ` required username="u" password="` + password + `;`, "has no closing quote"},
		"line break":    {plainLoginModule + ` required username="u" password="` + password + "\n\";", "ends at a line break"},
		"open comment":  {plainLoginModule + ` required /* username="u" password="` + password + `";`, "is not closed"},
		"stray byte":    {plainLoginModule + ` required username="u" password="p" ,;`, "expected an option or ';' at byte"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseJAAS(tc.in)
			require.ErrorContains(t, err, tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "sasl.jaas.config: "), err.Error())
			require.NotContains(t, err.Error(), password)
		})
	}
}

// TestJAASModuleFitsMechanism: a PlainLoginModule entry with a SCRAM
// mechanism (or the reverse) is refused when the client is made.
func TestJAASModuleFitsMechanism(t *testing.T) {
	for module, mech := range map[string]string{plainLoginModule: "SCRAM-SHA-256", scramLoginModule: "PLAIN"} {
		opts, err := FromProperties(map[string]string{
			"bootstrap.servers": "a:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mech,
			"sasl.jaas.config": module + ` required username="u" password="` + password + `";`,
		})
		require.NoError(t, err)
		_, err = New(opts...)
		require.ErrorIs(t, err, ErrConfig)
		require.ErrorContains(t, err, "sasl.jaas.config: ")
		require.ErrorContains(t, err, "LoginModule does not serve sasl.mechanism="+mech)
		require.NotContains(t, err.Error(), password)
	}
	// A Go option replaces the whole entry, module included.
	opts, err := FromProperties(map[string]string{
		"bootstrap.servers": "a:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
		"sasl.jaas.config": plainLoginModule + ` required username="u" password="p";`,
	})
	require.NoError(t, err)
	f, err := New(append(opts, SASL(ScramSHA512, "u", "p"))...)
	require.NoError(t, err)
	f.Close(context.Background())
}

// FuzzParseJAAS: any input parses or fails with a sasl.jaas.config error;
// a password anywhere in it never shows in the error; what parses gives
// back the username and password a quoted entry holds.
func FuzzParseJAAS(f *testing.F) {
	f.Add(plainLoginModule+` required username="u" password="`, `";`, "u")
	f.Add(scramLoginModule+` required tokenauth=true username=`, ` password=x;`, "")
	f.Add("/*", "*/ x", `a"b\`)
	f.Add(plainLoginModule+` required username='`, `\`, "\\101")
	f.Fuzz(func(t *testing.T, before, after, user string) {
		if strings.Contains(before+after+user, password) {
			return
		}
		l, err := parseJAAS(before + password + after)
		if err != nil {
			var je *jaasError
			require.ErrorAs(t, err, &je)
			require.NotContains(t, err.Error(), password)
		} else {
			require.Contains(t, []string{"PLAIN", "SCRAM"}, l.module)
		}
		in := scramLoginModule + ` required username=` + jaasQuote(user) + ` password=` + jaasQuote(before+password+after) + `;`
		l, err = parseJAAS(in)
		if user == "" {
			require.ErrorContains(t, err, "username is empty")
			return
		}
		require.NoError(t, err)
		require.Equal(t, jaasLogin{"SCRAM", user, secret(before + password + after), false}, l)
	})
}

// jaasQuote quotes s as a Java string: octal escapes for line breaks (the
// tokenizer ends a string at one), backslashes for quotes and backslashes.
// Bytes of invalid UTF-8 stay as they are.
func jaasQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// TestREADMEConfigurationTable: every key is in README's table, with the
// origin keyOrigins gives it.
func TestREADMEConfigurationTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = strings.TrimSpace(cells[2])
	}
	for _, k := range PropertyKeys() {
		origin, ok := rows[k]
		require.True(t, ok, "README's configuration table has no row for %s", k)
		require.Equal(t, keyOrigin(k), origin, "origin of %s", k)
	}
}
