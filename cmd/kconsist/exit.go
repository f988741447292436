package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
)

// Exit statuses; see the package doc and README.md.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitTimeout     = 3
	exitUnreachable = 4
	exitWrongClust  = 5
	exitBadToken    = 6
	exitAuth        = 7
)

// exitNames name the statuses in JSON output.
var exitNames = map[int]string{
	exitOK:          "ok",
	exitFailed:      "failed",
	exitUsage:       "usage",
	exitTimeout:     "timeout",
	exitUnreachable: "unreachable",
	exitWrongClust:  "wrong_cluster",
	exitBadToken:    "bad_token",
	exitAuth:        "auth",
}

// usageError is bad input from the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// resultError is an error after which the command still has results to
// report: with -o json its fields join the error's object.
type resultError struct {
	err error
	out map[string]any
}

func (e resultError) Error() string { return e.err.Error() }
func (e resultError) Unwrap() error { return e.err }

// unreachableError says no broker of the bootstrap servers answered.
type unreachableError struct{ err error }

func (e unreachableError) Error() string {
	return "the cluster could not be reached: " + e.err.Error()
}
func (e unreachableError) Unwrap() error { return e.err }

// exitCode returns the exit status for err.
func exitCode(err error) int {
	var terr *factory.TokenError
	var aerr *kconsist.AuthError
	var uerr usageError
	var nerr unreachableError
	switch {
	case err == nil:
		return exitOK
	case isAuth(err), errors.As(err, &aerr):
		return exitAuth
	case errors.As(err, &terr) && errors.Is(err, consistency.ErrClusterMismatch):
		return exitWrongClust
	case errors.As(err, &terr), errors.Is(err, consistency.ErrMalformedToken), errors.Is(err, consistency.ErrInvalidToken):
		return exitBadToken
	case errors.Is(err, factory.ErrBrokersBehind):
		return exitTimeout
	case errors.As(err, &uerr), errors.Is(err, factory.ErrConfig):
		return exitUsage
	case errors.As(err, &nerr):
		return exitUnreachable
	case errors.Is(err, context.DeadlineExceeded):
		return exitTimeout
	}
	var oerr *net.OpError
	var dnsErr *net.DNSError
	if errors.As(err, &oerr) || errors.As(err, &dnsErr) {
		return exitUnreachable
	}
	return exitFailed
}

// isAuth reports an authentication failure: SASL refused, or a TLS
// certificate that did not verify, on either side.
func isAuth(err error) bool {
	for _, e := range []error{kerr.SaslAuthenticationFailed, kerr.IllegalSaslState, kerr.UnsupportedSaslMechanism} {
		if errors.Is(err, e) {
			return true
		}
	}
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError
	return errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &alert)
}
