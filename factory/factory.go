package factory

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/bridge"
	"github.com/kconsist/kconsist/internal/cluster"
	"github.com/kconsist/kconsist/internal/wire"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

// ErrConfig wraps every configuration error.
var ErrConfig = errors.New("factory: invalid configuration")

// ErrClosed is returned by every constructor of a closed factory.
var ErrClosed = errors.New("factory: closed")

// Factory makes admin clients, producers and consumers that share one
// consistency store. It is safe for concurrent use. Close each client it
// makes when done; the factory holds no connections of its own. Producers
// of the same settings share one franz-go client, which the last of them
// to close closes (see NewProducer).
type Factory struct {
	store   consistency.Store
	base    config
	watcher *cluster.Watcher
	stats   wireStats
	// inconsistent counts INCONSISTENT_METADATA answers over all clients.
	inconsistent atomic.Uint64
	// produceMarks notes which produce partitions were answered so
	// (bridge.ProducerFollow.InconsistentOn).
	produceMarks wire.ProduceMarks
	learnOnce    sync.Once
	// emu makes tokens from KRaft offsets (ModeAuto, ModeEmulated);
	// oracle asks the cluster for it.
	emu    *wire.Emulator
	oracle *oracle
	healer *healer
	// parent is the factory a Session was made from; a session shares
	// its watcher, emulator and oracle and closes none of them.
	parent *Factory
	// life is held shared while a client is made and exclusively by
	// Close, so no client is made after Close returns.
	life   sync.RWMutex
	closed bool
	// producers holds the franz-go client that producers of one
	// configuration share (see NewProducer); pmu guards it.
	pmu       sync.Mutex
	producers map[producerKey]bridge.ProducerClient
}

