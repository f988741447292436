package factory

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kconsist/kconsist/internal/session"
)

// describe checks cfg, the settings of one client, and translates it into
// the session's description of its franz-go client; extra are the options
// of the client's kind.
func (f *Factory) describe(cfg config, extra []kgo.Opt) (session.Build, error) {
	if _, err := cfg.build(); err != nil {
		return session.Build{}, err
	}
	d := baseBuild(cfg)
	d.Extra = extra
	d.Observer = f.clientEvents(cfg)
	d.Hooks = cfg.hookOpts
	d.NewClient = cfg.newClient
	d.BaseSecurity = f.sameSecurity(cfg)
	return d, nil
}

// baseBuild is the part of the description of a client with checked
// settings cfg that the session's own clients (cluster checks, token
// questions) use too.
func baseBuild(cfg config) session.Build {
	return session.Build{
		Settings: func() ([]kgo.Opt, *tls.Config, error) {
			b, err := cfg.build()
			return b.opts, b.tls, err
		},
		KgoOpts:                  cfg.kgoOpts,
		Seeds:                    cfg.conn.seedList(),
		Pin:                      cfg.pin,
		Strategy:                 cfg.conn.strategy,
		ClusterCheck:             cfg.conn.clusterCheck,
		Resolver:                 cfg.resolver,
		InconsistentMetadataCode: cfg.incCode,
		Logger:                   cfg.logger,
		Recheck:                  cfg.recheckEvery(),
	}
}

// sameSecurity reports whether the watcher's probes, made with the
// factory's base settings, speak for a client with settings cfg: not for a
// client with its own bootstrap servers, credentials or TLS settings. (A
// kgo.SASL or dialer in KgoOpts is not compared.)
func (f *Factory) sameSecurity(cfg config) bool {
	return cfg.security == f.base.security && cfg.conn.seeds == f.base.conn.seeds
}

// recheckEvery is how often a pinned producer whose cluster is gone asks the
// bootstrap servers again: retry.backoff.ms if set, else 1s (the Java
// client's reconnect.backoff.max.ms).
func (c *config) recheckEvery() time.Duration {
	if c.conn.retryBackoffSet && c.conn.retryBackoff > 0 {
		return c.conn.retryBackoff
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
	if c.conn.seeds == "" {
		errs = append(errs, errors.New("bootstrap.servers: required, none given"))
	}
	p := c.produce
	idem := p.acks == AllISRAcks
	if p.idempotence >= 0 {
		if p.idempotence == 1 && p.acks != AllISRAcks {
			errs = append(errs, fmt.Errorf("enable.idempotence: true needs acks=all, have acks=%s", p.acks))
		}
		idem = p.idempotence == 1 && p.acks == AllISRAcks
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.conn.seedList()...),
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
	if c.conn.clientID != "" {
		opts = append(opts, kgo.ClientID(c.conn.clientID))
	} else {
		opts = append(opts, kgo.ClientID("kconsist"))
	}
	if c.conn.requestTimeout > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(c.conn.requestTimeout))
	}
	if c.conn.retryBackoffSet {
		d := c.conn.retryBackoff
		opts = append(opts, kgo.RetryBackoffFn(func(int) time.Duration { return d }))
	} else {
		opts = append(opts, kgo.RetryBackoffFn(javaBackoff))
	}
	// Each client gets the settings of the kinds its role takes
	// (roleTable); the factory's own clients (role 0) none of a
	// producer's or a consumer's.
	if c.role.produces() {
		opts = append(opts, p.kgoOpts(idem)...)
	}
	if c.role.consumes() {
		opts = append(opts, c.consume.kgoOpts(c.topics)...)
	}
	if l := session.KgoLogger(c.logger); l != nil {
		opts = append(opts, kgo.WithLogger(l))
	}
	secOpts, tlsCfg, err := c.securityOpts()
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

