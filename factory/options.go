package factory

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/rebootstrap"
)

// Opt configures a Factory or one client it makes. Options given to New are
// the base of every client; options given to a client constructor are
// applied on top of them for that client only. Applying an option twice is
// harmless: the last value wins.
type Opt interface{ apply(*config) }

type opt func(*config)

func (o opt) apply(c *config) { o(c) }

// config is everything the options set. Validation happens once, when a
// client is built, so errors name the option and the value.
type config struct {
	seeds        []string
	clientID     string
	strategy     rebootstrap.Strategy
	clusterCheck bool

	requestTimeout time.Duration
	retryBackoff   *time.Duration // nil: javaBackoff

	acks            string         // "all", "1", "0"
	idempotence     *bool          // nil: default (true unless acks is not all)
	linger          *time.Duration // nil: franz-go's 10ms
	deliveryTimeout time.Duration
	compression     string
	groupID         string
	autoOffsetRes   string
	isolationLevel  string
	// rebalance: the consumer's rebalance callbacks and
	// BlockRebalanceOnPoll (see consumergroup.go).
	rebalance rebalanceConfig

	tls       *tls.Config
	sasl      saslConfig
	secProt   string
	sslCA     string
	sslCAFrom string // the key that set sslCA, for errors
	sslCert   string
	sslKey    string
	// sslKeystore is a PEM keystore, key and chain in one file; it and
	// sslCert/sslKey exclude each other.
	sslKeystore string
	sslKeyPass  secret

	// role is the kind of client being made (see withRole); 0 for the
	// factory's base and its own clients.
	role  Role
	hooks []roleHooks

	logger   *slog.Logger
	observer Observer
	kgoOpts  []kgo.Opt
	incCode  int16
	pin      string
	resolver rebootstrap.Resolver
	mode     ConsistencyMode
	errs     []error

	// separate: SeparateClient, a producer's own franz-go client.
	separate bool
	// txnID and txnTimeout: transactional.id and transaction.timeout.ms
	// (see transactions.go); 0 timeout: franz-go's default.
	txnID      string
	txnTimeout time.Duration
	// newClient, when set, builds the franz-go client instead of
	// kgo.NewClient (a GroupTransactSession wraps its own).
	newClient func(...kgo.Opt) (*kgo.Client, error)
	// opaque counts the options applied whose values cannot be compared
	// (KgoOpts, Hooks, HooksPerClient, Resolver, WithObserver): a producer
	// given one more than the factory shares no client (see producerKey).
	opaque int
}

type saslConfig struct {
	mechanism, user string
	pass            secret
	// module is what a sasl.jaas.config named: "PLAIN" or "SCRAM", to be
	// checked against the mechanism; token is ScramLoginModule's
	// tokenauth (a delegation token).
	module string
	token  bool
}

// String shows the mechanism and user; the password only as redacted.
func (s saslConfig) String() string {
	return fmt.Sprintf("sasl.mechanism=%s sasl.username=%s sasl.password=%s", s.mechanism, s.user, s.pass)
}

// Format prints String for every verb: fmt calls no method of an
// unexported field, so printing the struct would show the password.
func (s saslConfig) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// LogValue logs what String shows.
func (s saslConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("mechanism", s.mechanism), slog.String("username", s.user), slog.Any("password", s.pass))
}

// secret is a password. It prints as "[redacted]" with every fmt verb and
// in slog and JSON. fmt calls no method of an unexported field, so the
// types that hold one (saslConfig, config, Factory) redact themselves too.
type secret string

const redacted = "[redacted]"

func (secret) String() string             { return redacted }
func (secret) GoString() string           { return `"` + redacted + `"` }
func (secret) LogValue() slog.Value       { return slog.StringValue(redacted) }
func (secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, redacted) }

