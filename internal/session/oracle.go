package session

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
// never stamp; they keep kgo's KIP-1242 check (ApiVersions v5 naming the
// cluster and node) unless the factory turned it off, so that a broker of
// another cluster at a known address refuses them rather than answer.
type oracle struct {
	s *Session

	mu     sync.Mutex
	quorum *kgo.Client // Committed, AskCluster
	probes *kgo.Client // Applied
	closed bool
	// nodes maps broker addresses to node ids, seeds included, as of the
	// last Metadata answer (cluster's): replaced, not merged, so that it
	// holds no more than the cluster's brokers and a reused address maps
	// to its new node.
	nodes   map[string]int32
	cluster string
}

// clients returns the quorum and the probe clients.
func (o *oracle) clients() (quorum, probes *kgo.Client, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, nil, o.s.cfg.ErrClosed
	}
	if o.quorum == nil {
		b := o.s.cfg.Base
		b.checked = true
		q, err := o.s.newKgo(b, noTokens{}, false)
		if err != nil {
			return nil, nil, err
		}
		p, err := o.s.newKgo(b, noTokens{}, false)
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

// renew drops the clients and the node map after the bootstrap servers
// moved to another cluster; the next question makes new ones. The old
// clients name the old cluster in their ApiVersions v5, which the new
// cluster's brokers refuse (KIP-1242): a question then waited for the
// client's rebootstrap, which its interceptor paces after a refusal
// (80 ms), and with it every metadata answer held for that question (the
// first Metadata of a producer's client made for the new cluster, in a
// DR address switch).
func (o *oracle) renew() {
	o.mu.Lock()
	q, p := o.quorum, o.probes
	if o.closed {
		q, p = nil, nil
	} else {
		o.quorum, o.probes, o.nodes, o.cluster = nil, nil, nil, ""
	}
	o.mu.Unlock()
	if q != nil {
		q.Close() // fails its questions in flight: they are asked again
		p.Close()
	}
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
// metadata log, both of one cluster: the DescribeQuorum goes to one broker
// between two Metadata answers, the second from that same broker, and
// both must name the same cluster. (DescribeQuorum names no cluster; asked
// of any broker beside a Metadata asked of any other, the two could come
// from two clusters behind one list of bootstrap servers, and a heal
// would then lower a store to another cluster's offset under its own id.)
//
// The broker Metadata names as controller is asked first; when it does
// not answer (KRaft lists a crashed broker, and may name it controller,
// until it is fenced, seconds later; a quorum electing a new leader
// answers with an error), every other broker of the answer is asked in
// turn, each within its share of what is left of ctx. A refusal no other
// broker would answer otherwise (DescribeQuorum unknown or not
// authorized) ends it at once.
func (o *oracle) Committed(ctx context.Context) (consistency.Token, error) {
	cl, err := o.client()
	if err != nil {
		return consistency.Token{}, err
	}
	m, err := o.metadata(ctx, cl)
	if err != nil {
		return consistency.Token{}, err
	}
	ids := askOrder(m)
	if len(ids) == 0 {
		return consistency.Token{}, errors.New("metadata answer lists no broker")
	}
	var errs []error
	for i, id := range ids {
		tctx, cancel := shareOf(ctx, len(ids)-i)
		c, err := o.committedFrom(tctx, cl.Broker(int(id)), id, *m.ClusterID)
		cancel()
		if err == nil {
			return c, nil
		}
		if errors.Is(err, wire.ErrEmulationUnsupported) || errors.Is(err, kerr.ClusterAuthorizationFailed) || errors.Is(err, errMixed) || ctx.Err() != nil {
			return consistency.Token{}, err
		}
		errs = append(errs, fmt.Errorf("broker %d: %w", id, err))
	}
	return consistency.Token{}, fmt.Errorf("no broker answered DescribeQuorum: %w", errors.Join(errs...))
}

// errMixed: the two Metadata answers around a DescribeQuorum named two
// clusters.
var errMixed = errors.New("the committed offset is of neither cluster")

// committedFrom asks broker id of the cluster named cluster for the
// committed offset, then for Metadata, which must name the same cluster.
func (o *oracle) committedFrom(ctx context.Context, broker *kgo.Broker, id int32, cluster string) (consistency.Token, error) {
	hwm, err := QuorumHighWatermark(ctx, broker)
	if err != nil {
		return consistency.Token{}, err
	}
	// Asked of the one broker, not the cluster: its answer checks the
	// cluster, and is not noted as the cluster's (a broker of another
	// cluster at a listed address would otherwise become the cluster
	// every later probe answer is taken for).
	after, err := brokersMetadata(ctx, broker)
	if err != nil {
		return consistency.Token{}, err
	}
	if *after.ClusterID != cluster {
		return consistency.Token{}, fmt.Errorf("the bootstrap servers answered for cluster %q, then broker %d for cluster %q: %w", cluster, id, *after.ClusterID, errMixed)
	}
	return consistency.Of(cluster, hwm-1)
}

// askOrder returns the brokers of m in the order Committed asks them: the
// one named controller first, if listed, then the others as listed.
func askOrder(m *kmsg.MetadataResponse) []int32 {
	ids := make([]int32, 0, len(m.Brokers))
	if slices.ContainsFunc(m.Brokers, func(b kmsg.MetadataResponseBroker) bool { return b.NodeID == m.ControllerID }) {
		ids = append(ids, m.ControllerID)
	}
	for _, b := range m.Brokers {
		if !slices.Contains(ids, b.NodeID) {
			ids = append(ids, b.NodeID)
		}
	}
	return ids
}

// minShare is the least time a broker is given to answer Committed when
// ctx leaves that much: a broker that answers at all answers a loopback
// or LAN DescribeQuorum well within it.
const minShare = time.Second

// shareOf returns a context for one of n brokers still to ask: an equal
// share of what is left of ctx, but at least minShare (or all that is
// left); ctx itself when it has no deadline.
func shareOf(ctx context.Context, n int) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok || n <= 1 {
		return context.WithCancel(ctx)
	}
	left := time.Until(dl)
	return context.WithTimeout(ctx, min(left, max(left/time.Duration(n), minShare)))
}

// QuorumHighWatermark asks r (one broker, which forwards it to the
// quorum) for the high watermark of the cluster metadata log: one more
// than the offset of the last committed metadata record. Every token
// taken from the committed end (the oracle's, Factory.CommittedToken) is
// asked here. A cluster that does not know DescribeQuorum gets an error
// wrapping wire.ErrEmulationUnsupported.
func QuorumHighWatermark(ctx context.Context, r kmsg.Requestor) (int64, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	t := kmsg.NewDescribeQuorumRequestTopic()
	t.Topic = "__cluster_metadata"
	t.Partitions = append(t.Partitions, kmsg.NewDescribeQuorumRequestTopicPartition())
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		if unsupported(err) {
			return 0, fmt.Errorf("%w: the brokers do not answer DescribeQuorum: %w", wire.ErrEmulationUnsupported, err)
		}
		return 0, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return 0, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, errors.New("DescribeQuorum: answer without the metadata partition")
	}
	part := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		return 0, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if part.HighWatermark < 1 {
		return 0, fmt.Errorf("DescribeQuorum: high watermark %d", part.HighWatermark)
	}
	return part.HighWatermark, nil
}

