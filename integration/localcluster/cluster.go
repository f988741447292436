package localcluster

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrClosed is returned by methods of a closed Cluster.
var ErrClosed = errors.New("localcluster: cluster closed")

// ErrNoSuchBroker is returned for a node id the cluster does not have.
var ErrNoSuchBroker = errors.New("localcluster: no such broker")

// Cluster is a local Kafka cluster that implements the server side of
// KIP-1243 over kfake. See the package documentation.
type Cluster struct {
	cfg config

	kf      *kfake.Cluster
	kfAddrs []string
	// kfVersions are the APIs kfake serves (unsupported.go); read once.
	kfVersions map[int16]versionRange
	doors      *sideDoors
	direct     *kgo.Client // straight to kfake, to read what a mutation did

	log *metadataLog

	// mutation serializes metadata mutations, from forwarding the request
	// to kfake until the records are committed, so the log orders changes
	// as kfake applied them. Capacity 1.
	mutation chan struct{}
	ctrl     *image // the image at the log end; guarded by mutation

	defaultsMu sync.Mutex
	defaults   map[string]string // topic config defaults kfake reported

	brokers  []*broker
	gateways []*gateway

	stats stats

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
}

// New starts a cluster: kfake brokers, one gateway per broker on a loopback
// port, and the metadata log with the cluster id record at offset 0 (and
// the records of SeedTopics after it, applied by every broker).
func New(opts ...Opt) (*Cluster, error) {
	cfg := config{
		brokers:          3,
		waitMax:          DefaultWaitMax,
		idleTimeout:      DefaultIdleTimeout,
		inconsistentCode: DefaultInconsistentMetadataCode,
		logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, fmt.Errorf("localcluster: %w", errors.Join(cfg.errs...))
	}
	for node := range cfg.brokerLag {
		if node < 0 || int(node) >= cfg.brokers {
			return nil, fmt.Errorf("localcluster: BrokerLag(%d, ...): %w (have %d)", node, ErrNoSuchBroker, cfg.brokers)
		}
	}
	if cfg.clusterID == "" {
		var id [16]byte
		if _, err := rand.Read(id[:]); err != nil {
			return nil, fmt.Errorf("localcluster: cluster id: %w", err)
		}
		cfg.clusterID = base64.RawURLEncoding.EncodeToString(id[:])
	}

	doors := newSideDoors()
	// The side doors go first, so that a ListenFn of the caller's wins.
	kopts := append([]kfake.Opt{kfake.ListenFn(doors.listen)}, cfg.kfakeOpts...)
	kopts = append(kopts, kfake.NumBrokers(cfg.brokers), kfake.ClusterID(cfg.clusterID))
	for _, st := range cfg.seedTopics {
		kopts = append(kopts, kfake.SeedTopics(st.partitions, st.names...))
	}
	kf, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("localcluster: kfake: %w", err)
	}
	c := &Cluster{
		cfg:      cfg,
		kf:       kf,
		kfAddrs:  kf.ListenAddrs(),
		doors:    doors,
		log:      newMetadataLog(),
		mutation: make(chan struct{}, 1),
		ctrl:     newImage(),
		defaults: make(map[string]string),
		done:     make(chan struct{}),
	}
	c.direct, err = kgo.NewClient(kgo.SeedBrokers(c.kfAddrs...), kgo.MetadataMinAge(10*time.Millisecond), kgo.Dialer(doors.dial))
	if err != nil {
		kf.Close()
		return nil, fmt.Errorf("localcluster: control client: %w", err)
	}
	if err := c.bootstrap(); err != nil {
		c.direct.Close()
		kf.Close()
		return nil, err
	}
	vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = c.readKfakeVersions(vctx)
	vcancel()
	if err != nil {
		c.direct.Close()
		kf.Close()
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	for i := range cfg.brokers {
		lag, ok := cfg.brokerLag[int32(i)]
		if !ok {
			lag = cfg.lag
		}
		b := newBroker(c, int32(i), lag)
		b.applyThrough(c.log.end())
		c.brokers = append(c.brokers, b)
	}
	for _, b := range c.brokers {
		g, err := newGateway(c, b)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("localcluster: gateway of broker %d: %w", b.node, err)
		}
		c.gateways = append(c.gateways, g)
	}
	for _, b := range c.brokers {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); b.run() }()
	}
	for _, g := range c.gateways {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); g.serve() }()
	}
	return c, nil
}

