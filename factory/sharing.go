package factory

import (
	"crypto/tls"
	"log/slog"
	"strings"
	"time"

	"github.com/kconsist/kconsist/rebootstrap"
)

// SeparateClient gives a producer a franz-go client of its own instead of
// the one the factory's producers of the same settings share (see
// NewProducer): a producer id, connections and a buffer of its own, for a
// producer whose Flush must not wait for the others' records, or whose
// load must not share a buffer with theirs. Given to New, every producer
// gets its own client.
func SeparateClient() Opt {
	return roleOpt{key: "SeparateClient", roles: RoleProducer, fn: func(c *config) { c.separate = true }}
}

// producerKey is what producers that share a franz-go client have in
// common: every setting of config that reaches a producer's client, in a
// comparable form. Settings that cannot be compared (KgoOpts, hooks, the
// resolver, the observer) are left out: a producer shares only while it has
// the factory's own (config.opaque).
type producerKey struct {
	seeds           string
	clientID        string
	strategy        rebootstrap.Strategy
	clusterCheck    bool
	requestTimeout  time.Duration
	retryBackoff    time.Duration
	retryBackoffSet bool
	acks            string
	idempotence     int8 // -1 unset, 0 false, 1 true
	linger          time.Duration
	lingerSet       bool
	deliveryTimeout time.Duration
	compression     string
	groupID         string
	autoOffsetRes   string
	isolationLevel  string
	tls             *tls.Config
	sasl            saslConfig
	secProt         string
	sslCA           string
	sslCAFrom       string
	sslCert         string
	sslKey          string
	sslKeystore     string
	sslKeyPass      secret
	logger          *slog.Logger
	incCode         int16
	pin             string
	mode            ConsistencyMode
	// A transactional producer shares only with producers of its own
	// transactional.id: they are views of one transaction.
	txnID      string
	txnTimeout time.Duration
}

// producerKey returns the sharing key of a producer with settings c, and
// false if it cannot share: it was given options that cannot be compared.
func (f *Factory) producerKey(c config) (producerKey, bool) {
	if c.opaque != f.base.opaque {
		return producerKey{}, false
	}
	k := producerKey{
		seeds:           strings.Join(c.seeds, ","),
		clientID:        c.clientID,
		strategy:        c.strategy,
		clusterCheck:    c.clusterCheck,
		requestTimeout:  c.requestTimeout,
		acks:            c.acks,
		idempotence:     -1,
		deliveryTimeout: c.deliveryTimeout,
		compression:     c.compression,
		groupID:         c.groupID,
		autoOffsetRes:   c.autoOffsetRes,
		isolationLevel:  c.isolationLevel,
		tls:             c.tls,
		sasl:            c.sasl,
		secProt:         c.secProt,
		sslCA:           c.sslCA,
		sslCAFrom:       c.sslCAFrom,
		sslCert:         c.sslCert,
		sslKey:          c.sslKey,
		sslKeystore:     c.sslKeystore,
		sslKeyPass:      c.sslKeyPass,
		logger:          c.logger,
		incCode:         c.incCode,
		pin:             c.pin,
		mode:            c.mode,
		txnID:           c.txnID,
		txnTimeout:      c.txnTimeout,
	}
	if c.retryBackoff != nil {
		k.retryBackoff, k.retryBackoffSet = *c.retryBackoff, true
	}
	if c.idempotence != nil {
		k.idempotence = 0
		if *c.idempotence {
			k.idempotence = 1
		}
	}
	if c.linger != nil {
		k.linger, k.lingerSet = *c.linger, true
	}
	return k, true
}
