package factory

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/rebootstrap"
)

// config is everything the options set, split by concern. Each concern
// that decides whether two clients may share a franz-go client, or whether
// the factory's cluster probes speak for a client, is a comparable struct:
// equality is ==, and a field added to one cannot be forgotten by a
// hand-written comparison. Validation happens once, when a client is
// built, so errors name the option and the value.
type config struct {
	conn     connConfig
	security securityConfig
	produce  produceConfig
	consume  consumeConfig
	txn      txnConfig
	// rebalance: the consumer's rebalance callbacks and
	// BlockRebalanceOnPoll (see consumergroup.go); functions, so not
	// comparable, and never part of a producer's client.
	rebalance rebalanceConfig

	// role is the kind of client being made; 0 for the factory's base and
	// its own clients.
	role  Role
	hooks []roleHooks

	store    consistency.Store
	mode     ConsistencyMode
	logger   *slog.Logger
	observer Observer
	kgoOpts  []kgo.Opt
	incCode  int16
	pin      string
	resolver rebootstrap.Resolver
	errs     []error

	// separate: SeparateClient, a producer's own franz-go client.
	separate bool
	// topics: ConsumeTopics.
	topics []string
	// newClient, when set, builds the franz-go client instead of
	// kgo.NewClient (a GroupTransactSession wraps its own).
	newClient func(...kgo.Opt) (*kgo.Client, error)
	// opaque counts the options applied whose values cannot be compared
	// (KgoOpts, Hooks, HooksPerClient, Resolver, WithObserver): a producer
	// given one more than the factory shares no client (see producerKey).
	opaque int
}

// connConfig is how a client reaches the cluster and retries.
type connConfig struct {
	seeds           string // comma-separated, as bootstrap.servers
	clientID        string
	strategy        rebootstrap.Strategy
	clusterCheck    bool
	requestTimeout  time.Duration
	retryBackoff    time.Duration
	retryBackoffSet bool // false: the Java client's backoff (javaBackoff)
}

// seedList returns the bootstrap servers one by one.
func (c connConfig) seedList() []string {
	if c.seeds == "" {
		return nil
	}
	return strings.Split(c.seeds, ",")
}

// securityConfig is the security of a client's connections. The settings
// given in one list of options add up whatever their order: the protocol is
// decided when the client is built (see securityConfig.protocol).
type securityConfig struct {
	protocolSet Protocol // SecurityProtocol; ProtocolDefault: derived
	tls         *tls.Config
	sasl        saslConfig
	caFile      string
	caFrom      string // the key that set caFile, for errors
	certFile    string
	keyFile     string
	// keystore is a PEM keystore, key and chain in one file; it and
	// certFile/keyFile exclude each other.
	keystore string
	keyPass  secret
}

// hasTLS reports whether any TLS setting is given.
func (s securityConfig) hasTLS() bool {
	return s.tls != nil || s.caFile != "" || s.certFile != "" || s.keyFile != "" || s.keystore != "" || s.keyPass != ""
}

// protocol is the protocol the client uses: the one set, or the one the
// other settings ask for.
func (s securityConfig) protocol() Protocol {
	if s.protocolSet != ProtocolDefault {
		return s.protocolSet
	}
	switch tlsOn, saslOn := s.hasTLS(), s.sasl != (saslConfig{}); {
	case tlsOn && saslOn:
		return SASLSSL
	case tlsOn:
		return SSL
	case saslOn:
		return SASLPlaintext
	}
	return Plaintext
}

// produceConfig is a producer's: only producers' clients get it.
type produceConfig struct {
	acks            Acks
	idempotence     int8 // -1 unset (true unless acks is not all), 0 false, 1 true
	linger          time.Duration
	lingerSet       bool // false: franz-go's 10ms
	deliveryTimeout time.Duration
	compression     Codec
}

// consumeConfig is a consumer's: only consumers' clients get it.
type consumeConfig struct {
	groupID   string
	reset     OffsetReset
	isolation Isolation
}

// txnConfig is a transactional producer's (see transactions.go).
type txnConfig struct {
	id      string
	timeout time.Duration // 0: franz-go's default
}

type saslConfig struct {
	mechanism Mechanism
	user      string
	pass      secret
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
	return slog.GroupValue(slog.String("mechanism", s.mechanism.String()), slog.String("username", s.user), slog.Any("password", s.pass))
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
		conn: connConfig{
			strategy:     rebootstrap.Rebootstrap,
			clusterCheck: true,
		},
		produce: produceConfig{
			acks:            AllISRAcks,
			idempotence:     -1,
			deliveryTimeout: DefaultDeliveryTimeout,
		},
	}
}

func (c config) clone() config {
	c.kgoOpts = append([]kgo.Opt(nil), c.kgoOpts...)
	c.errs = append([]error(nil), c.errs...)
	c.hooks = append([]roleHooks(nil), c.hooks...)
	c.topics = append([]string(nil), c.topics...)
	return c
}

// String shows the connection settings of c; never the SASL password.
func (c config) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{bootstrap.servers=%s security.protocol=%s", c.conn.seeds, c.security.protocol())
	if c.security.sasl != (saslConfig{}) {
		fmt.Fprintf(&b, " %s", c.security.sasl)
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
		slog.String("bootstrap.servers", c.conn.seeds),
		slog.String("security.protocol", c.security.protocol().String()),
	}
	if c.security.sasl != (saslConfig{}) {
		attrs = append(attrs, slog.Any("sasl", c.security.sasl))
	}
	if c.pin != "" {
		attrs = append(attrs, slog.String("cluster", c.pin))
	}
	return slog.GroupValue(attrs...)
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}