// bootstrap writes the cluster id record and the seed topics' records.
func (c *Cluster) bootstrap() error {
	if err := c.commit(&ClusterIDRecord{ClusterID: c.cfg.clusterID}); err != nil {
		return fmt.Errorf("localcluster: bootstrap: %w", err)
	}
	var names []string
	for _, st := range c.cfg.seedTopics {
		names = append(names, st.names...)
	}
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rs, err := c.topicCreationRecords(ctx, names)
	if err != nil {
		return fmt.Errorf("localcluster: seed topics: %w", err)
	}
	if err := c.commit(rs...); err != nil {
		return fmt.Errorf("localcluster: seed topics: %w", err)
	}
	return nil
}

// commit appends rs as one batch and applies it to the controller image.
// The caller holds the mutation lock (or is bootstrapping).
func (c *Cluster) commit(rs ...MetadataRecord) error {
	if len(rs) == 0 {
		return nil
	}
	end, err := c.log.append(rs...)
	if err != nil {
		return err
	}
	for _, r := range c.log.since(end - int64(len(rs)) + 1) {
		if err := c.ctrl.apply(r.Offset, r.Value); err != nil {
			return err
		}
	}
	c.stats.commits.Add(1)
	return nil
}

func (c *Cluster) lockMutation(stop <-chan struct{}) bool {
	select {
	case c.mutation <- struct{}{}:
		return true
	case <-stop:
	case <-c.done:
	}
	return false
}

func (c *Cluster) unlockMutation() { <-c.mutation }

// Close stops the gateways, the appliers and kfake, and waits for every
// goroutine the cluster started. It is safe to call more than once.
func (c *Cluster) Close() {
	c.closeOnce.Do(func() {
		close(c.done)
		for _, g := range c.gateways {
			g.close()
		}
		c.wg.Wait()
		c.direct.Close()
		c.kf.Close()
	})
}

func (c *Cluster) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Addrs returns the gateway addresses, indexed by node id. They are the only
// addresses clients ever learn.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.gateways))
	for i, g := range c.gateways {
		addrs[i] = g.addr
	}
	return addrs
}

// KfakeAddrs returns the addresses of the kfake brokers behind the gateways.
// Clients talking to them bypass every rule of this package; tests use them
// to compare against kfake alone.
func (c *Cluster) KfakeAddrs() []string { return append([]string(nil), c.kfAddrs...) }

// Kfake returns the kfake cluster underneath, for its Control hooks. Changing
// topics through it bypasses the metadata log.
func (c *Cluster) Kfake() *kfake.Cluster { return c.kf }

// ClusterID returns the cluster id.
func (c *Cluster) ClusterID() string { return c.cfg.clusterID }

// MetadataLog returns a copy of the whole metadata log.
func (c *Cluster) MetadataLog() []Record { return c.log.since(0) }

// LogEnd returns the offset of the last committed record: the token of the
// newest metadata.
func (c *Cluster) LogEnd() int64 { return c.log.end() }

// Follow calls fn with every record from offset on, in order, as they are
// committed, until ctx ends or the cluster closes.
func (c *Cluster) Follow(ctx context.Context, offset int64, fn func(Record)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := c.log.follow(ctx, offset, fn)
	if c.closed() {
		return ErrClosed
	}
	return err
}

func (c *Cluster) broker(node int32) (*broker, error) {
	if node < 0 || int(node) >= len(c.brokers) {
		return nil, fmt.Errorf("%w: node %d (have %d)", ErrNoSuchBroker, node, len(c.brokers))
	}
	return c.brokers[node], nil
}

// PauseApply stops broker node from applying the log until ResumeApply, so
// a test can hold a broker exactly at an offset.
func (c *Cluster) PauseApply(node int32) error {
	b, err := c.broker(node)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.paused = true
	b.mu.Unlock()
	b.poke()
	return nil
}

// ResumeApply lets broker node apply again; batches whose lag has passed are
// applied at once.
func (c *Cluster) ResumeApply(node int32) error {
	b, err := c.broker(node)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.paused = false
	b.mu.Unlock()
	b.poke()
	return nil
}

// SetLag changes the apply lag of broker node at run time.
func (c *Cluster) SetLag(node int32, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("localcluster: SetLag(%d, %v): negative lag", node, d)
	}
	b, err := c.broker(node)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.lag = d
	b.mu.Unlock()
	b.poke()
	return nil
}

// AppliedOffset returns the offset broker node has applied, which its
// responses carry in their header.
func (c *Cluster) AppliedOffset(node int32) (int64, error) {
	b, err := c.broker(node)
	if err != nil {
		return -1, err
	}
	return b.appliedOffset(), nil
}

