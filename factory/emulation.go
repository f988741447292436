package factory

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

// ConsistencyMode says where a factory's consistency tokens come from.
type ConsistencyMode uint8

const (
	// ModeAuto, the default: tokens from brokers that send them
	// (KIP-1243), tokens made from KRaft's own offsets on brokers that do
	// not (Apache Kafka 3.x and 4.x), and plain franz-go behaviour, with
	// one warning and an EventConsistencyOff, where neither works
	// (DescribeQuorum refused by ACLs, no FinalizedFeaturesEpoch).
	ModeAuto ConsistencyMode = iota
	// ModeNative uses only tokens that brokers send in response headers:
	// on a broker without KIP-1243 the clients are as stale as plain
	// franz-go.
	ModeNative
	// ModeEmulated makes tokens from KRaft offsets for every broker, even
	// one that sends tokens of its own. Mostly for tests and comparisons.
	ModeEmulated
	// ModeOff sends and keeps no tokens: plain franz-go behaviour, with
	// the KIP-1242 misroute protection still on.
	ModeOff
)

// String returns the property value of m.
func (m ConsistencyMode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeEmulated:
		return "emulated"
	case ModeOff:
		return "off"
	}
	return "ConsistencyMode(" + strconv.Itoa(int(m)) + ")"
}

// ParseConsistencyMode parses the consistency.mode property: auto, native,
// emulated or off.
func ParseConsistencyMode(s string) (ConsistencyMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "auto":
		return ModeAuto, nil
	case "native":
		return ModeNative, nil
	case "emulated":
		return ModeEmulated, nil
	case "off":
		return ModeOff, nil
	}
	return 0, fmt.Errorf("%w: consistency.mode %q: want auto, native, emulated or off", ErrConfig, s)
}

// Consistency sets where tokens come from (property consistency.mode);
// the default is ModeAuto. It is a factory-wide setting: given to a single
// client it is an error.
func Consistency(m ConsistencyMode) Opt {
	return opt(func(c *config) {
		if m > ModeOff {
			c.fail("consistency.mode: unknown mode %d", m)
			return
		}
		c.mode = m
	})
}

// noTokens is the store of a ModeOff factory's clients: always Unknown, so
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
	f *Factory

	mu     sync.Mutex
	cl     *kgo.Client
	closed bool
	nodes  map[string]int32 // broker address → node id, seeds included
}

func (o *oracle) client() (*kgo.Client, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, ErrClosed
	}
	if o.cl == nil {
		cl, err := o.f.newKgo(o.f.base, noTokens{}, nil, false)
		if err != nil {
			return nil, err
		}
		o.cl = cl
		o.nodes = seedNodes(o.f.base.seeds)
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

// startEmulation makes the factory's Emulator in ModeAuto and ModeEmulated.
func (f *Factory) startEmulation() error {
	if f.base.mode == ModeOff {
		return nil
	}
	f.oracle = &oracle{f: f} // also checks and heals tokens (tokens.go)
	f.healer = &healer{f: f}
	if f.base.mode == ModeNative {
		return nil
	}
	emu, err := wire.NewEmulator(wire.EmulationConfig{
		Store:    f.store,
		Oracle:   f.oracle,
		Force:    f.base.mode == ModeEmulated,
		Logger:   kgoLogger(f.base.logger),
		OnHealed: f.healed,
		OnOff: func(reason error) {
			if o := f.base.observer; o != nil {
				o.OnEvent(Event{Kind: EventConsistencyOff, Err: reason})
			}
		},
	})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	f.emu = emu
	return nil
}
