package factory

import (
	"crypto/tls"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/rebootstrap"
)

// Options are typed by the clients that take them, from one table
// (roleTable): each constructor takes the options of its role and
// ClientOpts, so a producer option given to NewConsumer or an admin client
// does not compile, and every client that takes an option honours it.
//
//   - Opt is anything New takes. Options given to New are the base of every
//     client the factory makes; a role's options there reach only that
//     role's clients (Acks only producers, ConsumeTopics only consumers).
//     Some options exist only for the factory as a whole (WithStore,
//     Consistency) and are plain Opts.
//   - ClientOpt is an option every client takes: connection, security,
//     logging, hooks. Given to one client it applies on top of the base.
//   - ProducerOpt, ConsumerOpt: options of one role. Both are TransactOpts
//     too, since a GroupTransactSession consumes and produces; both are
//     KgoClientOpts, since a bare franz-go client does everything, and it
//     honours them as a producer or a consumer would (a group's rebalance
//     callbacks included).
//   - AdminOpt, TransactOpt, KgoClientOpt: what Factory.Admin,
//     NewGroupTransactSession and Factory.KgoClient take.
//
// A value an option cannot use (a nil function, an unknown enum value,
// Hooks for no role) is an error wrapping ErrConfig that names the option,
// when the client is built. franz-go's own options given through KgoOpts
// are franz-go's: kgo takes any of them on any client.
//
// Applying an option twice is harmless: the last value wins. Strings appear
// only in properties (FromProperties); Go options take typed values.
type Opt interface {
	apply(*config)
	// kind is what the option sets (see roleTable).
	kind() kind
}

// ProducerOpt is an option NewProducer takes.
type ProducerOpt interface {
	Opt
	producerOpt()
	transactOpt()
	kgoClientOpt()
}

// ConsumerOpt is an option NewConsumer takes.
type ConsumerOpt interface {
	Opt
	consumerOpt()
	transactOpt()
	kgoClientOpt()
}

// AdminOpt is an option Factory.Admin takes.
type AdminOpt interface {
	Opt
	adminOpt()
}

// TransactOpt is an option NewGroupTransactSession takes: any producer or
// consumer option.
type TransactOpt interface {
	Opt
	transactOpt()
}

// KgoClientOpt is an option Factory.KgoClient takes: any client option.
type KgoClientOpt interface {
	Opt
	kgoClientOpt()
}

// ClientOpt is an option every client takes.
type ClientOpt interface {
	ProducerOpt
	ConsumerOpt
	AdminOpt
}

// factoryOpt is an option only New takes.
type factoryOpt func(*config)

func (o factoryOpt) apply(c *config) { o(c) }
func (factoryOpt) kind() kind        { return kindFactory }

// clientOpt is an option every client takes. security marks the options
// that set security: given to a client, they replace the base's security
// settings as a whole (see SecurityProtocol).
type clientOpt struct {
	fn       func(*config)
	security bool
}

func (o clientOpt) apply(c *config) { o.fn(c) }
func (clientOpt) kind() kind        { return kindClient }
func (clientOpt) producerOpt()      {}
func (clientOpt) consumerOpt()      {}
func (clientOpt) adminOpt()         {}
func (clientOpt) transactOpt()      {}
func (clientOpt) kgoClientOpt()     {}

type producerOnly func(*config)

func (o producerOnly) apply(c *config) { o(c) }
func (producerOnly) kind() kind        { return kindProduce }
func (producerOnly) producerOpt()      {}
func (producerOnly) transactOpt()      {}
func (producerOnly) kgoClientOpt()     {}

type consumerOnly func(*config)

func (o consumerOnly) apply(c *config) { o(c) }
func (consumerOnly) kind() kind        { return kindConsume }
func (consumerOnly) consumerOpt()      {}
func (consumerOnly) transactOpt()      {}
func (consumerOnly) kgoClientOpt()     {}

func client(fn func(*config)) ClientOpt   { return clientOpt{fn: fn} }
func security(fn func(*config)) ClientOpt { return clientOpt{fn: fn, security: true} }

