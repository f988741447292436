package factory

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/bridge"
	"github.com/kconsist/kconsist/internal/session"
	"github.com/kconsist/kconsist/producer"
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
	// base is the configuration every client starts from; the factory
	// resolves each client's settings and hands the session a checked
	// description of it.
	base config
	// s holds the runtime state: store, cluster watcher, emulator,
	// shared producer clients, life (see internal/session).
	s *session.Session
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
	if _, err := cfg.build(); err != nil {
		return nil, err
	}
	f := &Factory{base: cfg}
	var err error
	f.s, err = session.New(session.Config{
		Store:            store,
		Base:             baseBuild(cfg),
		NoTokens:         cfg.mode == ModeOff,
		Emulate:          cfg.mode == ModeAuto || cfg.mode == ModeEmulated,
		ForceEmulation:   cfg.mode == ModeEmulated,
		Logger:           cfg.logger,
		OnClusterEvent:   f.clusterEvent,
		OnConsistencyOff: f.consistencyOff,
		OnTokenHealed:    f.healed,
		ErrClosed:        ErrClosed,
		ErrConfig:        ErrConfig,
	})
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Close stops the factory's background cluster checks and waits for them
// to return; from then on Admin, NewProducer, NewConsumer and KgoClient
// return ErrClosed. It does not close the clients the factory made: close
// each of them (before or after). Do not call it from an event observer,
// which runs on the goroutine Close waits for.
func (f *Factory) Close() { f.s.Close() }

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

// Store returns the shared consistency store. Its token can be handed to
// another process (see consistency.Token.Encode) and merged there with
// Store.Advance.
func (f *Factory) Store() consistency.Store { return f.s.Store() }

// Token returns the current consistency token of the factory's clients.
func (f *Factory) Token() consistency.Token { return f.s.Store().Load() }

// Stats returns counters summed over every client the factory made.
func (f *Factory) Stats() Stats { return Stats(f.s.Stats()) }

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
	b, _, err := f.resolve(withRole(opts, RoleAdmin), []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	cl, err := f.s.Client(b)
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
// waits for its own records only, and Close of one leaves the client open
// for the others; the last Close closes it (see producer.Producer).
func NewProducer[K, V any](f *Factory, keys producer.Serializer[K], values producer.Serializer[V], opts ...Opt) (*producer.Producer[K, V], error) {
	if keys == nil || values == nil {
		return nil, fmt.Errorf("%w: NewProducer needs a key and a value serializer", ErrConfig)
	}
	b, cfg, err := f.resolve(withRole(opts, RoleProducer), nil)
	if err != nil {
		return nil, err
	}
	var key any // nil: a client of its own
	if k, shareable := f.producerKey(cfg); shareable && !cfg.separate {
		key = k
	}
	l, err := f.s.Producer(b, key)
	if err != nil {
		return nil, err
	}
	return producer.New(l, keys, values)
}

// NewConsumer returns a consumer of K keys and V values. With GroupID and
// topics it joins the group; with topics and no group it consumes every
// partition of them; with neither, assign partitions with
// Consumer.Assign.
func NewConsumer[K, V any](f *Factory, keys consumer.Deserializer[K], values consumer.Deserializer[V], topics []string, opts ...Opt) (*consumer.Consumer[K, V], error) {
	if keys == nil || values == nil {
		return nil, fmt.Errorf("%w: NewConsumer needs a key and a value deserializer", ErrConfig)
	}
	var extra []kgo.Opt
	if len(topics) > 0 {
		extra = append(extra, kgo.ConsumeTopics(topics...))
	}
	b, cfg, err := f.resolve(withRole(opts, RoleConsumer), extra)
	if err != nil {
		return nil, err
	}
	cl, follow, err := f.s.Consumer(b)
	if err != nil {
		return nil, err
	}
	c := new(consumer.Consumer[K, V])
	bridge.InitConsumer(c, cl, keys, values, cfg.groupID != "", follow)
	return c, nil
}

// KgoClient returns a bare franz-go client that shares the factory's store,
// for anything the wrappers do not cover. Close it when done.
func (f *Factory) KgoClient(opts ...Opt) (*kgo.Client, error) {
	b, _, err := f.resolve(withRole(opts, RoleKgo), nil)
	if err != nil {
		return nil, err
	}
	return f.s.Client(b)
}

// resolve returns the description of a client made with opts on top of
// the factory's, and its settings. A closed factory says so first, whatever
// opts say; the session checks again when it makes the client.
func (f *Factory) resolve(opts []Opt, extra []kgo.Opt) (session.Build, config, error) {
	if f.s.Closed() {
		return session.Build{}, config{}, ErrClosed
	}
	cfg, err := f.clientConfig(opts)
	if err != nil {
		return session.Build{}, cfg, err
	}
	b, err := f.describe(cfg, extra)
	return b, cfg, err
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