// MarshalText keeps encoding/json and friends from writing the secret out.
func (secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

func defaultConfig() config {
	return config{
		strategy:        rebootstrap.Rebootstrap,
		clusterCheck:    true,
		acks:            "all",
		compression:     "none",
		autoOffsetRes:   "latest",
		isolationLevel:  "read_uncommitted",
		secProt:         "PLAINTEXT",
		deliveryTimeout: DefaultDeliveryTimeout,
	}
}

func (c config) clone() config {
	c.seeds = append([]string(nil), c.seeds...)
	c.kgoOpts = append([]kgo.Opt(nil), c.kgoOpts...)
	c.errs = append([]error(nil), c.errs...)
	c.hooks = append([]roleHooks(nil), c.hooks...)
	if c.idempotence != nil {
		v := *c.idempotence
		c.idempotence = &v
	}
	return c
}

// String shows the connection settings of c; never the SASL password.
func (c config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{bootstrap.servers=%s security.protocol=%s", strings.Join(c.seeds, ","), c.secProt)
	if c.sasl != (saslConfig{}) {
		fmt.Fprintf(&b, " %s", c.sasl)
	}
	if c.pin != "" {
		fmt.Fprintf(&b, " cluster=%s", c.pin)
	}
	b.WriteString("}")
	return b.String()
}

// Format prints String for every verb; see secret.
func (c config) Format(f fmt.State, _ rune) { fmt.Fprint(f, c.String()) }

// LogValue logs what String shows.
func (c config) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("bootstrap.servers", strings.Join(c.seeds, ",")),
		slog.String("security.protocol", c.secProt),
	}
	if c.sasl != (saslConfig{}) {
		attrs = append(attrs, slog.Any("sasl", c.sasl))
	}
	if c.pin != "" {
		attrs = append(attrs, slog.String("cluster", c.pin))
	}
	return slog.GroupValue(attrs...)
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// BootstrapServers sets the host:port pairs used to discover the cluster
// (bootstrap.servers). Required. Host names are resolved again on every
// (re)bootstrap, never cached.
func BootstrapServers(addrs ...string) Opt {
	return opt(func(c *config) {
		c.seeds = nil
		for _, a := range addrs {
			for _, s := range strings.Split(a, ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.seeds = append(c.seeds, s)
				}
			}
		}
	})
}

// ClientID sets client.id, sent in every request header. Default "kconsist".
func ClientID(id string) Opt { return opt(func(c *config) { c.clientID = id }) }

// RecoveryStrategy sets metadata.recovery.strategy. Default
// rebootstrap.Rebootstrap. rebootstrap.None also turns the KIP-1242 cluster
// check off, since a client that cannot rebootstrap cannot act on it.
func RecoveryStrategy(s rebootstrap.Strategy) Opt {
	return opt(func(c *config) { c.strategy = s })
}

// ClusterCheck sets metadata.cluster.check.enable (KIP-1242). Default true:
// ApiVersions v5 names the cluster and node the client expects, so a broker
// reached through a stale address answers REBOOTSTRAP_REQUIRED instead of
// serving the request. Turn it off only if a proxy in the path breaks it.
func ClusterCheck(enable bool) Opt { return opt(func(c *config) { c.clusterCheck = enable }) }

// RequestTimeout sets request.timeout.ms: how long a request may wait for its
// response beyond any timeout the request itself carries. Default: franz-go's
// (10s overhead).
func RequestTimeout(d time.Duration) Opt {
	return opt(func(c *config) {
		if d <= 0 {
			c.fail("request.timeout.ms: %v is not positive", d)
		}
		c.requestTimeout = d
	})
}

// RetryBackoff sets retry.backoff.ms, the fixed wait between retries; 0
// retries at once. Default: the Java client's jittered exponential backoff,
// from 100ms (its retry.backoff.ms) doubling up to 1s (its
// retry.backoff.max.ms and reconnect.backoff.max.ms).
func RetryBackoff(d time.Duration) Opt {
	return opt(func(c *config) {
		if d < 0 {
			c.fail("retry.backoff.ms: %v is negative", d)
		}
		c.retryBackoff = &d
	})
}

// Acks sets the producer's acks: "all" (or "-1", the default), "1" or "0".
// Idempotence needs "all"; other values turn it off unless it was asked for
// explicitly, which is then an error.
func Acks(acks string) Opt {
	return producerOpt("acks", func(c *config) {
		switch strings.ToLower(strings.TrimSpace(acks)) {
		case "all", "-1":
			c.acks = "all"
		case "1", "0":
			c.acks = strings.TrimSpace(acks)
		default:
			c.fail("acks: %q is not one of all, -1, 1, 0", acks)
		}
	})
}

// Idempotence sets enable.idempotence. Default true: retries (including
// those after INCONSISTENT_METADATA) never duplicate or reorder records.
func Idempotence(enable bool) Opt {
	return producerOpt("enable.idempotence", func(c *config) { c.idempotence = &enable })
}

