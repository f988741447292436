package factory

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/rebootstrap"
)

// TestValidateLeavesConfigAlone: validating an SSL config must not leave a
// tls.Config behind in it; a factory's base is validated once and then
// shared by every client.
func TestValidateLeavesConfigAlone(t *testing.T) {
	cfg := defaultConfig()
	BootstrapServers("127.0.0.1:1").apply(&cfg)
	SecurityProtocol(SSL).apply(&cfg)
	_, err := cfg.validate()
	require.NoError(t, err)
	require.Nil(t, cfg.security.tls, "validate set the config's TLS")
}

// TestPerClientPlaintextOverSSLBase: one client may turn TLS off over a
// factory configured for it, however the base asked for TLS, and reaches
// a plaintext cluster.
func TestPerClientPlaintextOverSSLBase(t *testing.T) {
	kc := newKfake(t)
	seeds := BootstrapServers(kc.ListenAddrs()...)
	props, err := FromProperties(map[string]string{"security.protocol": "SSL"})
	require.NoError(t, err)
	for name, base := range map[string][]Opt{
		"SecurityProtocol": {seeds, SecurityProtocol(SSL)},
		"properties":       append(props, seeds),
		"TLS":              {seeds, TLS(&tls.Config{MinVersion: tls.VersionTLS12})},
		"SASL_SSL":         {seeds, SASL(Plain, "u", "p"), TLS(&tls.Config{MinVersion: tls.VersionTLS12})},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := New(base...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = f.Close(context.Background()) })
			cl, err := f.KgoClient(SecurityProtocol(Plaintext))
			require.NoError(t, err)
			defer cl.Close()
			if name == "SecurityProtocol" {
				// Once is enough, and slow: the factory's own
				// background clients use the base, SSL, which the
				// plaintext cluster never answers.
				require.NoError(t, cl.Ping(testkit.Ctx(t)))
			}
			// The base is still SSL for the other clients.
			require.Contains(t, f.base.security.protocol().String(), "SSL")
			_, err = f.base.validate()
			require.NoError(t, err)
		})
	}
}

