package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/internal/wire"
)

// IsAuthFailure reports whether err says the cluster refused the client's
// credentials or TLS settings, or the client refused the cluster's
// certificate: SASL failures, certificate verification errors (unknown
// authority, another host's certificate, expired), TLS alerts from the
// broker, and a plaintext listener met with TLS. Trying again with the same
// configuration cannot help, which is why the Java client fails sends at once
// with SaslAuthenticationException or SslAuthenticationException.
//
// A connection refused or cut is no such failure.
func IsAuthFailure(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) ||
		errors.Is(err, wire.ErrNotTLS) {
		return true
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true // the peer answered, but not in TLS
	}
	// A TLS alert from the peer (bad_certificate, unknown_ca,
	// handshake_failure...) comes as a net.OpError whose Op is this; its
	// alert type is not exported.
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Op == "remote error" {
		return true
	}
	return false
}

// Probes that fail back off exponentially, with jitter so that a fleet of
// processes started together does not probe in step.
const (
	probeBackoffMin = 100 * time.Millisecond
	probeBackoffMax = 5 * time.Second
	// After an authentication or TLS failure no probe is made for a
	// quiet period, which doubles with each such failure in a row.
	authQuietMin = time.Second
	authQuietMax = 30 * time.Second
)

// jitter returns a duration in [d/2, d].
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// authQuiet is the quiet period after n authentication failures in a row.
func authQuiet(n int) time.Duration {
	d := authQuietMin
	for i := 1; i < n && d < authQuietMax; i++ {
		d *= 2
	}
	return jitter(min(d, authQuietMax))
}

// failure is an authentication or TLS failure of the last probe.
type failure struct {
	err   error
	until time.Time // no probe before
	// rechecked: a check was already asked for once until passed.
	rechecked atomic.Bool
}
