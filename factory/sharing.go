package factory

import (
	"log/slog"
)

// SeparateClient gives a producer a franz-go client of its own instead of
// the one the factory's producers of the same settings share (see
// NewProducer): a producer id, connections and a buffer of its own, for a
// producer whose load must not share a buffer with the others'. Given to
// New, every producer gets its own client.
func SeparateClient() ProducerOpt {
	return producerOnly(func(c *config) { c.separate = true })
}

// producerKey is what producers that share a franz-go client have in
// common: every concern of config that reaches a producer's client, each a
// comparable struct, so the key is compared with == and a setting added to
// a concern is part of it at once. Settings that cannot be compared
// (KgoOpts, hooks, the resolver, the observer) are left out: a producer
// shares only while it has the factory's own (config.opaque).
type producerKey struct {
	conn     connConfig
	security securityConfig
	produce  produceConfig
	// A transactional producer shares only with producers of its own
	// transactional.id: they are views of one transaction.
	txn     txnConfig
	logger  *slog.Logger
	incCode int16
	pin     string
	mode    ConsistencyMode
}

// producerKey returns the sharing key of a producer with settings c, and
// false if it cannot share: it was given options that cannot be compared.
func (f *Factory) producerKey(c config) (producerKey, bool) {
	if c.opaque != f.base.opaque {
		return producerKey{}, false
	}
	return producerKey{
		conn:     c.conn,
		security: c.security,
		produce:  c.produce,
		txn:      c.txn,
		logger:   c.logger,
		incCode:  c.incCode,
		pin:      c.pin,
		mode:     c.mode,
	}, true
}
