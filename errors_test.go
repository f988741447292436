package kconsist_test

import (
	"crypto/x509"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist"
)

func TestAuthError(t *testing.T) {
	cause := x509.UnknownAuthorityError{}
	for _, tc := range []struct {
		name string
		err  *kconsist.AuthError
		want string
	}{
		{"record", &kconsist.AuthError{Topic: "orders", Err: cause, Gave: kgo.ErrAborting},
			"kconsist: record to orders not delivered: the cluster refuses the client: " + cause.Error()},
		{"poll", &kconsist.AuthError{Err: cause},
			"kconsist: the cluster refuses the client: " + cause.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.want {
				t.Fatalf("Error() = %q, want %q", got, tc.want)
			}
			var wrapped error = tc.err
			var ua x509.UnknownAuthorityError
			if !errors.As(wrapped, &ua) {
				t.Fatal("errors.As does not reach the cause")
			}
			if got := errors.Is(wrapped, kgo.ErrAborting); got != (tc.err.Gave != nil) {
				t.Fatalf("errors.Is(ErrAborting) = %v with Gave %v", got, tc.err.Gave)
			}
		})
	}
}