// Linger sets linger.ms, how long the producer waits to fill a batch; 0
// sends as soon as possible. Default: franz-go's 10ms.
func Linger(d time.Duration) Opt {
	return producerOpt("linger.ms", func(c *config) {
		if d < 0 {
			c.fail("linger.ms: %v is negative", d)
		}
		c.linger = &d
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
func DeliveryTimeout(d time.Duration) Opt {
	return producerOpt("delivery.timeout.ms", func(c *config) {
		if d <= 0 {
			c.fail("delivery.timeout.ms: %v is not positive", d)
			return
		}
		c.deliveryTimeout = d
	})
}

// Compression sets compression.type: none (default), gzip, snappy, lz4 or
// zstd.
func Compression(codec string) Opt {
	return producerOpt("compression.type", func(c *config) {
		switch v := strings.ToLower(strings.TrimSpace(codec)); v {
		case "none", "gzip", "snappy", "lz4", "zstd":
			c.compression = v
		default:
			c.fail("compression.type: %q is not one of none, gzip, snappy, lz4, zstd", codec)
		}
	})
}

// GroupID sets group.id. A consumer with a group id and topics joins the
// group; without one it consumes the partitions it is assigned.
func GroupID(id string) Opt { return consumerOpt("group.id", func(c *config) { c.groupID = id }) }

// AutoOffsetReset sets auto.offset.reset: earliest, latest (default) or none
// (an out-of-range or missing offset is an error).
func AutoOffsetReset(where string) Opt {
	return consumerOpt("auto.offset.reset", func(c *config) {
		switch v := strings.ToLower(strings.TrimSpace(where)); v {
		case "earliest", "latest", "none":
			c.autoOffsetRes = v
		default:
			c.fail("auto.offset.reset: %q is not one of earliest, latest, none", where)
		}
	})
}

// IsolationLevel sets isolation.level: read_uncommitted (default) or
// read_committed.
func IsolationLevel(level string) Opt {
	return consumerOpt("isolation.level", func(c *config) {
		switch v := strings.ToLower(strings.TrimSpace(level)); v {
		case "read_uncommitted", "read_committed":
			c.isolationLevel = v
		default:
			c.fail("isolation.level: %q is not one of read_uncommitted, read_committed", level)
		}
	})
}

// SecurityProtocol sets security.protocol: PLAINTEXT (default), SSL,
// SASL_PLAINTEXT or SASL_SSL. TLS and SASL also set it, so it is only
// needed to say SSL without a custom tls.Config (system roots are used), or
// to turn a layer off: a protocol without TLS drops the TLS settings given
// before it, one without SASL drops the SASL ones, so that one client can
// say SecurityProtocol("PLAINTEXT") over a factory configured for SSL.
func SecurityProtocol(p string) Opt {
	return opt(func(c *config) {
		switch v := strings.ToUpper(strings.TrimSpace(p)); v {
		case "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL":
			c.secProt = v
			if !strings.HasSuffix(v, "SSL") {
				c.tls, c.sslCA, c.sslCAFrom, c.sslCert, c.sslKey = nil, "", "", "", ""
				c.sslKeystore, c.sslKeyPass = "", ""
			}
			if !strings.HasPrefix(v, "SASL") {
				c.sasl = saslConfig{}
			}
		default:
			c.fail("security.protocol: %q is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", p)
		}
	})
}

// TLS encrypts connections with cfg: security.protocol becomes SSL, or
// SASL_SSL with SASL. The handshake is done by the consistency dialer, since
// franz-go cannot combine its own TLS dialing with a custom dialer.
func TLS(cfg *tls.Config) Opt {
	return opt(func(c *config) {
		c.tls = cfg
		if cfg == nil {
			return
		}
		if strings.HasPrefix(c.secProt, "SASL") {
			c.secProt = "SASL_SSL"
		} else {
			c.secProt = "SSL"
		}
	})
}

// SASL authenticates with mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512:
// security.protocol becomes SASL_PLAINTEXT, or SASL_SSL with TLS.
func SASL(mechanism, username, password string) Opt {
	return opt(func(c *config) {
		c.sasl = saslConfig{mechanism: strings.ToUpper(strings.TrimSpace(mechanism)), user: username, pass: secret(password)}
		if strings.HasSuffix(c.secProt, "SSL") {
			c.secProt = "SASL_SSL"
		} else {
			c.secProt = "SASL_PLAINTEXT"
		}
	})
}

// Logger sends the SDK's and franz-go's logs to l. Default: no logs.
func Logger(l *slog.Logger) Opt { return opt(func(c *config) { c.logger = l }) }

// WithObserver reports every consistency event to o, as an [Event] of one
// of these kinds: [EventTokenAdvanced], [EventInconsistentMetadata],
// [EventMisroute], [EventRebootstrap], [EventClusterChanged],
// [EventStoreReset], [EventTokenHealed], [EventConsistencyOff] and
// [EventAuthFailed]. See [Observer] for where OnEvent runs.
func WithObserver(o Observer) Opt {
	return opt(func(c *config) {
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
func KgoOpts(opts ...kgo.Opt) Opt {
	return opt(func(c *config) {
		c.kgoOpts = append(c.kgoOpts, opts...)
		c.opaque++
	})
}

// InconsistentMetadataCode sets the error code a KIP-1243 broker uses for
// INCONSISTENT_METADATA. No code is assigned upstream yet; default 1243.
func InconsistentMetadataCode(code int16) Opt {
	return opt(func(c *config) {
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
func PinCluster(id string) Opt { return opt(func(c *config) { c.pin = id }) }

// Resolver replaces DNS resolution of bootstrap and broker host names (for
// tests, or a custom service discovery). It is called on every dial.
func Resolver(r rebootstrap.Resolver) Opt {
	return opt(func(c *config) {
		c.resolver = r
		c.opaque++
	})
}

// Role is a kind of client a factory makes, for options that only some
// clients use and for hooks. Roles combine with |.
type Role uint8

const (
	// RoleAdmin is a client made by Factory.Admin.
	RoleAdmin Role = 1 << iota
	// RoleProducer is a client made by NewProducer.
	RoleProducer
	// RoleConsumer is a client made by NewConsumer.
	RoleConsumer
	// RoleKgo is a bare franz-go client made by Factory.KgoClient, which
	// can do anything and so takes every option.
	RoleKgo

	// AllRoles is every client the factory hands out.
	AllRoles = RoleAdmin | RoleProducer | RoleConsumer | RoleKgo
)

// String names the role: "admin", "producer", "consumer", "kgo", or
// several joined by "|".
func (r Role) String() string {
	var names []string
	for _, n := range []struct {
		r    Role
		name string
	}{{RoleAdmin, "admin"}, {RoleProducer, "producer"}, {RoleConsumer, "consumer"}, {RoleKgo, "kgo"}} {
		if r&n.r != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, "|")
}

// roleOpt is an option that only clients of roles use. Given to New it is
// part of the base and reaches only those clients' franz-go settings;
// given to a constructor of another role it is an error (see checkRoles).
type roleOpt struct {
	key   string // the property it sets, for errors
	roles Role
	fn    func(*config)
}

func (o roleOpt) apply(c *config) { o.fn(c) }

func producerOpt(key string, fn func(*config)) Opt {
	return roleOpt{key: key, roles: RoleProducer | RoleKgo, fn: fn}
}

func consumerOpt(key string, fn func(*config)) Opt {
	return roleOpt{key: key, roles: RoleConsumer | RoleKgo, fn: fn}
}

// roleMark tells the options of one client which role it has.
type roleMark Role

func (m roleMark) apply(c *config) { c.role = Role(m) }

// withRole returns a client constructor's options marked with its role,
// without writing into the caller's slice.
func withRole(opts []Opt, r Role) []Opt {
	return append(opts[:len(opts):len(opts)], roleMark(r))
}

// checkRoles refuses options a client of role r would ignore (GroupID on a
// producer, Acks on a consumer). Unlike the Java client, which logs "were
// supplied but are not used" and goes on, this is an error: a Go option
// given to one constructor was meant for that client, and a warning in a
// log is easily missed while the setting silently does nothing. Options
// given to New are the base of every client and are never refused: a
// properties file shared by all roles belongs there.
func checkRoles(opts []Opt, r Role) error {
	var misplaced []string
	for _, o := range opts {
		if ro, ok := o.(roleOpt); ok && ro.roles&r == 0 {
			misplaced = append(misplaced, ro.key+" (a "+(ro.roles&^RoleKgo).String()+" setting)")
		}
	}
	if len(misplaced) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: not used by %s clients; give it to New, the base of every client, or to the client that uses it", ErrConfig, strings.Join(misplaced, ", "), r)
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
	// Role is the client's role: one of RoleAdmin, RoleProducer,
	// RoleConsumer, RoleKgo.
	Role Role
	// ID numbers the franz-go clients built in this process from 1, a
	// client built again after a cluster change included: two clients
	// alive at once never share one.
	ID uint64
}

// clientIDs numbers ClientInfo.ID.
var clientIDs atomic.Uint64

// Hooks adds franz-go hooks (kgo.Hook: kotel, kslog, your own) to every
// client of roles that the factory builds (AllRoles: all of them),
// including the franz-go client a producer or consumer builds again after
// a cluster change. The factory's internal clients (cluster checks, token
// questions) get none. Hooks given to New and to a client constructor add
// up.
//
// A hook instance installed on several clients must support that: kotel's
// do. kprom.Metrics does not (it registers its metrics when installed and
// panics when installed twice, franz-go issue #1068): make one per client
// with HooksPerClient.
func Hooks(roles Role, hooks ...kgo.Hook) Opt {
	hooks = append([]kgo.Hook(nil), hooks...)
	return opt(func(c *config) {
		c.hooks = append(c.hooks, roleHooks{roles: roles, hooks: hooks})
		c.opaque++
	})
}

// HooksPerClient calls newHooks for every franz-go client the factory
// builds for its users (see Hooks) and installs the hooks it returns on that
// client alone: for hooks that hold one client's state, such as
// kprom.Metrics, labelled with info.Role and info.ID. newHooks is called
// while the client is made; it must not block.
func HooksPerClient(newHooks func(info ClientInfo) []kgo.Hook) Opt {
	return opt(func(c *config) {
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