// isSecurity reports whether o sets security (see clientOpt).
func isSecurity(o Opt) bool {
	c, ok := o.(clientOpt)
	return ok && c.security
}

// WithStore makes the factory's clients share store, for a store of your
// own (one shared between processes, say). Default: a new in-process
// consistency.MemoryStore. A factory-wide setting.
func WithStore(store consistency.Store) Opt {
	return factoryOpt(func(c *config) {
		if store == nil {
			c.fail("WithStore: nil store")
			return
		}
		c.store = store
	})
}

// BootstrapServers sets the host:port pairs used to discover the cluster
// (bootstrap.servers). Required. Host names are resolved again on every
// (re)bootstrap, never cached.
func BootstrapServers(addrs ...string) ClientOpt {
	var seeds []string
	for _, a := range addrs {
		for _, s := range strings.Split(a, ",") {
			if s = strings.TrimSpace(s); s != "" {
				seeds = append(seeds, s)
			}
		}
	}
	joined := strings.Join(seeds, ",")
	return client(func(c *config) { c.conn.seeds = joined })
}

// ClientID sets client.id, sent in every request header. Default "kconsist".
func ClientID(id string) ClientOpt { return client(func(c *config) { c.conn.clientID = id }) }

// RecoveryStrategy sets metadata.recovery.strategy. Default
// rebootstrap.Rebootstrap. rebootstrap.None also turns the KIP-1242 cluster
// check off, since a client that cannot rebootstrap cannot act on it.
func RecoveryStrategy(s rebootstrap.Strategy) ClientOpt {
	return client(func(c *config) {
		if s != rebootstrap.Rebootstrap && s != rebootstrap.None {
			c.fail("metadata.recovery.strategy: %d is not one of rebootstrap.Rebootstrap, rebootstrap.None", int8(s))
			return
		}
		c.conn.strategy = s
	})
}

// ClusterCheck sets metadata.cluster.check.enable (KIP-1242). Default true:
// ApiVersions v5 names the cluster and node the client expects, so a broker
// reached through a stale address answers REBOOTSTRAP_REQUIRED instead of
// serving the request. Turn it off only if a proxy in the path breaks it.
func ClusterCheck(enable bool) ClientOpt {
	return client(func(c *config) { c.conn.clusterCheck = enable })
}

// RequestTimeout sets request.timeout.ms: how long a request may wait for its
// response beyond any timeout the request itself carries. Default: franz-go's
// (10s overhead).
func RequestTimeout(d time.Duration) ClientOpt {
	return client(func(c *config) {
		if d <= 0 {
			c.fail("request.timeout.ms: %v is not positive", d)
		}
		c.conn.requestTimeout = d
	})
}

// RetryBackoff sets retry.backoff.ms, the fixed wait between retries; 0
// retries at once. Default: the Java client's jittered exponential backoff,
// from 100ms (its retry.backoff.ms) doubling up to 1s (its
// retry.backoff.max.ms and reconnect.backoff.max.ms).
func RetryBackoff(d time.Duration) ClientOpt {
	return client(func(c *config) {
		if d < 0 {
			c.fail("retry.backoff.ms: %v is negative", d)
		}
		c.conn.retryBackoff, c.conn.retryBackoffSet = d, true
	})
}

// RequiredAcks sets the producer's acks. Default AllISRAcks. Idempotence
// needs AllISRAcks; other values turn it off unless it was asked for
// explicitly, which is then an error.
func RequiredAcks(acks Acks) ProducerOpt {
	return producerOnly(func(c *config) {
		if !acks.valid() {
			c.fail("acks: %v is not one of AllISRAcks, LeaderAck, NoAck", acks)
			return
		}
		c.produce.acks = acks
	})
}

// Idempotence sets enable.idempotence. Default true: retries (including
// those after INCONSISTENT_METADATA) never duplicate or reorder records.
func Idempotence(enable bool) ProducerOpt {
	return producerOnly(func(c *config) {
		c.produce.idempotence = 0
		if enable {
			c.produce.idempotence = 1
		}
	})
}

