package factory

import (
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

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
	require.Equal(t, []string{"a:9092", "b:9093"}, cfg.seeds)
	require.Equal(t, "svc", cfg.clientID)
	require.Equal(t, ModeEmulated, cfg.mode)
	require.Equal(t, rebootstrap.None, cfg.strategy)
	require.False(t, cfg.clusterCheck)
	require.Equal(t, 1500*time.Millisecond, cfg.requestTimeout)
	require.Equal(t, 20*time.Millisecond, *cfg.retryBackoff)
	require.Equal(t, "1", cfg.acks)
	require.False(t, *cfg.idempotence)
	require.Equal(t, 5*time.Millisecond, *cfg.linger)
	require.Equal(t, "zstd", cfg.compression)
	require.Equal(t, "g", cfg.groupID)
	require.Equal(t, "earliest", cfg.autoOffsetRes)
	require.Equal(t, "read_committed", cfg.isolationLevel)
	require.Equal(t, "SASL_SSL", cfg.secProt)
	require.Equal(t, saslConfig{"SCRAM-SHA-512", "u", "p"}, cfg.sasl)
	require.Equal(t, filepath.Join(dir, "ca.pem"), cfg.sslCA)
	require.Equal(t, filepath.Join(dir, "c.pem"), cfg.sslCert)
	require.Equal(t, filepath.Join(dir, "k.pem"), cfg.sslKey)
	require.Equal(t, 30*time.Second, cfg.deliveryTimeout)
	require.Len(t, PropertyKeys(), 22, "every documented key is tested above")
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
	f, err := New(nil, opts...)
	require.NoError(t, err)
	require.Equal(t, "1", f.base.acks)

	_, err = LoadProperties(filepath.Join(t.TempDir(), "missing.properties"))
	require.ErrorIs(t, err, ErrConfig)
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		opts []Opt
		want string
	}{
		"no seeds":              {nil, "bootstrap.servers: required"},
		"idempotence needs all": {[]Opt{BootstrapServers("a:1"), Acks("1"), Idempotence(true)}, "enable.idempotence"},
		"sasl without mech":     {[]Opt{BootstrapServers("a:1"), opt(func(c *config) { c.secProt = "SASL_PLAINTEXT" })}, "sasl.mechanism: required"},
		"sasl without protocol": {[]Opt{BootstrapServers("a:1"), opt(func(c *config) { c.sasl.mechanism = "PLAIN" })}, "sasl.mechanism: set"},
		"bad protocol option":   {[]Opt{BootstrapServers("a:1"), SecurityProtocol("TLS")}, "security.protocol"},
		"tls files on plain":    {[]Opt{BootstrapServers("a:1"), opt(func(c *config) { c.sslCA = "x" })}, "security.protocol"},
		"missing ca file":       {[]Opt{BootstrapServers("a:1"), opt(func(c *config) { c.secProt = "SSL"; c.sslCA = "/nonexistent/ca.pem" })}, "ssl.ca.location"},
		"cert without key":      {[]Opt{BootstrapServers("a:1"), opt(func(c *config) { c.secProt = "SSL"; c.sslCert = "x" })}, "ssl.key.location"},
		"bad acks option":       {[]Opt{BootstrapServers("a:1"), Acks("many")}, "acks:"},
		"negative linger":       {[]Opt{BootstrapServers("a:1"), Linger(-time.Second)}, "linger.ms"},
		"bad code":              {[]Opt{BootstrapServers("a:1"), InconsistentMetadataCode(-3)}, "InconsistentMetadataCode"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(nil, tc.opts...)
			require.ErrorIs(t, err, ErrConfig)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// acks=1 without an explicit idempotence setting turns idempotence off.
	f, err := New(nil, BootstrapServers("a:1"), Acks("1"))
	require.NoError(t, err)
	require.Nil(t, f.base.idempotence)
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

// TestGoSecurityOptions: SASL and TLS set security.protocol themselves, in
// either order, so Go options alone configure every protocol.
func TestGoSecurityOptions(t *testing.T) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	for name, tc := range map[string]struct {
		opts []Opt
		want string
	}{
		"sasl":          {[]Opt{SASL("PLAIN", "u", "p")}, "SASL_PLAINTEXT"},
		"tls":           {[]Opt{TLS(tlsCfg)}, "SSL"},
		"sasl then tls": {[]Opt{SASL("SCRAM-SHA-256", "u", "p"), TLS(tlsCfg)}, "SASL_SSL"},
		"tls then sasl": {[]Opt{TLS(tlsCfg), SASL("SCRAM-SHA-512", "u", "p")}, "SASL_SSL"},
		"explicit ssl":  {[]Opt{SecurityProtocol("ssl")}, "SSL"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := New(nil, append([]Opt{BootstrapServers("127.0.0.1:1")}, tc.opts...)...)
			require.NoError(t, err)
			require.Equal(t, tc.want, f.base.secProt)
		})
	}
}

// TestZeroDurationsApply: linger.ms=0 and retry.backoff.ms=0 are real
// settings, not "use the default".
func TestZeroDurationsApply(t *testing.T) {
	cfg := apply(t, map[string]string{"bootstrap.servers": "a:1", "linger.ms": "0", "retry.backoff.ms": "0"})
	require.NotNil(t, cfg.linger)
	require.Zero(t, *cfg.linger)
	require.NotNil(t, cfg.retryBackoff)
	kopts, err := cfg.validate()
	require.NoError(t, err)
	cl, err := kgo.NewClient(kopts...)
	require.NoError(t, err)
	defer cl.Close()
	require.Equal(t, time.Duration(0), cl.OptValue(kgo.ProducerLinger))
	def := defaultConfig()
	def.seeds = []string{"a:1"}
	kopts, err = def.validate()
	require.NoError(t, err)
	cl2, err := kgo.NewClient(kopts...)
	require.NoError(t, err)
	defer cl2.Close()
	require.Equal(t, 10*time.Millisecond, cl2.OptValue(kgo.ProducerLinger), "the default is franz-go's")
}
