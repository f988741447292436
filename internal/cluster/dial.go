package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// Dialer returns a dial function that resolves the host of every address it
// is asked for with resolve, then dials the addresses in turn with base. It
// never caches an answer, so a rebootstrap reaches whatever the bootstrap
// names resolve to now.
func Dialer(resolve func(ctx context.Context, host string) ([]string, error), base func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if base == nil {
		d := &net.Dialer{Timeout: 10 * time.Second}
		base = d.DialContext
	}
	if resolve == nil {
		return base
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if net.ParseIP(host) != nil {
			return base(ctx, network, addr)
		}
		ips, err := resolve(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("resolve %s: no addresses", host)
		}
		var errs []error
		for _, ip := range ips {
			c, err := base(ctx, network, net.JoinHostPort(ip, port))
			if err == nil {
				return c, nil
			}
			errs = append(errs, err)
		}
		return nil, errors.Join(errs...)
	}
}