// Linger sets linger.ms, how long the producer waits to fill a batch; 0
// sends as soon as possible. Default: franz-go's 10ms.
func Linger(d time.Duration) ProducerOpt {
	return producerOnly(func(c *config) {
		if d < 0 {
			c.fail("linger.ms: %v is negative", d)
		}
		c.produce.linger, c.produce.lingerSet = d, true
	})
}

// DefaultDeliveryTimeout is the default of delivery.timeout.ms, the Java
// client's: 2 minutes.
const DefaultDeliveryTimeout = 2 * time.Minute

// DeliveryTimeout sets delivery.timeout.ms, the bound on the time a record
// may take from Produce to its outcome, retries included (franz-go's
// RecordDeliveryTimeout). A record still unacknowledged then fails; when
// it waited for a broker that stayed behind the consistency token, its
// error wraps consistency.ErrInconsistentMetadata. Default:
// DefaultDeliveryTimeout, as in the Java client (franz-go's own default is
// no bound).
func DeliveryTimeout(d time.Duration) ProducerOpt {
	return producerOnly(func(c *config) {
		if d <= 0 {
			c.fail("delivery.timeout.ms: %v is not positive", d)
			return
		}
		c.produce.deliveryTimeout = d
	})
}

// Compression sets compression.type. Default CodecNone.
func Compression(codec Codec) ProducerOpt {
	return producerOnly(func(c *config) {
		if int(codec) >= len(codecNames) {
			c.fail("compression.type: %v is not one of CodecNone, CodecGzip, CodecSnappy, CodecLz4, CodecZstd", codec)
			return
		}
		c.produce.compression = codec
	})
}

// GroupID sets group.id. A consumer with a group id and topics joins the
// group; without one it consumes the partitions it is assigned.
func GroupID(id string) ConsumerOpt {
	return consumerOnly(func(c *config) { c.consume.groupID = id })
}

// ConsumeTopics sets the topics a consumer reads: in its group with
// GroupID, else every partition of them. Without topics, assign partitions
// with Consumer.Assign. Required by NewGroupTransactSession.
func ConsumeTopics(topics ...string) ConsumerOpt {
	topics = append([]string(nil), topics...)
	return consumerOnly(func(c *config) { c.topics = topics })
}

// AutoOffsetReset sets auto.offset.reset. Default ResetLatest.
func AutoOffsetReset(where OffsetReset) ConsumerOpt {
	return consumerOnly(func(c *config) {
		if int(where) >= len(resetNames) {
			c.fail("auto.offset.reset: %v is not one of ResetLatest, ResetEarliest, ResetNone", where)
			return
		}
		c.consume.reset = where
	})
}

// IsolationLevel sets isolation.level. Default ReadUncommitted.
func IsolationLevel(level Isolation) ConsumerOpt {
	return consumerOnly(func(c *config) {
		if int(level) >= len(isolationNames) {
			c.fail("isolation.level: %v is not one of ReadUncommitted, ReadCommitted", level)
			return
		}
		c.consume.isolation = level
	})
}

// SecurityProtocol sets security.protocol. Default: derived from the other
// settings (ProtocolDefault): SSL with TLS, SASL_PLAINTEXT with SASL,
// SASL_SSL with both, PLAINTEXT with neither; so it is needed only to say
// SSL with the system's roots and no other TLS setting. A protocol that
// contradicts the settings given (TLS settings with PLAINTEXT, SASL with
// SSL) is an error when the client is built, whatever the order the
// options came in.
//
// Security options given to a client replace the base's security settings
// as a whole: a client given SecurityProtocol(Plaintext) over a factory
// configured for SSL connects in plaintext, one given SASL over a factory
// with TLS has SASL alone unless it gives TLS too.
func SecurityProtocol(p Protocol) ClientOpt {
	return security(func(c *config) {
		if p == ProtocolDefault || int(p) >= len(protocolNames) {
			c.fail("security.protocol: %v is not one of Plaintext, SSL, SASLPlaintext, SASLSSL", p)
			return
		}
		c.security.protocolSet = p
	})
}

