package factory

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
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
	d.Observer = clientEvents(cfg)
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
		Seeds:                    cfg.seeds,
		Pin:                      cfg.pin,
		Strategy:                 cfg.strategy,
		ClusterCheck:             cfg.clusterCheck,
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
	b := &f.base
	return cfg.secProt == b.secProt && cfg.sasl == b.sasl && cfg.tls == b.tls &&
		cfg.sslCA == b.sslCA && cfg.sslCert == b.sslCert && cfg.sslKey == b.sslKey && cfg.sslKeystore == b.sslKeystore &&
		slices.Equal(cfg.seeds, b.seeds)
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
	if l := session.KgoLogger(c.logger); l != nil {
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
