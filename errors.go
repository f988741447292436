// Package kconsist holds what every client of the SDK shares: the errors
// a caller branches on whichever client returned them. The clients
// themselves come from package factory; see the README for the map of
// packages.
package kconsist

import "fmt"

// AuthError reports that the cluster refuses the client: SASL
// authentication failed, or TLS did not verify (either side's
// certificate). errors.As finds it in what a producer or a consumer of a
// factory returns (an admin client and KgoClient return franz-go's own
// errors), and errors.Is / errors.As on the cause (Err) work as on
// franz-go's own error.
//
// franz-go retries a connection that fails SASL or certificate checks as
// it would a broker that is down, so records wait for their delivery
// timeout and polls for their whole context, the cause only in the logs.
// The Java clients fail at once with SaslAuthenticationException or
// SslAuthenticationException; a factory's clients do the same while the
// security settings are the factory's own: records and polls fail with
// an AuthError as soon as the failure is found, and at once while it
// holds. The factory checks again now and then, and the clients work again
// once the cluster accepts them.
type AuthError struct {
	// Topic is the topic of the record that was not delivered; empty for
	// a consumer's poll or an admin request.
	Topic string
	// Err is the authentication or TLS failure.
	Err error
	// Gave is what franz-go failed a record with when the failure was
	// found while it held the record (kgo.ErrAborting), or nil.
	Gave error
}

func (e *AuthError) Error() string {
	if e.Topic != "" {
		return fmt.Sprintf("kconsist: record to %s not delivered: the cluster refuses the client: %v", e.Topic, e.Err)
	}
	return fmt.Sprintf("kconsist: the cluster refuses the client: %v", e.Err)
}

// Unwrap returns the cause and, if any, franz-go's error.
func (e *AuthError) Unwrap() []error {
	if e.Gave == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.Gave}
}