// TestDialTimeoutBoundsTLSHandshake: a peer that accepts the TCP connection
// and never answers the TLS handshake is given up on after the DialTimeout
// passed through KgoOpts, not left pending.
func TestDialTimeoutBoundsTLSHandshake(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	// lifetimes receives how long each accepted connection stayed open.
	lifetimes := make(chan time.Duration, 64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				start := time.Now()
				buf := make([]byte, 1024)
				for {
					if _, err := c.Read(buf); err != nil {
						select {
						case lifetimes <- time.Since(start):
						default:
						}
						return
					}
				}
			}()
		}
	}()
	f, err := New(BootstrapServers(ln.Addr().String()), TLS(&tls.Config{MinVersion: tls.VersionTLS12}),
		KgoOpts(kgo.DialTimeout(300*time.Millisecond)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	cl, err := f.KgoClient()
	require.NoError(t, err)
	defer cl.Close()
	ctx := testkit.Ctx(t)
	go func() { _ = cl.Ping(ctx) }()
	// A generous bound on a measured time: the first connection closes
	// about 300 ms after it was accepted; a handshake left to the default
	// dial timeout lives 10 s, one left to the context 30 s.
	select {
	case d := <-lifetimes:
		t.Logf("the first connection lived %v", d)
		require.Less(t, d, 5*time.Second, "the dial outlived its 300ms DialTimeout")
	case <-ctx.Done():
		t.Fatal("no dial gave up before the test's context ended, with a 300ms DialTimeout")
	}
}

// TestKgoOptsCannotUndoGuarantees: KgoOpts options that would silently
// replace the factory's cluster-check cap or rebootstrap hook are refused.
func TestKgoOptsCannotUndoGuarantees(t *testing.T) {
	seeds := BootstrapServers("127.0.0.1:1")
	capped := kversion.Stable()
	capped.SetMaxKeyVersion(18, 4) // ApiVersions: the cluster check off
	hook := kgo.OnRebootstrapRequired(func() ([]string, error) { return nil, nil })
	for name, tc := range map[string]struct {
		base   []Opt
		client []KgoClientOpt
		want   string // "" means accepted
	}{
		"MaxVersions lifts the cap": {
			[]Opt{seeds, ClusterCheck(false)}, []KgoClientOpt{KgoOpts(kgo.MaxVersions(kversion.Stable()))}, "kgo.MaxVersions"},
		"MaxVersions lifts the cap of None": {
			[]Opt{seeds, RecoveryStrategy(rebootstrap.None)}, []KgoClientOpt{KgoOpts(kgo.MaxVersions(kversion.Stable()))}, "kgo.MaxVersions"},
		"MaxVersions keeps the cap":     {[]Opt{seeds, ClusterCheck(false)}, []KgoClientOpt{KgoOpts(kgo.MaxVersions(capped))}, ""},
		"MaxVersions of an older Kafka": {[]Opt{seeds, ClusterCheck(false)}, []KgoClientOpt{KgoOpts(kgo.MaxVersions(kversion.V3_9_0()))}, ""},
		"MaxVersions with the check on": {[]Opt{seeds}, []KgoClientOpt{KgoOpts(kgo.MaxVersions(kversion.Stable()))}, ""},
		"OnRebootstrapRequired":         {[]Opt{seeds}, []KgoClientOpt{KgoOpts(hook)}, "kgo.OnRebootstrapRequired"},
		"OnRebootstrapRequired in base": {[]Opt{seeds, KgoOpts(hook)}, nil, "kgo.OnRebootstrapRequired"},
		"OnRebootstrapRequired(nil)": {
			[]Opt{seeds}, []KgoClientOpt{KgoOpts(kgo.OnRebootstrapRequired(nil))}, "kgo.OnRebootstrapRequired"},
		"OnRebootstrapRequired with None": {
			[]Opt{seeds, RecoveryStrategy(rebootstrap.None)}, []KgoClientOpt{KgoOpts(hook)}, "kgo.OnRebootstrapRequired"},
		"both": {
			[]Opt{seeds, ClusterCheck(false)}, []KgoClientOpt{KgoOpts(hook, kgo.MaxVersions(kversion.Stable()))}, "kgo.MaxVersions"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := New(tc.base...)
			require.NoError(t, err)
			t.Cleanup(func() { _ = f.Close(context.Background()) })
			cl, err := f.KgoClient(tc.client...)
			if tc.want == "" {
				require.NoError(t, err)
				cl.Close()
				return
			}
			require.ErrorIs(t, err, ErrConfig)
			require.Contains(t, err.Error(), tc.want)
			require.Nil(t, cl)
		})
	}
}

const password = "hunter2-Zq9"

// TestFactoryPrintsNoPassword: fmt with any verb and slog with either
// handler show a factory's configuration without its SASL password.
func TestFactoryPrintsNoPassword(t *testing.T) {
	f, err := New(BootstrapServers("127.0.0.1:1"), SASL(Plain, "alice", password))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x"} {
		out := fmt.Sprintf(verb, f)
		require.NotContains(t, out, password, verb)
		require.NotContains(t, out, fmt.Sprintf("%x", password), verb)
	}
	require.Contains(t, fmt.Sprintf("%+v", f), "sasl.username=alice")
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		require.NotContains(t, fmt.Sprintf(verb, f.base), password, "config "+verb)
		require.NotContains(t, fmt.Sprintf(verb, f.base.security.sasl), password, "saslConfig "+verb)
	}
	for name, h := range map[string]func(*bytes.Buffer) slog.Handler{
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
	} {
		var buf bytes.Buffer
		log := slog.New(h(&buf))
		log.Info("made", "factory", f, "base", f.base, "sasl", f.base.security.sasl, "pass", f.base.security.sasl.pass)
		require.NotContains(t, buf.String(), password, name)
		require.Contains(t, buf.String(), "alice", name)
	}
}

