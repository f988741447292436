package session

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/cluster"
	"github.com/kconsist/kconsist/internal/wire"
	"github.com/kconsist/kconsist/rebootstrap"
)

// relocator returns the wire layer's Relocator for cl, a client built from
// b, or nil when cl's connections are not checked by KIP-1242 (the check is
// what makes a redirected connection safe, see internal/wire/relocate.go),
// cl is one of the session's own clients, or cl has bootstrap servers or
// security settings of its own: the bootstrap servers are asked with the
// watcher's probe client, built from the session's base, since a client
// built from b would carry b's consumer options (topics, a group) and
// start consuming.
//
// It is why a broker that moves (its old address now leads to another
// cluster) costs a producer no backoff: the first dial after the close
// asks the bootstrap servers where the broker went and goes there, instead
// of being refused by the other cluster and rebootstrapping under a
// request that then waits out the retry backoff.
func (s *Session) relocator(b Build, cl *kgo.Client, shared bool) wire.Relocator {
	if !shared || !b.BaseSecurity || !b.ClusterCheck || b.Strategy == rebootstrap.None {
		return nil
	}
	return &relocator{
		cl:    cl,
		seeds: seedSet(b.Seeds),
		// As the watcher's probe: a store of its own that stays
		// Unknown (no token is sent), no check to rebootstrap on.
		locate: cluster.SeedLocate(func() (*kgo.Client, error) {
			return s.newKgo(s.cfg.Base, consistency.NewMemoryStore(), false)
		}),
	}
}

// relocator is a wire.Relocator over the bootstrap servers of one client.
type relocator struct {
	cl     *kgo.Client
	seeds  map[string]bool
	locate cluster.Locate
}

// Locate implements wire.Relocator. A bootstrap server's address is never
// followed: kgo's connections to it name no node, so the broker at a new
// address could not check them.
func (r *relocator) Locate(ctx context.Context, addr, clusterID string, node int32) (string, error) {
	if r.seeds[normalAddr(addr)] {
		return "", nil
	}
	return r.locate(ctx, clusterID, node)
}

// Relocated implements wire.Relocator: the client asks for metadata now,
// learns the node's new address and dials it from then on.
func (r *relocator) Relocated(string, string, int32) {
	r.cl.ForceMetadataRefresh()
}