// kgoOpts returns the franz-go options of a producer's settings;
// idempotent says whether the producer is.
func (p produceConfig) kgoOpts(idempotent bool) []kgo.Opt {
	var opts []kgo.Opt
	switch p.acks {
	case AllISRAcks:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case LeaderAck:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
	case NoAck:
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	// A record fails once it has waited this long, whatever holds it: a
	// broker that stays behind the token as much as one that is down.
	// franz-go's own default is no bound at all.
	opts = append(opts, kgo.RecordDeliveryTimeout(p.deliveryTimeout))
	if p.lingerSet {
		opts = append(opts, kgo.ProducerLinger(p.linger))
	}
	codec := kgo.NoCompression()
	switch p.compression {
	case CodecGzip:
		codec = kgo.GzipCompression()
	case CodecSnappy:
		codec = kgo.SnappyCompression()
	case CodecLz4:
		codec = kgo.Lz4Compression()
	case CodecZstd:
		codec = kgo.ZstdCompression()
	}
	return append(opts, kgo.ProducerBatchCompression(codec))
}

// kgoOpts returns the franz-go options of a consumer's settings and the
// topics it consumes.
func (c consumeConfig) kgoOpts(topics []string) []kgo.Opt {
	var opts []kgo.Opt
	if len(topics) > 0 {
		opts = append(opts, kgo.ConsumeTopics(topics...))
	}
	if c.groupID != "" {
		opts = append(opts, kgo.ConsumerGroup(c.groupID))
	}
	switch c.reset {
	case ResetEarliest:
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	case ResetNone:
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	default:
		opts = append(opts, kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	}
	if c.isolation == ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	return opts
}

// securityOpts checks security.protocol, SASL and TLS settings together and
// loads certificate files. It returns the TLS config to dial with: a new
// one, or a clone of c.tls, which is the caller's and never modified.
func (c *config) securityOpts() ([]kgo.Opt, *tls.Config, error) {
	sec := &c.security
	prot := sec.protocol()
	var opts []kgo.Opt
	if prot.sasl() {
		if mod := sec.sasl.module; mod != "" && !strings.HasPrefix(sec.sasl.mechanism.String(), mod) {
			return nil, nil, fmt.Errorf("sasl.jaas.config: %s does not serve sasl.mechanism=%s", moduleName(mod), sec.sasl.mechanism)
		}
		var m sasl.Mechanism
		user, pass := sec.sasl.user, string(sec.sasl.pass)
		switch sec.sasl.mechanism {
		case Plain:
			m = plain.Auth{User: user, Pass: pass}.AsMechanism()
		case ScramSHA256:
			m = scram.Auth{User: user, Pass: pass, IsToken: sec.sasl.token}.AsSha256Mechanism()
		case ScramSHA512:
			m = scram.Auth{User: user, Pass: pass, IsToken: sec.sasl.token}.AsSha512Mechanism()
		default:
			return nil, nil, fmt.Errorf("sasl.mechanism: required with security.protocol=%s (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)", prot)
		}
		if user == "" {
			return nil, nil, errors.New("sasl.username: required with SASL")
		}
		opts = append(opts, kgo.SASL(m))
	} else if sec.sasl != (saslConfig{}) {
		return nil, nil, fmt.Errorf("security.protocol: %s, but SASL settings are given (use SASL_PLAINTEXT or SASL_SSL)", prot)
	}
	if !prot.tls() {
		if sec.hasTLS() {
			return nil, nil, fmt.Errorf("security.protocol: %s, but TLS settings are given (use SSL or SASL_SSL)", prot)
		}
		return opts, nil, nil
	}
	var cfg *tls.Config
	if sec.tls == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		cfg = sec.tls.Clone()
	}
	if sec.caFile != "" {
		from := sec.caFrom
		if from == "" {
			from = "ssl.ca.location"
		}
		pem, err := os.ReadFile(sec.caFile)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %v", from, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, fmt.Errorf("%s: %s holds no PEM certificate", from, sec.caFile)
		}
		cfg.RootCAs = pool
	}
	if (sec.certFile == "") != (sec.keyFile == "") {
		return nil, nil, errors.New("ssl.certificate.location and ssl.key.location: give both or neither")
	}
	kp := keyPair{certPath: sec.certFile, keyPath: sec.keyFile, certKey: "ssl.certificate.location", keyKey: "ssl.key.location", pass: sec.keyPass}
	if sec.keystore != "" {
		kp = keyPair{certPath: sec.keystore, keyPath: sec.keystore, certKey: "ssl.keystore.location", keyKey: "ssl.keystore.location", pass: sec.keyPass}
	}
	switch {
	case kp.certPath != "":
		pair, err := kp.load()
		if err != nil {
			return nil, nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	case sec.keyPass != "":
		return nil, nil, errors.New("ssl.key.password: given, but no key to decrypt (ssl.keystore.location or ssl.key.location)")
	}
	return opts, cfg, nil
}