// WaitApplied waits until broker node has applied offset.
func (c *Cluster) WaitApplied(ctx context.Context, node int32, offset int64) error {
	b, err := c.broker(node)
	if err != nil {
		return err
	}
	if b.waitApplied(ctx, offset, nil) {
		return nil
	}
	if c.closed() {
		return ErrClosed
	}
	return fmt.Errorf("localcluster: broker %d at offset %d, waiting for %d: %w", node, b.appliedOffset(), offset, ctx.Err())
}

// Repoint makes the gateway of node forward new connections to broker
// otherNode of other (which may be c itself, to undo), as if the address had
// been given to another broker: the gateway then serves as that broker, with
// its cluster id, metadata and kfake's KIP-1242 ApiVersions check. Open
// connections through the gateway are closed.
func (c *Cluster) Repoint(node int32, other *Cluster, otherNode int32) error {
	if _, err := c.broker(node); err != nil {
		return err
	}
	if other == nil {
		return fmt.Errorf("localcluster: Repoint(%d, nil, %d): no cluster", node, otherNode)
	}
	target, err := other.broker(otherNode)
	if err != nil {
		return err
	}
	c.gateways[node].repoint(target)
	return nil
}

// Stats counts what the gateways did.
type Stats struct {
	Connections  int64 // client connections accepted
	Requests     int64 // requests read from clients
	Waits        int64 // requests held for a token the broker had not applied
	Inconsistent int64 // requests answered INCONSISTENT_METADATA
	// ClosedBehind counts connections closed instead of an answer to a
	// request the broker was behind on (see BehindAnswer).
	ClosedBehind int64
	// WriteTimeouts counts metadata writes answered REQUEST_TIMED_OUT
	// because the answering broker had not applied them in time.
	WriteTimeouts int64
	// WritesAnsweredBelow counts metadata writes the answering broker had
	// not applied when it answered, with its own offset
	// (WriteAnswers(WritesAtCommitOwnOffset)).
	WritesAnsweredBelow int64
	ClusterIDMismatches int64 // connections closed for a foreign header cluster id
	StaleAnswers        int64 // answers changed because the broker's image lags kfake
	Commits             int64 // metadata batches committed
	ClosedMalformed     int64 // connections closed for requests that do not parse
	// RebootstrapRequired counts ApiVersions answered REBOOTSTRAP_REQUIRED
	// (KIP-1242): clients that named another cluster or node, as after a
	// Repoint to this cluster.
	RebootstrapRequired int64
}

type stats struct {
	connections, requests, waits, inconsistent, mismatches, stale, commits, malformed, rebootstrap atomic.Int64
	behindClosed, writeTimeouts, writesBelow                                                       atomic.Int64
}

// Stats returns the counters of the cluster.
func (c *Cluster) Stats() Stats {
	s := &c.stats
	return Stats{
		Connections:         s.connections.Load(),
		Requests:            s.requests.Load(),
		Waits:               s.waits.Load(),
		Inconsistent:        s.inconsistent.Load(),
		ClosedBehind:        s.behindClosed.Load(),
		WriteTimeouts:       s.writeTimeouts.Load(),
		WritesAnsweredBelow: s.writesBelow.Load(),
		ClusterIDMismatches: s.mismatches.Load(),
		StaleAnswers:        s.stale.Load(),
		Commits:             s.commits.Load(),
		ClosedMalformed:     s.malformed.Load(),
		RebootstrapRequired: s.rebootstrap.Load(),
	}
}

// gatewayHostPort returns where clients reach node.
func (c *Cluster) gatewayHostPort(node int32) (string, int32, bool) {
	if node < 0 || int(node) >= len(c.gateways) {
		return "", 0, false
	}
	g := c.gateways[node]
	return g.host, g.port, true
}

func splitHostPort(addr string) (string, int32, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return h, int32(port), nil
}

func (c *Cluster) learnDefault(name, value string) {
	c.defaultsMu.Lock()
	c.defaults[name] = value
	c.defaultsMu.Unlock()
}

func (c *Cluster) topicDefault(name string) (string, bool) {
	c.defaultsMu.Lock()
	defer c.defaultsMu.Unlock()
	v, ok := c.defaults[name]
	return v, ok
}

// topicDefaults returns a copy of the topic config defaults learnt so far.
func (c *Cluster) topicDefaults() map[string]string {
	c.defaultsMu.Lock()
	defer c.defaultsMu.Unlock()
	return maps.Clone(c.defaults)
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
