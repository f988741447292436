package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Locate asks the bootstrap servers where node of cluster lives now and
// returns its host:port.
type Locate func(ctx context.Context, cluster string, node int32) (string, error)

// ErrNotListed is matched (errors.Is) by Locate's error when the bootstrap
// servers answered but do not list the node.
var ErrNotListed = errors.New("the bootstrap servers do not list the broker")

// ErrOtherCluster is matched (errors.Is) by Locate's error when the
// bootstrap servers belong to another cluster than the one asked about (or
// do not say which).
var ErrOtherCluster = errors.New("the bootstrap servers belong to another cluster")

// SeedLocate returns a Locate that sends one Metadata request, for no
// topics, to the seed brokers of a client made by newClient (closed after
// each call), as SeedProbe does: only the bootstrap servers can say where a
// broker went, since the broker's old address may lead anywhere now. The
// first seed that answers decides.
func SeedLocate(newClient func() (*kgo.Client, error)) Locate {
	return func(ctx context.Context, cluster string, node int32) (string, error) {
		cl, err := newClient()
		if err != nil {
			return "", err
		}
		defer cl.Close()
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		var errs []error
		for _, b := range cl.SeedBrokers() {
			resp, err := b.Request(ctx, req)
			if err != nil {
				errs = append(errs, err)
				if ctx.Err() != nil {
					break
				}
				continue
			}
			return nodeAddr(resp.(*kmsg.MetadataResponse), cluster, node)
		}
		return "", fmt.Errorf("no seed answered: %w", errors.Join(errs...))
	}
}

// nodeAddr returns where m says node of cluster is.
func nodeAddr(m *kmsg.MetadataResponse, cluster string, node int32) (string, error) {
	if m.ClusterID == nil || *m.ClusterID != cluster {
		got := "none"
		if m.ClusterID != nil {
			got = strconv.Quote(*m.ClusterID)
		}
		return "", fmt.Errorf("%w: asked about broker %d of cluster %q, the seed names cluster %s", ErrOtherCluster, node, cluster, got)
	}
	for _, b := range m.Brokers {
		if b.NodeID == node {
			if b.Host == "" || b.Port <= 0 || b.Port > 65535 {
				return "", fmt.Errorf("the seed lists broker %d of cluster %q at an invalid address %q port %d", node, cluster, b.Host, b.Port)
			}
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return "", fmt.Errorf("%w: broker %d of cluster %q", ErrNotListed, node, cluster)
}
