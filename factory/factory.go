package factory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/link"
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
	// events is the factory's one event stream (see Observer); emitter
	// queues the factory's own events on it. A factory from WithToken
	// shares its parent's and does not close it.
	events     *events
	emitter    *eventEmitter
	ownsEvents bool
	// closeOnce starts the session's Close once; closed is closed when
	// it returned.
	closeOnce sync.Once
	closed    chan struct{}
}

// New returns a factory. The options are the base configuration of every
// client it makes; they are validated here. Its clients share the store of
// WithStore, or a new in-process [consistency.MemoryStore].
func New(opts ...Opt) (*Factory, error) {
	cfg := defaultConfig()
	applyAll(&cfg, asOpts(opts))
	if _, err := cfg.build(); err != nil {
		return nil, err
	}
	store := cfg.store
	if store == nil {
		store = consistency.NewMemoryStore()
	}
	f := &Factory{base: cfg, events: newEvents(), ownsEvents: true}
	f.emitter = &eventEmitter{observer: cfg.observer, logger: cfg.logger, stream: f.events}
	var err error
	f.s, err = session.New(session.Config{
		Store:             store,
		Base:              baseBuild(cfg),
		NoTokens:          cfg.mode == ModeOff,
		Emulate:           cfg.mode == ModeAuto || cfg.mode == ModeEmulated,
		ForceEmulation:    cfg.mode == ModeEmulated,
		Logger:            cfg.logger,
		OnClusterEvent:    f.clusterEvent,
		OnConsistencyOff:  f.consistencyOff,
		OnLimited:         f.consistencyLimited,
		OnTokenChange:     f.tokenChange,
		OnWriteUnlearnt:   f.writeUnlearnt,
		OnClusterCheckOff: f.clusterCheckOff,
		ErrClosed:         ErrClosed,
		ErrConfig:         ErrConfig,
	})
	if err != nil {
		f.events.Close()
		return nil, err
	}
	return f, nil
}

// Close stops the factory's background work (cluster checks, token
// questions, the healer) and waits for it to return, or for ctx to end,
// when it returns ctx's error wrapped and the rest finishes in the
// background. From the start of Close, Admin, NewProducer, NewConsumer and
// KgoClient return ErrClosed. It does not close the clients the factory
// made: close each of them (before or after). Do not call it from an event
// observer, which runs on a goroutine Close waits for. Close may be called
// more than once; each call waits as the first.
func (f *Factory) Close(ctx context.Context) error {
	f.closeOnce.Do(func() {
		f.closed = make(chan struct{})
		go func() {
			defer close(f.closed)
			f.s.Close()
			if f.ownsEvents {
				f.events.Close() // delivers what is queued
			}
		}()
	})
	select {
	case <-f.closed:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("factory: close did not finish: %w", context.Cause(ctx))
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

// Store returns the shared consistency store. Its token can be handed to
// another process (see consistency.Token.Encode) and merged there with
// Store.Advance.
func (f *Factory) Store() consistency.Store { return f.s.Store() }

// Token returns the current consistency token of the factory's clients.
// A metadata write answered before its offset was learnt
// ([EventWriteUnlearnt]: no broker told the committed offset within the
// answer's hold, as in a controller election) is not in it until the
// factory learns it, which the factory's own next requests wait for. To
// hand another process a token that covers every write answered so far,
// whatever happened, ask [Factory.CommittedToken].
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
func (f *Factory) Admin(opts ...AdminOpt) (*admin.Client, error) {
	b, _, err := f.resolve(RoleAdmin, asOpts(opts), []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)})
	if err != nil {
		return nil, err
	}
	cl, err := f.s.Client(b)
	if err != nil {
		return nil, err
	}
	return admin.New(link.Seal(link.Admin{Client: cl}))
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
func NewProducer[K, V any](f *Factory, keys producer.Serializer[K], values producer.Serializer[V], opts ...ProducerOpt) (*producer.Producer[K, V], error) {
	if keys == nil || values == nil {
		return nil, fmt.Errorf("%w: NewProducer needs a key and a value serializer", ErrConfig)
	}
	b, cfg, err := f.resolve(RoleProducer, asOpts(opts), nil)
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
	return producer.New(link.Seal(l), keys, values)
}

// NewConsumer returns a consumer of K keys and V values; opts apply on top
// of the factory's. With GroupID and ConsumeTopics it joins the group; with
// topics and no group it consumes every partition of them; with neither,
// assign partitions with Consumer.Assign.
func NewConsumer[K, V any](f *Factory, keys consumer.Deserializer[K], values consumer.Deserializer[V], opts ...ConsumerOpt) (*consumer.Consumer[K, V], error) {
	if keys == nil || values == nil {
		return nil, fmt.Errorf("%w: NewConsumer needs a key and a value deserializer", ErrConfig)
	}
	b, cfg, err := f.resolve(RoleConsumer, asOpts(opts), nil)
	if err != nil {
		return nil, err
	}
	l, err := f.s.Consumer(b)
	if err != nil {
		return nil, err
	}
	l.Group = cfg.consume.groupID != ""
	c, err := consumer.New(link.Seal(l), keys, values)
	if err != nil {
		l.Client.Close() // not handed over
		return nil, err
	}
	return c, nil
}

// KgoClient returns a bare franz-go client that shares the factory's store,
// for anything the wrappers do not cover. Close it when done.
func (f *Factory) KgoClient(opts ...KgoClientOpt) (*kgo.Client, error) {
	b, _, err := f.resolve(RoleKgo, asOpts(opts), nil)
	if err != nil {
		return nil, err
	}
	return f.s.Client(b)
}

// resolve returns the description of a client of role made with opts on
// top of the factory's, and its settings. A closed factory says so first,
// whatever opts say; the session checks again when it makes the client.
func (f *Factory) resolve(role Role, opts []Opt, extra []kgo.Opt) (session.Build, config, error) {
	if f.s.Closed() {
		return session.Build{}, config{}, ErrClosed
	}
	cfg, err := f.clientConfig(role, opts)
	if err != nil {
		return session.Build{}, cfg, err
	}
	b, err := f.describe(cfg, extra)
	return b, cfg, err
}

// clientConfig returns the settings of a client of role made with opts on
// top of the factory's. Security options among opts replace the base's
// security settings as a whole (see SecurityProtocol).
func (f *Factory) clientConfig(role Role, opts []Opt) (config, error) {
	cfg := f.base.clone()
	cfg.role = role
	if slices.ContainsFunc(opts, isSecurity) {
		cfg.security = securityConfig{}
	}
	applyAll(&cfg, opts)
	return cfg, nil
}

// applyAll applies opts to cfg; a nil option is an error, not a panic.
func applyAll(cfg *config, opts []Opt) {
	for i, o := range opts {
		if o == nil {
			cfg.fail("option %d of %d is nil", i+1, len(opts))
			continue
		}
		o.apply(cfg)
	}
}

// asOpts returns role options as plain options.
func asOpts[O Opt](opts []O) []Opt {
	all := make([]Opt, 0, len(opts)+1)
	for _, o := range opts {
		all = append(all, o)
	}
	return all
}