// TLS encrypts connections with cfg (security.protocol SSL, or SASL_SSL
// with SASL). The handshake is done by the consistency dialer, since
// franz-go cannot combine its own TLS dialing with a custom dialer. A nil
// cfg is an error: for SSL with the system's roots and no other setting,
// use SecurityProtocol(SSL). A security setting: see SecurityProtocol.
func TLS(cfg *tls.Config) ClientOpt {
	return security(func(c *config) {
		if cfg == nil {
			c.fail("TLS: nil *tls.Config (for SSL with the system's roots, use SecurityProtocol(SSL))")
			return
		}
		c.security.tls = cfg
	})
}

// SASL authenticates with mechanism (security.protocol SASL_PLAINTEXT, or
// SASL_SSL with TLS). A security setting: see SecurityProtocol.
func SASL(mechanism Mechanism, username, password string) ClientOpt {
	return security(func(c *config) {
		if mechanism == mechanismUnset || int(mechanism) >= len(mechanismNames) {
			c.fail("sasl.mechanism: %v is not one of Plain, ScramSHA256, ScramSHA512", mechanism)
			return
		}
		c.security.sasl = saslConfig{mechanism: mechanism, user: username, pass: secret(password)}
	})
}

// Logger sends the SDK's and franz-go's logs to l. Default: no logs.
func Logger(l *slog.Logger) ClientOpt { return client(func(c *config) { c.logger = l }) }

// WithObserver reports every consistency event to o, as an [Event] of one
// of these kinds: [EventTokenAdvanced], [EventInconsistentMetadata],
// [EventMisroute], [EventRebootstrap], [EventClusterChanged],
// [EventStoreReset], [EventTokenHealed], [EventConsistencyOff],
// [EventConsistencyLimited], [EventAuthFailed], [EventStoreConflict],
// [EventWriteUnlearnt] and [EventClusterCheckOff]. See [Observer] for where OnEvent runs.
func WithObserver(o Observer) ClientOpt {
	return client(func(c *config) {
		c.observer = o
		c.opaque++
	})
}

// KgoOpts passes raw franz-go options through, applied after everything the
// factory sets. The escape hatch for what has no factory option; it can undo
// the consistency guarantee (e.g. a kgo.Dialer of your own replaces the one
// that stamps tokens), so use it with care.
//
// Two options that would silently undo a factory setting are refused when
// the client is built, with an error wrapping ErrConfig that names them:
//   - kgo.OnRebootstrapRequired: the factory's own hook resets the store
//     and reports the rebootstrap; use WithObserver to hear about it.
//   - kgo.MaxVersions allowing ApiVersions v5 or later while the cluster
//     check is off (ClusterCheck(false) or RecoveryStrategy(None)): the
//     check is turned off by capping ApiVersions at v4, so cap key 18 at 4
//     in your versions too (kversion.Versions.SetMaxKeyVersion(18, 4)).
//
// A kgo.DialTimeout is honoured: it bounds each dial, TLS handshake
// included (zero keeps kgo's default, 10s).
func KgoOpts(opts ...kgo.Opt) ClientOpt {
	opts = append([]kgo.Opt(nil), opts...)
	return client(func(c *config) {
		for i, o := range opts {
			if o == nil {
				c.fail("KgoOpts: option %d of %d is nil", i+1, len(opts))
				return
			}
		}
		c.kgoOpts = append(c.kgoOpts, opts...)
		c.opaque++
	})
}

// InconsistentMetadataCode sets the error code a KIP-1243 broker uses for
// INCONSISTENT_METADATA. No code is assigned upstream yet; default 1243.
func InconsistentMetadataCode(code int16) ClientOpt {
	return client(func(c *config) {
		if code <= 0 {
			c.fail("InconsistentMetadataCode: %d is not a positive error code", code)
		}
		c.incCode = code
	})
}