// unsupported reports whether err says the broker does not know the
// request at all (franz-go checks ApiVersions before it sends one).
func unsupported(err error) bool {
	return errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old")
}

// askMetadata asks r for the cluster's brokers (no topics) and returns the
// answer, which names a cluster.
func brokersMetadata(ctx context.Context, r kmsg.Requestor) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	resp, err := req.RequestWith(ctx, r)
	if err != nil {
		return nil, fmt.Errorf("metadata request: %w", err)
	}
	if resp.ClusterID == nil || *resp.ClusterID == "" {
		return nil, fmt.Errorf("metadata answer names no cluster id")
	}
	return resp, nil
}

// metadata asks r (the oracle's client, which asks the bootstrap servers
// or any broker they listed) for the cluster's brokers, notes their
// addresses and the cluster, and returns the answer.
func (o *oracle) metadata(ctx context.Context, r kmsg.Requestor) (*kmsg.MetadataResponse, error) {
	resp, err := brokersMetadata(ctx, r)
	if err != nil {
		return nil, err
	}
	nodes := seedNodes(o.s.cfg.Base.Seeds)
	for _, b := range resp.Brokers {
		nodes[net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))] = b.NodeID
	}
	o.mu.Lock()
	o.nodes, o.cluster = nodes, *resp.ClusterID
	o.mu.Unlock()
	return resp, nil
}

// refresh asks for the cluster's brokers (no topics), notes their
// addresses and returns the cluster id.
func (o *oracle) refresh(ctx context.Context, cl *kgo.Client) (string, error) {
	m, err := o.metadata(ctx, cl)
	if err != nil {
		return "", err
	}
	return *m.ClusterID, nil
}

// Applied returns the FinalizedFeaturesEpoch of node, or of the broker at
// addr when node is negative, and the cluster the node map is of.
func (o *oracle) Applied(ctx context.Context, addr string, node int32) (string, int64, error) {
	_, cl, err := o.clients()
	if err != nil {
		return "", -1, err
	}
	o.mu.Lock()
	cluster := o.cluster
	id, ok := o.nodes[addr]
	o.mu.Unlock()
	if node >= 0 {
		id, ok = node, cluster != ""
	}
	if !ok {
		if cluster, err = o.refresh(ctx, cl); err != nil {
			return "", -1, err
		}
		o.mu.Lock()
		id, ok = o.nodes[addr]
		o.mu.Unlock()
		if node >= 0 {
			id, ok = node, true
		}
		if !ok {
			return "", -1, fmt.Errorf("no broker of the cluster has the address %s", addr)
		}
	}
	req := kmsg.NewPtrApiVersionsRequest()
	// Brokers refuse ApiVersions v3+ (INVALID_REQUEST) without a valid
	// client software name and version.
	req.ClientSoftwareName, req.ClientSoftwareVersion = "kconsist", "1"
	resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
	if err != nil {
		return "", -1, fmt.Errorf("ApiVersions to %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return "", -1, fmt.Errorf("ApiVersions to %s: %w", addr, err)
	}
	return cluster, resp.FinalizedFeaturesEpoch, nil
}

// Brokers returns the cluster's id and its brokers' node ids, from a
// Metadata answer of the quorum client's.
func (o *oracle) Brokers(ctx context.Context) (string, []int32, error) {
	cl, err := o.client()
	if err != nil {
		return "", nil, err
	}
	m, err := o.metadata(ctx, cl)
	if err != nil {
		return "", nil, err
	}
	ids := make([]int32, 0, len(m.Brokers))
	for _, b := range m.Brokers {
		ids = append(ids, b.NodeID)
	}
	return *m.ClusterID, ids, nil
}

// AskBroker sends req to the broker node through the quorum client.
func (o *oracle) AskBroker(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error) {
	cl, err := o.client()
	if err != nil {
		return nil, err
	}
	return cl.Broker(int(node)).Request(ctx, req)
}

var (
	_ wire.Oracle      = (*oracle)(nil)
	_ wire.BrokerAsker = (*oracle)(nil)
)

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
