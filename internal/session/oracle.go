package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/wire"
)

// noTokens is the store of the clients of a session that keeps no tokens: always Unknown, so
// nothing is stamped and nothing is kept.
type noTokens struct{}

func (noTokens) Load() consistency.Token { return consistency.Unknown() }
func (noTokens) Advance(consistency.Token) (consistency.Token, error) {
	return consistency.Unknown(), nil
}
func (noTokens) Reset()                                          {}
func (noTokens) CompareAndSwap(old, next consistency.Token) bool { return false }

// oracle answers the emulator's and the healer's questions with two
// franz-go clients of its own, made on first use: one asks the quorum
// (Committed), the other asks single brokers how far they applied
// (Applied). Two, because a broker answers a connection's requests in
// order: a DescribeQuorum the broker cannot answer (its controller is
// gone) would otherwise hold every ApiVersions probe queued behind it on
// the same connection, and with them every metadata answer the emulator
// learns from. Their connections go through an interceptor without the
// emulator (it must not ask itself) on a store that stays Unknown, so they
// never stamp.
type oracle struct {
	s *Session

	mu     sync.Mutex
	quorum *kgo.Client // Committed, AskCluster
	probes *kgo.Client // Applied
	closed bool
	nodes  map[string]int32 // broker address → node id, seeds included
}

// clients returns the quorum and the probe clients.
func (o *oracle) clients() (quorum, probes *kgo.Client, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, nil, o.s.cfg.ErrClosed
	}
	if o.quorum == nil {
		q, err := o.s.newKgo(o.s.cfg.Base, noTokens{}, false)
		if err != nil {
			return nil, nil, err
		}
		p, err := o.s.newKgo(o.s.cfg.Base, noTokens{}, false)
		if err != nil {
			q.Close()
			return nil, nil, err
		}
		o.quorum, o.probes = q, p
		o.nodes = seedNodes(o.s.cfg.Base.Seeds)
	}
	return o.quorum, o.probes, nil
}

func (o *oracle) client() (*kgo.Client, error) {
	q, _, err := o.clients()
	return q, err
}

func (o *oracle) close() {
	o.mu.Lock()
	q, p := o.quorum, o.probes
	o.quorum, o.probes, o.closed = nil, nil, true
	o.mu.Unlock()
	if q != nil {
		q.Close()
		p.Close()
	}
}

// seedNodes maps each bootstrap server to the id franz-go gives it
// (math.MinInt32 plus its index), for connections made to a seed.
func seedNodes(seeds []string) map[string]int32 {
	m := make(map[string]int32, len(seeds))
	for i, s := range seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			s = net.JoinHostPort(s, "9092")
		}
		m[s] = int32(-1<<31 + i)
	}
	return m
}

// Committed returns the cluster id and the last committed offset of its
// metadata log.
func (o *oracle) Committed(ctx context.Context) (consistency.Token, error) {
	cl, err := o.client()
	if err != nil {
		return consistency.Token{}, err
	}
	var (
		cluster string
		hwm     int64
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		c, err := o.refresh(gctx, cl)
		cluster = c
		return err
	})
	g.Go(func() error {
		req := kmsg.NewPtrDescribeQuorumRequest()
		t := kmsg.NewDescribeQuorumRequestTopic()
		t.Topic = "__cluster_metadata"
		p := kmsg.NewDescribeQuorumRequestTopicPartition()
		t.Partitions = append(t.Partitions, p)
		req.Topics = append(req.Topics, t)
		resp, err := req.RequestWith(gctx, cl)
		if err != nil {
			if unsupported(err) {
				return fmt.Errorf("%w: the brokers do not answer DescribeQuorum: %w", wire.ErrEmulationUnsupported, err)
			}
			return fmt.Errorf("DescribeQuorum: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("DescribeQuorum: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return fmt.Errorf("DescribeQuorum: answer without the metadata partition")
		}
		part := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			return fmt.Errorf("DescribeQuorum: %w", err)
		}
		hwm = part.HighWatermark
		return nil
	})
	if err := g.Wait(); err != nil {
		return consistency.Token{}, err
	}
	if hwm < 1 {
		return consistency.Token{}, fmt.Errorf("DescribeQuorum: high watermark %d", hwm)
	}
	return consistency.Of(cluster, hwm-1)
}

// unsupported reports whether err says the broker does not know the
// request at all (franz-go checks ApiVersions before it sends one).
func unsupported(err error) bool {
	return errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old")
}

// refresh asks for the cluster's brokers (no topics), notes their
// addresses and returns the cluster id.
func (o *oracle) refresh(ctx context.Context, cl *kgo.Client) (string, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return "", fmt.Errorf("metadata request: %w", err)
	}
	o.mu.Lock()
	for _, b := range resp.Brokers {
		o.nodes[net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))] = b.NodeID
	}
	o.mu.Unlock()
	if resp.ClusterID == nil || *resp.ClusterID == "" {
		return "", fmt.Errorf("metadata answer names no cluster id")
	}
	return *resp.ClusterID, nil
}

// Applied returns the FinalizedFeaturesEpoch of the broker at addr.
func (o *oracle) Applied(ctx context.Context, addr string) (int64, error) {
	_, cl, err := o.clients()
	if err != nil {
		return -1, err
	}
	o.mu.Lock()
	id, ok := o.nodes[addr]
	o.mu.Unlock()
	if !ok {
		if _, err := o.refresh(ctx, cl); err != nil {
			return -1, err
		}
		o.mu.Lock()
		id, ok = o.nodes[addr]
		o.mu.Unlock()
		if !ok {
			return -1, fmt.Errorf("no broker of the cluster has the address %s", addr)
		}
	}
	req := kmsg.NewPtrApiVersionsRequest()
	// Brokers refuse ApiVersions v3+ (INVALID_REQUEST) without a valid
	// client software name and version.
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kconsist", "1"
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return -1, fmt.Errorf("ApiVersions to %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return -1, fmt.Errorf("ApiVersions to %s: %w", addr, err)
	}
	return resp.FinalizedFeaturesEpoch, nil
}

var _ wire.Oracle = (*oracle)(nil)

// replaces reports whether the healer may replace a store's token of
// another cluster than cluster, the bootstrap servers' one, by cluster's
// committed offset: not when the factory is pinned (it never follows),
// nor when the watcher knows another cluster behind the bootstrap
// servers (a cluster change, which the watcher reports and resets for).
func (s *Session) replaces(cluster string) bool {
	if s.cfg.Base.Pin != "" {
		return false
	}
	known := s.watcher.Cluster()
	return known == "" || known == cluster
}

// healed reports a store lowered to the committed offset.
func (s *Session) healed(from, to consistency.Token) {
	if s.cfg.OnTokenHealed != nil {
		s.cfg.OnTokenHealed(from, to)
	}
}
