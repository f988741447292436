package rebootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Strategy is metadata.recovery.strategy.
type Strategy int8

const (
	// Rebootstrap re-resolves the bootstrap servers and rediscovers the
	// cluster when the client's view is wrong. The default.
	Rebootstrap Strategy = iota
	// None never rebootstraps; the cluster check is off too, since a client
	// that cannot rebootstrap cannot act on it.
	None
)

// ParseStrategy parses the values of metadata.recovery.strategy
// ("rebootstrap", "none"; case-insensitive, as in the Java client).
func ParseStrategy(s string) (Strategy, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "rebootstrap":
		return Rebootstrap, nil
	case "none":
		return None, nil
	}
	return 0, fmt.Errorf("metadata.recovery.strategy: %q is not one of rebootstrap, none", s)
}

func (s Strategy) String() string {
	if s == None {
		return "none"
	}
	return "rebootstrap"
}

// ErrClusterChanged is reported when the client finds itself talking to a
// cluster other than the one it knew (or was pinned to).
var ErrClusterChanged = errors.New("rebootstrap: cluster changed")

// ClusterChangedError names both cluster ids. It satisfies
// errors.Is(err, ErrClusterChanged).
type ClusterChangedError struct{ From, To string }

func (e *ClusterChangedError) Error() string {
	return fmt.Sprintf("rebootstrap: cluster changed from %q to %q", e.From, e.To)
}

// Is reports whether target is ErrClusterChanged.
func (e *ClusterChangedError) Is(target error) bool { return target == ErrClusterChanged }

// Resolver resolves a host name to addresses, for factory.Resolver (custom
// service discovery, tests); net.DefaultResolver.LookupHost is the default.
// The factory calls it on every dial and never caches an answer, so a
// rebootstrap reaches whatever the bootstrap names resolve to now.
type Resolver func(ctx context.Context, host string) ([]string, error)
