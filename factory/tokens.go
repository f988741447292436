package factory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/wire"
)

// Tokens from outside.
//
// A token handed over by another service is input, not truth. A token
// beyond the cluster's committed metadata offset can never be reached by
// any broker: every client that carried it would wait, then fail, for as
// long as it is held. So a factory takes tokens from outside only through
// CheckToken, Accept and WithToken, which ask the cluster first, and it
// heals a store that holds such a token anyway (put there through
// Store().Advance, or left by a metadata log restored under the same
// cluster id): the first request that waits too long, or an
// INCONSISTENT_METADATA answer, has the token checked against the
// committed offset, and the store is lowered to it with an
// EventTokenHealed and one warning.

// TokenError says why a token from outside was refused. It matches
// consistency.ErrFutureToken or consistency.ErrClusterMismatch with
// errors.Is.
type TokenError struct {
	Token consistency.Token
	// Cluster is the id of the cluster the bootstrap servers belong to.
	Cluster string
	// Committed is the cluster's committed metadata offset, or -1 when the
	// cluster was not asked (a token of another cluster).
	Committed int64
}

func (e *TokenError) Error() string {
	if e.Token.ClusterID() != e.Cluster {
		return fmt.Sprintf("factory: token %v names cluster %q, but the bootstrap servers belong to cluster %q", e.Token, e.Token.ClusterID(), e.Cluster)
	}
	return fmt.Sprintf("factory: token %v is beyond cluster %q's committed metadata offset %d: no broker can reach it (forged, or from a restored metadata log)", e.Token, e.Cluster, e.Committed)
}

// Is matches consistency.ErrClusterMismatch for a token of another cluster
// and consistency.ErrFutureToken for one from the future.
func (e *TokenError) Is(target error) bool {
	if e.Token.ClusterID() != e.Cluster {
		return target == consistency.ErrClusterMismatch
	}
	return target == consistency.ErrFutureToken
}

// CheckToken asks the cluster behind the bootstrap servers whether tok can
// be waited for: it must name that cluster, and an offset not beyond the
// committed end of its metadata log (DescribeQuorum's high watermark). It
// returns nil for an Unknown token, a *TokenError for a bad one, and
// another error when the cluster could not be asked. A cluster that
// refuses DescribeQuorum (ACLs) cannot have the offset checked: the
// cluster id still is, and the offset is accepted, bounded by the waits
// and the healing described above.
func (f *Factory) CheckToken(ctx context.Context, tok consistency.Token) error {
	if tok.IsUnknown() {
		return nil
	}
	if f.base.mode == ModeOff {
		return fmt.Errorf("%w: consistency.mode is off: the factory keeps no tokens", ErrConfig)
	}
	cluster, err := f.s.AskCluster(ctx)
	if err != nil {
		return fmt.Errorf("factory: checking token %v: %w", tok, err)
	}
	if cluster != tok.ClusterID() {
		return &TokenError{Token: tok, Cluster: cluster, Committed: -1}
	}
	committed, err := f.s.Committed(ctx)
	switch {
	case errors.Is(err, wire.ErrEmulationUnsupported), errors.Is(err, kerr.ClusterAuthorizationFailed):
		f.logger().Debug("the committed metadata offset cannot be asked; the token's offset is not checked", "token", tok.String(), "err", err)
		return nil
	case err != nil:
		return fmt.Errorf("factory: checking token %v: %w", tok, err)
	case tok.Offset() > committed.Offset():
		return &TokenError{Token: tok, Cluster: cluster, Committed: committed.Offset()}
	}
	return nil
}

// Accept checks tok (see CheckToken) and merges it into the factory's
// shared store: every client of the factory then waits for it. Prefer
// WithToken, which confines a token to the work it came with.
func (f *Factory) Accept(ctx context.Context, tok consistency.Token) (consistency.Token, error) {
	if err := f.CheckToken(ctx, tok); err != nil {
		return f.Token(), err
	}
	return f.s.Tokens().Hand(tok)
}

// WithToken checks tok (see CheckToken) and returns a factory for the work
// that came with it: its clients wait for tok as well as for everything
// the factory knows, and what they learn from brokers goes to the shared
// store, but tok itself never raises the store of the factory's other
// clients (consistency.HandedStore). Close its clients, then it, before
// the factory; it holds no connections of its own.
func (f *Factory) WithToken(ctx context.Context, tok consistency.Token) (*Factory, error) {
	if err := f.CheckToken(ctx, tok); err != nil {
		return nil, err
	}
	s, err := f.s.Child(tok)
	if err != nil {
		return nil, err
	}
	return &Factory{base: f.base, s: s, events: f.events, emitter: f.emitter}, nil
}

func (f *Factory) logger() *slog.Logger {
	if f.base.logger != nil {
		return f.base.logger
	}
	return slog.New(slog.DiscardHandler)
}