// PinCluster pins the cluster id the clients may talk to. A KIP-1243
// response from another cluster closes the connection, and a rebootstrap
// that lands on another cluster fails in-flight work with an error that
// satisfies errors.Is(err, rebootstrap.ErrClusterChanged). Without a pin the
// clients follow the bootstrap servers to a new cluster, as the Java client
// does, and the store is reset.
func PinCluster(id string) ClientOpt { return client(func(c *config) { c.pin = id }) }

// Resolver replaces DNS resolution of bootstrap and broker host names (for
// tests, or a custom service discovery). It is called on every dial.
func Resolver(r rebootstrap.Resolver) ClientOpt {
	return client(func(c *config) {
		c.resolver = r
		c.opaque++
	})
}

// roleHooks are franz-go hooks for the clients of roles: fixed ones, or
// made per client by fn.
type roleHooks struct {
	roles Role
	hooks []kgo.Hook
	fn    func(ClientInfo) []kgo.Hook
}

// ClientInfo describes a franz-go client the factory is about to build, for
// HooksPerClient.
type ClientInfo struct {
	// Role is the client's role: RoleAdmin, RoleProducer, RoleConsumer,
	// RoleKgo, or RoleTransactSession.
	Role Role
	// ID numbers the franz-go clients built in this process from 1, a
	// client built again after a cluster change included: two clients
	// alive at once never share one.
	ID uint64
}

// clientIDs numbers ClientInfo.ID.
var clientIDs atomic.Uint64

// Hooks adds franz-go hooks (kgo.Hook: kotel, kslog, your own) to every
// client of roles that the factory builds (AllRoles: all of them; roles
// must name at least one, and a hook must not be nil),
// including the franz-go client a producer or consumer builds again after
// a cluster change. The factory's internal clients (cluster checks, token
// questions) get none. Hooks given to New and to a client constructor add
// up.
//
// A hook instance installed on several clients must support that: kotel's
// do. kprom.Metrics does not (it registers its metrics when installed and
// panics when installed twice, franz-go issue #1068): make one per client
// with HooksPerClient.
func Hooks(roles Role, hooks ...kgo.Hook) ClientOpt {
	hooks = append([]kgo.Hook(nil), hooks...)
	return client(func(c *config) {
		if err := roles.check(); err != nil {
			c.fail("Hooks: %v", err)
			return
		}
		for i, h := range hooks {
			if h == nil {
				c.fail("Hooks: hook %d of %d is nil", i+1, len(hooks))
				return
			}
		}
		c.hooks = append(c.hooks, roleHooks{roles: roles, hooks: hooks})
		c.opaque++
	})
}

// HooksPerClient calls newHooks for every franz-go client the factory
// builds for its users (see Hooks) and installs the hooks it returns on that
// client alone: for hooks that hold one client's state, such as
// kprom.Metrics, labelled with info.Role and info.ID. newHooks is called
// while the client is made; it must not block.
func HooksPerClient(newHooks func(info ClientInfo) []kgo.Hook) ClientOpt {
	return client(func(c *config) {
		if newHooks == nil {
			c.fail("HooksPerClient: nil function")
			return
		}
		c.hooks = append(c.hooks, roleHooks{roles: AllRoles, fn: newHooks})
		c.opaque++
	})
}

// hookOpts returns the franz-go options that install c's hooks on one new
// client of c.role.
func (c *config) hookOpts() []kgo.Opt {
	var hooks []kgo.Hook
	var info ClientInfo
	for _, h := range c.hooks {
		if h.roles&c.role == 0 {
			continue
		}
		hooks = append(hooks, h.hooks...)
		if h.fn != nil {
			if info.ID == 0 {
				info = ClientInfo{Role: c.role, ID: clientIDs.Add(1)}
			}
			hooks = append(hooks, h.fn(info)...)
		}
	}
	if len(hooks) == 0 {
		return nil
	}
	return []kgo.Opt{kgo.WithHooks(hooks...)}
}
