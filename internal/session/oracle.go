package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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

// oracle answers the emulator's questions with a franz-go client of its
// own, made on first use. Its connections go through an interceptor
// without the emulator (it must not ask itself) on a store that stays
// Unknown, so it never stamps.
type oracle struct {
	s *Session

	mu     sync.Mutex
	cl     *kgo.Client
	closed bool
	nodes  map[string]int32 // broker address → node id, seeds included
}

func (o *oracle) client() (*kgo.Client, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, o.s.cfg.ErrClosed
	}
	if o.cl == nil {
		cl, err := o.s.newKgo(o.s.cfg.Base, noTokens{}, false)
		if err != nil {
			return nil, err
		}
		o.cl = cl
		o.nodes = seedNodes(o.s.cfg.Base.Seeds)
	}
	return o.cl, nil
}

func (o *oracle) close() {
	o.mu.Lock()
	cl := o.cl
	o.cl, o.closed = nil, true
	o.mu.Unlock()
	if cl != nil {
		cl.Close()
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
	cl, err := o.client()
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

// healer checks the store against the committed offset after an
// INCONSISTENT_METADATA answer (the emulator checks on its own waits), at
// most once a second, on a goroutine Close waits for.
type healer struct {
	s       *Session
	running atomic.Bool
	last    atomic.Int64
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
}

func (h *healer) soon() {
	now := time.Now().UnixNano()
	last := h.last.Load()
	if now-last < int64(time.Second) || !h.running.CompareAndSwap(false, true) {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.running.Store(false)
		return
	}
	h.last.Store(now)
	h.wg.Go(func() {
		defer h.running.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		from, to, healed, err := wire.Heal(ctx, h.s.store, h.s.oracle)
		if err == nil && healed {
			h.s.healed(from, to)
		}
	})
}

func (h *healer) close() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
	h.wg.Wait()
}

// healed reports a store lowered to the committed offset.
func (s *Session) healed(from, to consistency.Token) {
	if s.cfg.OnTokenHealed != nil {
		s.cfg.OnTokenHealed(from, to)
	}
}