// TestPropertiesErrorsShowNoSecret: no error path of the properties parser
// quotes a value, which may be a password.
func TestPropertiesErrorsShowNoSecret(t *testing.T) {
	for name, file := range map[string]string{
		"bad \\u escape":       "sasl.password=" + password + `\u12zz` + password + "\n",
		"truncated \\u escape": "sasl.password=" + password + `\u12`,
		"no key":               "=" + password + "\n",
		"continued bad escape": "sasl.password=" + password + "\\\n  \\uqqqq",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseProperties(strings.NewReader(file))
			require.ErrorIs(t, err, ErrConfig)
			require.NotContains(t, err.Error(), password)
			require.NotContains(t, err.Error(), "zz")
			require.Contains(t, err.Error(), "line ")
		})
	}
	_, err := ParseProperties(strings.NewReader("a=b\nsasl.password=x\\u00"))
	require.ErrorContains(t, err, `line 2: value of "sasl.password"`)
	// The password is never checked today; should it ever be, its errors
	// stay quiet.
	_, err = FromProperties(map[string]string{"sasl.password": password})
	require.NotContains(t, err.Error(), password)
}

// TestPropertiesEdgeCases: overflowing durations, SASL or SSL keys without
// the protocol that uses them.
func TestPropertiesEdgeCases(t *testing.T) {
	for name, tc := range map[string]struct {
		props map[string]string
		want  []string
	}{
		"overflowing linger.ms": {
			map[string]string{"linger.ms": "9223372036854775807"},
			[]string{"linger.ms", "9223372036854775807", "maximum, 9223372036854"}},
		"linger.ms beyond int64": {
			map[string]string{"linger.ms": "99999999999999999999"},
			[]string{"linger.ms", "maximum, 9223372036854"}},
		"first overflowing ms": {
			map[string]string{"request.timeout.ms": "9223372036855"},
			[]string{"request.timeout.ms", "maximum"}},
		"sasl without security.protocol": {
			map[string]string{"sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": password},
			[]string{"sasl.mechanism, sasl.password, sasl.username: given, but security.protocol is not set"}},
		"sasl with SSL": {
			map[string]string{"security.protocol": "ssl", "sasl.mechanism": "PLAIN"},
			[]string{"sasl.mechanism: given, but security.protocol is SSL"}},
		"ssl with SASL_PLAINTEXT": {
			map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "ssl.ca.location": "ca.pem"},
			[]string{"ssl.ca.location: given, but security.protocol is SASL_PLAINTEXT"}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := FromProperties(tc.props)
			require.ErrorIs(t, err, ErrConfig)
			for _, w := range tc.want {
				require.Contains(t, err.Error(), w)
			}
			require.NotContains(t, err.Error(), password)
		})
	}
	cfg := apply(t, map[string]string{"linger.ms": "9223372036854"})
	require.Equal(t, time.Duration(9223372036854)*time.Millisecond, cfg.produce.linger)
}

// TestPropertiesByteOrderMark: a file saved with a UTF-8 BOM keeps its
// first key.
func TestPropertiesByteOrderMark(t *testing.T) {
	props, err := ParseProperties(strings.NewReader("\uFEFFbootstrap.servers=a:1\n"))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"bootstrap.servers": "a:1"}, props)
}

// TestPropertiesLongLine: a line over the limit is named.
func TestPropertiesLongLine(t *testing.T) {
	long := "a=b\n# fine\nc=" + strings.Repeat("x", 2<<20) + "\nd=e\n"
	_, err := ParseProperties(strings.NewReader(long))
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "line 3")
}

// FuzzPropertiesSecret: whatever surrounds it, a password in the value of
// sasl.password never shows in a parse or configuration error.
func FuzzPropertiesSecret(f *testing.F) {
	f.Add("", "", "")
	f.Add("", `\u12`, "")
	f.Add(`\uzzzz`, "", "linger.ms=soon")
	f.Add("", "\\", `  \u0`)
	f.Add(`\t`, " x", "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI")
	f.Fuzz(func(t *testing.T, before, after, rest string) {
		if strings.Contains(before, "\n") || strings.Contains(rest, password) {
			return // the password would not be sasl.password's alone
		}
		in := "sasl.password=" + before + password + after + "\n" + rest
		props, err := ParseProperties(strings.NewReader(in))
		if err == nil {
			_, err = FromProperties(props)
		}
		if err != nil {
			require.ErrorIs(t, err, ErrConfig)
			require.NotContains(t, err.Error(), password)
		}
	})
}