// New returns a factory whose clients share store; a nil store means a new
// in-process [consistency.MemoryStore]. The options are the base
// configuration of every client; they are validated here.
func New(store consistency.Store, opts ...Opt) (*Factory, error) {
	if store == nil {
		store = consistency.NewMemoryStore()
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if _, err := cfg.validate(); err != nil {
		return nil, err
	}
	f := &Factory{store: store, base: cfg}
	if err := f.startEmulation(); err != nil {
		return nil, err
	}
	f.watcher = &cluster.Watcher{Store: store, OnEvent: f.rebootstrapEvent, Pin: cfg.pin, Logger: cfg.logger}
	f.watcher.Probe = f.probe()
	return f, nil
}

// Close stops the factory's background cluster checks and waits for them
// to return; from then on Admin, NewProducer, NewConsumer and KgoClient
// return ErrClosed. It does not close the clients the factory made: close
// each of them (before or after). Do not call it from an event observer,
// which runs on the goroutine Close waits for.
func (f *Factory) Close() {
	f.life.Lock()
	f.closed = true
	f.life.Unlock()
	if f.parent != nil {
		return
	}
	f.watcher.Close()
	if f.healer != nil {
		f.healer.close()
	}
	if f.oracle != nil {
		f.oracle.close()
	}
}

// String describes the factory's base configuration. The SASL password is
// never shown.
func (f *Factory) String() string { return "factory.Factory" + f.base.String() }

// GoString is String: %#v must not print the password either.
func (f *Factory) GoString() string { return f.String() }

// Format prints String for every verb: fmt does not call String on the
// unexported fields %+v would otherwise print, the password among them.
func (f *Factory) Format(s fmt.State, _ rune) { fmt.Fprint(s, f.String()) }

// LogValue logs the factory as its base configuration, without the SASL
// password.
func (f *Factory) LogValue() slog.Value { return f.base.LogValue() }

// Store returns the shared consistency store. Its context can be handed to
// another process (see consistency.Token.Encode) and merged there with
// Store.Advance.
func (f *Factory) Store() consistency.Store { return f.store }

// Token returns the current consistency token of the factory's clients.
func (f *Factory) Token() consistency.Token { return f.store.Load() }

// Stats returns counters summed over every client the factory made.
func (f *Factory) Stats() Stats { return f.stats.snapshot() }

// Admin returns an admin client; opts apply on top of the factory's. After
// Close it returns ErrClosed.
//
// kadm answers many reads from franz-go's metadata cache, which is kept for
// MetadataMinAge (5s by default) and cannot know about tokens: a topic
// deleted a moment ago would still be listed from it. The admin client
// sends every kadm metadata read to a broker (see the admin package doc),
// which the token keeps from answering stale, and the cache franz-go still
// uses to route requests is kept for its minimum, 10ms.
func (f *Factory) Admin(opts ...Opt) (*admin.Client, error) {
	opts = withRole(opts, RoleAdmin)
	cl, _, err := f.client(opts, []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	c := new(admin.Client)
	bridge.InitAdmin(c, cl)
	return c, nil
}

// NewProducer returns a producer of K keys and V values; opts apply on top
// of the factory's. (Go methods cannot have type parameters, hence a
// function.)
//
// Producers of one factory share one franz-go client, whatever their key
// and value types, as long as their settings are the same: one producer id,
// one set of connections, one buffer, which is how franz-go means a client
// to be used. Settings that differ (acks, linger.ms, compression,
// idempotence...), and KgoOpts, Hooks, HooksPerClient, Resolver or
// WithObserver given to NewProducer (which cannot be compared), give the
// producer a client of its own, as does SeparateClient. Flush of a producer
// waits for every record of its client, and Close of one leaves the client
// open for the others; the last Close closes it (see producer.Producer).
func NewProducer[K, V any](f *Factory, keys producer.Serializer[K], values producer.Serializer[V], opts ...Opt) (*producer.Producer[K, V], error) {
	if keys == nil || values == nil {
		return nil, fmt.Errorf("%w: NewProducer needs a key and a value serializer", ErrConfig)
	}
	opts = withRole(opts, RoleProducer)
	f.life.RLock()
	defer f.life.RUnlock()
	if f.closed {
		return nil, ErrClosed
	}
	cfg, err := f.clientConfig(opts)
	if err != nil {
		return nil, err
	}
	if cfg.separate {
		s, err := f.newProducerClient(cfg, opts, nil)
		if err != nil {
			return nil, err
		}
		return attachProducer(s, keys, values), nil
	}
	// An option given to NewProducer may be invalid even where it leaves
	// the configuration equal to a shared client's (Acks("maybe")).
	if _, err := cfg.build(); err != nil {
		return nil, err
	}
	key, shareable := f.producerKey(cfg)
	if !shareable {
		s, err := f.newProducerClient(cfg, opts, nil)
		if err != nil {
			return nil, err
		}
		return attachProducer(s, keys, values), nil
	}
	f.pmu.Lock()
	defer f.pmu.Unlock()
	if s := f.producers[key]; s != nil {
		if p := new(producer.Producer[K, V]); s.Attach(p, keys, values) {
			return p, nil
		}
	}
	var s bridge.ProducerClient
	s, err = f.newProducerClient(cfg, opts, func() {
		f.pmu.Lock()
		if f.producers[key] == s {
			delete(f.producers, key)
		}
		f.pmu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	if f.producers == nil {
		f.producers = map[producerKey]bridge.ProducerClient{}
	}
	f.producers[key] = s
	return attachProducer(s, keys, values), nil
}

// attachProducer attaches a new producer to s, which no producer released
// yet: s was just made, or f.pmu is held since it was found attachable.
func attachProducer[K, V any](s bridge.ProducerClient, keys producer.Serializer[K], values producer.Serializer[V]) *producer.Producer[K, V] {
	p := new(producer.Producer[K, V])
	s.Attach(p, keys, values)
	return p
}

// newProducerClient makes the franz-go client of producers with settings
// cfg (opts on top of the factory's); released, if not nil, is called when
// the last producer on it closes. f.life is held shared.
func (f *Factory) newProducerClient(cfg config, opts []Opt, released func()) (bridge.ProducerClient, error) {
	cl, err := f.build(cfg, nil)
	if err != nil {
		return nil, err
	}
	return bridge.NewProducerClient(cl, bridge.ProducerFollow{
		Watch:  f.watcher,
		Pinned: cfg.pin != "",
		Changed: func() error {
			return &rebootstrap.ClusterChangedError{From: cfg.pin, To: f.watcher.Cluster()}
		},
		Refuse: func() error {
			if now := f.watcher.Cluster(); now != "" && now != cfg.pin {
				return &rebootstrap.ClusterChangedError{From: cfg.pin, To: now}
			}
			return nil
		},
		Recheck: cfg.recheckEvery(),
		Cluster: f.watcher.Cluster,
		NewClient: func() (*kgo.Client, error) {
			cl, _, err := f.client(opts, nil)
			return cl, err
		},
		Inconsistent:   f.produceMarks.Clock,
		InconsistentOn: f.produceMarks.At,
		TopicHeldAt:    f.produceMarks.TopicHeldAt,
		Auth:           f.authWatch(cfg),
		Released:       released,
	}), nil
}

// NewConsumer returns a consumer of K keys and V values. With GroupID and
// topics it joins the group; with topics and no group it consumes every
// partition of them; with neither, assign partitions with
// Consumer.Assign.
func NewConsumer[K, V any](f *Factory, keys consumer.Deserializer[K], values consumer.Deserializer[V], topics []string, opts ...Opt) (*consumer.Consumer[K, V], error) {
	if keys == nil || values == nil {
		return nil, fmt.Errorf("%w: NewConsumer needs a key and a value deserializer", ErrConfig)
	}
	opts = withRole(opts, RoleConsumer)
	var extra []kgo.Opt
	if len(topics) > 0 {
		extra = append(extra, kgo.ConsumeTopics(topics...))
	}
	cl, cfg, err := f.client(opts, extra)
	if err != nil {
		return nil, err
	}
	c := new(consumer.Consumer[K, V])
	bridge.InitConsumer(c, cl, keys, values, cfg.groupID != "", bridge.ConsumerFollow{
		Watch:  f.watcher,
		Pinned: cfg.pin != "",
		Changed: func() error {
			return &rebootstrap.ClusterChangedError{From: cfg.pin, To: f.watcher.Cluster()}
		},
		NewClient: func() (*kgo.Client, error) {
			cl, _, err := f.client(opts, extra)
			return cl, err
		},
		Auth: f.authWatch(cfg),
	})
	return c, nil
}

// KgoClient returns a bare franz-go client that shares the factory's store,
// for anything the wrappers do not cover. Close it when done.
func (f *Factory) KgoClient(opts ...Opt) (*kgo.Client, error) {
	cl, _, err := f.client(withRole(opts, RoleKgo), nil)
	return cl, err
}

func (f *Factory) client(opts []Opt, extra []kgo.Opt) (*kgo.Client, config, error) {
	f.life.RLock()
	defer f.life.RUnlock()
	if f.closed {
		return nil, config{}, ErrClosed
	}
	cfg, err := f.clientConfig(opts)
	if err != nil {
		return nil, cfg, err
	}
	cl, err := f.build(cfg, extra)
	return cl, cfg, err
}

// clientConfig returns the settings of a client made with opts on top of
// the factory's.
func (f *Factory) clientConfig(opts []Opt) (config, error) {
	cfg := f.base.clone()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := checkRoles(opts, cfg.role); err != nil {
		return cfg, err
	}
	if cfg.mode != f.base.mode {
		return cfg, fmt.Errorf("%w: consistency.mode is a factory setting (%s); a client cannot change it to %s", ErrConfig, f.base.mode, cfg.mode)
	}
	return cfg, nil
}

// build makes a client handed to a user with settings cfg; f.life is held
// shared.
func (f *Factory) build(cfg config, extra []kgo.Opt) (*kgo.Client, error) {
	store := f.store
	if cfg.mode == ModeOff {
		store = noTokens{}
	}
	cl, err := f.newKgo(cfg, store, extra, true)
	if err != nil {
		return nil, err
	}
	f.learnOnce.Do(f.watcher.Watch)
	return cl, nil
}

// newKgo builds a franz-go client for cfg whose connections go through a
// wire interceptor on store. A shared client (any client handed to a user)
// reports events, counts stats and rebootstraps through the watcher. The
// watcher's probes are not shared: they use a store of their own, which
// stays Unknown, so they never stamp a token.
func (f *Factory) newKgo(cfg config, store consistency.Store, extra []kgo.Opt, shared bool) (*kgo.Client, error) {
	b, err := cfg.build()
	if err != nil {
		return nil, err
	}
	wcfg := wire.Config{
		Store: store,
		// No timeout of its own: the interceptor bounds the whole dial.
		Dial:                     cluster.Dialer(cfg.resolver, (&net.Dialer{}).DialContext),
		TLS:                      b.tls,
		InconsistentMetadataCode: cfg.incCode,
		Logger:                   kgoLogger(cfg.logger),
	}
	if shared {
		wcfg.Observer = &wireObserver{f: f, o: cfg.observer, log: cfg.logger, seeds: seedSet(cfg.seeds), pinned: cfg.pin != ""}
		wcfg.ExpectedCluster = f.expected(cfg.pin)
		wcfg.Adopt = f.adopt(cfg)
		wcfg.Emulator = f.emu
	}
	dial := &lateDialer{ready: make(chan struct{})}
	kopts := append(b.opts, kgo.Dialer(dial.DialContext))
	var rb rebootstrapOpts
	if shared {
		rb = newRebootstrapOpts(cfg.strategy, cfg.clusterCheck, cfg.seeds, func() {
			f.stats.rebootstraps.Add(1)
			f.watcher.Rebootstrapped()
		})
		kopts = append(kopts, kgo.WithHooks(closeHook(func() { f.stats.remove(dial.ic) })))
		kopts = append(kopts, cfg.hookOpts()...)
	} else {
		rb = newRebootstrapOpts(rebootstrap.None, false, cfg.seeds, nil)
		if l := kgoLogger(cfg.logger); l != nil {
			// The watcher logs each distinct probe failure once;
			// franz-go would warn at every attempt.
			kopts = append(kopts, kgo.WithLogger(quietLogger{l}))
		}
	}
	kopts = append(kopts, rb.opts...)
	kopts = append(kopts, extra...)
	kopts = append(kopts, cfg.kgoOpts...)
	newClient := kgo.NewClient
	if cfg.newClient != nil {
		newClient = cfg.newClient
	}
	cl, err := newClient(kopts...)
	if err != nil {
		close(dial.ready)
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	// The client has not dialed yet (lateDialer holds its dials), so a
	// refused client leaves nothing behind but its Close.
	if err := rb.check(cl); err != nil {
		close(dial.ready)
		cl.Close()
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	wcfg.DialTimeout, _ = cl.OptValue(kgo.DialTimeout).(time.Duration)
	ic, err := wire.New(wcfg)
	if err != nil {
		close(dial.ready)
		cl.Close()
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if shared {
		f.stats.add(ic)
	}
	dial.ic = ic
	close(dial.ready)
	return cl, nil
}

// lateDialer holds a client's dials until the client is built. kgo applies
// its DialTimeout only to its own dialer and hands a custom one a context
// without a deadline, so the interceptor is made with the DialTimeout the
// built client reports, a kgo.DialTimeout in KgoOpts included. NewClient
// never waits for a dial.
type lateDialer struct {
	ready chan struct{}
	ic    *wire.Interceptor // set before ready closes; nil if the client was refused
}

func (d *lateDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	select {
	case <-d.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d.ic == nil {
		return nil, kgo.ErrClientClosed
	}
	return d.ic.DialContext(ctx, network, addr)
}

// apiVersionsKey is the request key of ApiVersions; v5 is the first that
// names the cluster and node the client expects (KIP-1242).
const apiVersionsKey = 18

// rebootstrapOpts are the kgo options that enforce a recovery strategy and
// the cluster check, with what is needed to verify, once the client is
// built, that no option in KgoOpts replaced them.
type rebootstrapOpts struct {
	opts []kgo.Opt
	// capped: the cluster check is off, by capping ApiVersions at v4.
	capped bool
	// hook is the OnRebootstrapRequired installed; nil: none.
	hook func() ([]string, error)
}

func newRebootstrapOpts(strategy rebootstrap.Strategy, clusterCheck bool, seeds []string, onRequired func()) rebootstrapOpts {
	var r rebootstrapOpts
	if strategy == rebootstrap.None || !clusterCheck {
		v := kversion.Stable()
		v.SetMaxKeyVersion(apiVersionsKey, 4)
		r.capped = true
		r.opts = append(r.opts, kgo.MaxVersions(v))
	}
	if strategy == rebootstrap.Rebootstrap {
		seeds := append([]string(nil), seeds...)
		r.hook = func() ([]string, error) {
			if onRequired != nil {
				onRequired()
			}
			// Host names go back unresolved: the dialer resolves them
			// again, so a moved DNS name is followed.
			return seeds, nil
		}
		r.opts = append(r.opts, kgo.OnRebootstrapRequired(r.hook))
	}
	return r
}

// check reports a KgoOpts option that replaced one of r's in cl.
func (r rebootstrapOpts) check(cl *kgo.Client) error {
	var errs []error
	if r.capped {
		mv, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions)
		if v, ok := mv.LookupMaxKeyVersion(apiVersionsKey); mv == nil || !ok || v > 4 {
			errs = append(errs, errors.New("KgoOpts: kgo.MaxVersions allows ApiVersions v5, which turns the cluster check back on; with ClusterCheck(false) or RecoveryStrategy(None) cap key 18 at 4 (SetMaxKeyVersion(18, 4))"))
		}
	}
	got, _ := cl.OptValue(kgo.OnRebootstrapRequired).(func() ([]string, error))
	// A func value can only be compared by its code: a closure made
	// elsewhere than newRebootstrapOpts has other code.
	if (got == nil) != (r.hook == nil) || got != nil && reflect.ValueOf(got).Pointer() != reflect.ValueOf(r.hook).Pointer() {
		errs = append(errs, errors.New("KgoOpts: kgo.OnRebootstrapRequired would replace the factory's, which resets the consistency store and reports rebootstraps; use WithObserver to hear about rebootstraps"))
	}
	return errors.Join(errs...)
}

// probe asks the factory's bootstrap servers for their cluster id without a
// token; see cluster.Probe.
func (f *Factory) probe() cluster.Probe {
	return cluster.SeedProbe(func() (*kgo.Client, error) {
		return f.newKgo(f.base.clone(), consistency.NewMemoryStore(), nil, false)
	})
}

// closeHook runs fn when the client it is installed on closes.
type closeHook func()

func (h closeHook) OnClientClosed(*kgo.Client) { h() }

func seedSet(seeds []string) map[string]bool {
	set := make(map[string]bool, len(seeds))
	for _, s := range seeds {
		set[normalAddr(s)] = true
	}
	return set
}

// expected returns the cluster the wire layer must insist on: the pin, or
// nothing (then the store's own cluster is the reference).
func (f *Factory) expected(pin string) func() string {
	if pin == "" {
		return nil
	}
	return func() string { return pin }
}

// adopt lets an unpinned factory follow its bootstrap servers to a new
// KIP-1243 cluster: a bootstrap server answering for another cluster resets
// the store (the old cluster's offsets mean nothing there), while any other
// address answering for another cluster stays a misroute.
func (f *Factory) adopt(cfg config) func(addr, cluster string) bool {
	if cfg.pin != "" {
		return nil
	}
	seeds := seedSet(cfg.seeds)
	return func(addr, cluster string) bool {
		if !seeds[normalAddr(addr)] {
			return false
		}
		from := f.store.Load().ClusterID()
		f.stats.storeResets.Add(1)
		cfg.emit(Event{Kind: EventClusterChanged, Addr: addr, From: from, To: cluster})
		cfg.emit(Event{Kind: EventStoreReset, Addr: addr, From: from, To: cluster})
		return true
	}
}

// normalAddr puts host:port in one spelling (IPv6 brackets, lower case).
func normalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

func (f *Factory) rebootstrapEvent(ev cluster.Event) {
	if ev.AuthFailure != nil {
		// The watcher has logged it: tell the observer only.
		if o := f.base.observer; o != nil {
			o.OnEvent(Event{Kind: EventAuthFailed, Err: ev.AuthFailure})
		}
		return
	}
	if ev.StoreReset {
		f.stats.storeResets.Add(1)
	}
	if ev.Rebootstrapped {
		f.base.emit(Event{Kind: EventRebootstrap, From: ev.From, To: ev.To})
	}
	if ev.Changed {
		f.base.emit(Event{Kind: EventClusterChanged, From: ev.From, To: ev.To})
	}
	if ev.StoreReset {
		f.base.emit(Event{Kind: EventStoreReset, From: ev.From, To: ev.To})
	}
}

// recheckEvery is how often a pinned producer whose cluster is gone asks the
// bootstrap servers again: retry.backoff.ms if set, else 1s (the Java
// client's reconnect.backoff.max.ms).
func (c *config) recheckEvery() time.Duration {
	if c.retryBackoff != nil && *c.retryBackoff > 0 {
		return *c.retryBackoff
	}
	return time.Second
}

// validate checks cfg and translates it to franz-go options.
func (c *config) validate() ([]kgo.Opt, error) {
	b, err := c.build()
	return b.opts, err
}

// built is a checked config: the franz-go options and the TLS config the
// interceptor dials with (nil: plaintext).
type built struct {
	opts []kgo.Opt
	tls  *tls.Config
}

// build checks c and translates it. It leaves c untouched: c may be a
// factory's base, shared by every client it makes.
func (c *config) build() (built, error) {
	errs := append([]error(nil), c.errs...)
	if len(c.seeds) == 0 {
		errs = append(errs, errors.New("bootstrap.servers: required, none given"))
	}
	idem := c.acks == "all"
	if c.idempotence != nil {
		if *c.idempotence && c.acks != "all" {
			errs = append(errs, fmt.Errorf("enable.idempotence: true needs acks=all, have acks=%s", c.acks))
		}
		idem = *c.idempotence && c.acks == "all"
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.seeds...),
		// A broker behind the token makes franz-go retry after a metadata
		// refresh, which MetadataMinAge (5s) rate-limits; the Java client
		// refreshes after retry.backoff.ms (100ms).
		kgo.MetadataMinAge(250 * time.Millisecond),
		// A connection closed before its first answer (a proxy or load
		// balancer cutting connections, one whose broker is down) is
		// retried like any other connection error, as the Java client
		// does. franz-go by default takes it for a TLS or SASL mistake and
		// fails records buffered for the topic when a metadata request
		// meets it: the kill -9 test on Kafka 4.4 lost records that way
		// when a connection cut landed during ApiVersions. franz-go still
		// logs each such EOF with its TLS hint.
		kgo.AlwaysRetryEOF(),
	}
	if c.clientID != "" {
		opts = append(opts, kgo.ClientID(c.clientID))
	} else {
		opts = append(opts, kgo.ClientID("kconsist"))
	}
	if c.requestTimeout > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(c.requestTimeout))
	}
	if c.retryBackoff != nil {
		d := *c.retryBackoff
		opts = append(opts, kgo.RetryBackoffFn(func(int) time.Duration { return d }))
	} else {
		opts = append(opts, kgo.RetryBackoffFn(javaBackoff))
	}
	switch c.acks {
	case "all":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !idem {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	// A record fails once it has waited this long, whatever holds it: a
	// broker that stays behind the token as much as one that is down.
	// franz-go's own default is no bound at all.
	opts = append(opts, kgo.RecordDeliveryTimeout(c.deliveryTimeout))
	if c.linger != nil {
		opts = append(opts, kgo.ProducerLinger(*c.linger))
	}
	switch c.compression {
	case "gzip":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.GzipCompression()))
	case "snappy":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	case "lz4":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.Lz4Compression()))
	case "zstd":
		opts = append(opts, kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	default:
		opts = append(opts, kgo.ProducerBatchCompression(kgo.NoCompression()))
	}
	if c.groupID != "" {
		opts = append(opts, kgo.ConsumerGroup(c.groupID))
	}
	switch c.autoOffsetRes {
	case "earliest":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	case "none":
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	default:
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	}
	if c.isolationLevel == "read_committed" {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if l := kgoLogger(c.logger); l != nil {
		opts = append(opts, kgo.WithLogger(l))
	}
	secOpts, tlsCfg, err := c.security()
	if err != nil {
		errs = append(errs, err)
	}
	opts = append(opts, secOpts...)
	txnOpts, err := c.transactional(idem)
	if err != nil {
		errs = append(errs, err)
	}
	opts = append(opts, txnOpts...)
	groupOpts, err := c.rebalanceOpts()
	if err != nil {
		errs = append(errs, err)
	}
	opts = append(opts, groupOpts...)
	if len(errs) > 0 {
		return built{}, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return built{opts: opts, tls: tlsCfg}, nil
}

// security checks security.protocol, SASL and TLS settings together and
// loads certificate files. It returns the TLS config to dial with: a new
// one, or a clone of c.tls, which is the caller's and never modified.
func (c *config) security() ([]kgo.Opt, *tls.Config, error) {
	wantTLS := c.secProt == "SSL" || c.secProt == "SASL_SSL"
	wantSASL := c.secProt == "SASL_PLAINTEXT" || c.secProt == "SASL_SSL"
	var opts []kgo.Opt
	if wantSASL {
		if mod := c.sasl.module; mod != "" && !strings.HasPrefix(c.sasl.mechanism, mod) {
			return nil, nil, fmt.Errorf("sasl.jaas.config: %s does not serve sasl.mechanism=%s", moduleName(mod), c.sasl.mechanism)
		}
		var m sasl.Mechanism
		switch c.sasl.mechanism {
		case "PLAIN":
			m = plain.Auth{User: c.sasl.user, Pass: string(c.sasl.pass)}.AsMechanism()
		case "SCRAM-SHA-256":
			m = scram.Auth{User: c.sasl.user, Pass: string(c.sasl.pass), IsToken: c.sasl.token}.AsSha256Mechanism()
		case "SCRAM-SHA-512":
			m = scram.Auth{User: c.sasl.user, Pass: string(c.sasl.pass), IsToken: c.sasl.token}.AsSha512Mechanism()
		case "":
			return nil, nil, fmt.Errorf("sasl.mechanism: required with security.protocol=%s (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", c.secProt)
		default:
			return nil, nil, fmt.Errorf("sasl.mechanism: %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512", c.sasl.mechanism)
		}
		if c.sasl.user == "" {
			return nil, nil, errors.New("sasl.username: required with SASL")
		}
		opts = append(opts, kgo.SASL(m))
	} else if c.sasl.mechanism != "" {
		return nil, nil, fmt.Errorf("sasl.mechanism: set, but security.protocol=%s does not use SASL", c.secProt)
	}
	if !wantTLS {
		if c.sslCA != "" || c.sslCert != "" || c.sslKey != "" || c.sslKeystore != "" || c.sslKeyPass != "" || c.tls != nil {
			return nil, nil, fmt.Errorf("security.protocol: %s, but TLS settings are given (use SSL or SASL_SSL)", c.secProt)
		}
		return opts, nil, nil
	}
	var cfg *tls.Config
	if c.tls == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		cfg = c.tls.Clone()
	}
	if c.sslCA != "" {
		from := c.sslCAFrom
		if from == "" {
			from = "ssl.ca.location"
		}
		pem, err := os.ReadFile(c.sslCA)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", from, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s: %s holds no PEM certificate", from, c.sslCA)
		}
		cfg.RootCAs = pool
	}
	if (c.sslCert == "") != (c.sslKey == "") {
		return nil, nil, errors.New("ssl.certificate.location and ssl.key.location: give both or neither")
	}
	kp := keyPair{certPath: c.sslCert, keyPath: c.sslKey, certKey: "ssl.certificate.location", keyKey: "ssl.key.location", pass: c.sslKeyPass}
	if c.sslKeystore != "" {
		kp = keyPair{certPath: c.sslKeystore, keyPath: c.sslKeystore, certKey: "ssl.keystore.location", keyKey: "ssl.keystore.location", pass: c.sslKeyPass}
	}
	switch {
	case kp.certPath != "":
		pair, err := kp.load()
		if err != nil {
			return nil, nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	case c.sslKeyPass != "":
		return nil, nil, errors.New("ssl.key.password: given, but no key to decrypt (ssl.keystore.location or ssl.key.location)")
	}
	return opts, cfg, nil
}

// misrouted reports whether the "err" value among keyvals is a misroute.
func misrouted(keyvals []any) bool {
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, _ := keyvals[i].(string); k == "err" {
			err, _ := keyvals[i+1].(error)
			return errors.Is(err, wire.ErrMisroute)
		}
	}
	return false
}

// kgoLogger adapts a slog logger to franz-go's Logger.
func kgoLogger(l *slog.Logger) kgo.Logger {
	if l == nil {
		return nil
	}
	return slogAdapter{l}
}

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Level() kgo.LogLevel {
	ctx := context.Background()
	switch {
	case a.l.Enabled(ctx, slog.LevelDebug):
		return kgo.LogLevelDebug
	case a.l.Enabled(ctx, slog.LevelInfo):
		return kgo.LogLevelInfo
	case a.l.Enabled(ctx, slog.LevelWarn):
		return kgo.LogLevelWarn
	default:
		return kgo.LogLevelError
	}
}

// saslHint is franz-go's warning for a connection that failed before its
// first answer.
const saslHint = "read from broker errored, killing connection after 0 successful responses (is SASL missing?)"

func (a slogAdapter) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	if level == kgo.LogLevelWarn && msg == saslHint && misrouted(keyvals) {
		// The wire layer closed it for naming another cluster, and has
		// warned in those words: SASL has nothing to do with it.
		level, msg = kgo.LogLevelDebug, "connection closed: it answered for another cluster"
	}
	lvl := slog.LevelError
	switch level {
	case kgo.LogLevelDebug:
		lvl = slog.LevelDebug
	case kgo.LogLevelInfo:
		lvl = slog.LevelInfo
	case kgo.LogLevelWarn:
		lvl = slog.LevelWarn
	}
	a.l.Log(context.Background(), lvl, msg, keyvals...)
}

// authWatch returns the watcher as the authentication-failure watch of a
// client with settings cfg, or nil when the watcher's probes, made with the
// factory's base settings, say nothing about it: a client with its own
// bootstrap servers, credentials or TLS settings. (A kgo.SASL or dialer in
// KgoOpts is not compared.) An interface, so that "none" is a nil interface
// and not a nil *cluster.Watcher.
func (f *Factory) authWatch(cfg config) bridge.AuthWatch {
	b := &f.base
	if cfg.secProt != b.secProt || cfg.sasl != b.sasl || cfg.tls != b.tls ||
		cfg.sslCA != b.sslCA || cfg.sslCert != b.sslCert || cfg.sslKey != b.sslKey || cfg.sslKeystore != b.sslKeystore ||
		!slices.Equal(cfg.seeds, b.seeds) {
		return nil
	}
	return f.watcher
}

// quietLogger passes franz-go's logs on at debug level at most: for the
// cluster watcher's probe clients, whose failures the watcher logs once.
type quietLogger struct{ l kgo.Logger }

func (q quietLogger) Level() kgo.LogLevel {
	if q.l.Level() >= kgo.LogLevelDebug {
		return kgo.LogLevelDebug
	}
	return kgo.LogLevelNone
}

func (q quietLogger) Log(_ kgo.LogLevel, msg string, keyvals ...any) {
	q.l.Log(kgo.LogLevelDebug, msg, keyvals...)
}
