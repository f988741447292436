package factory

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/producer"
)

// TransactionalID sets transactional.id and makes producers transactional:
// records are written between Producer.BeginTransaction and
// Producer.EndTransaction, and a read_committed consumer sees them only once
// their transaction commits. It needs idempotence (the default); with
// Idempotence(false) or acks other than all it is an error.
//
// One transactional id is one producer: producers made with the same id (of
// any key and value types) share one franz-go client, and with it one
// transaction, which BeginTransaction and EndTransaction on any of them act
// on; they never share a client with non-transactional producers. Two
// processes with one id fence each other, as with every Kafka client.
//
// For consume-transform-produce, where the offsets consumed commit in the
// transaction, use NewGroupTransactSession.
func TransactionalID(id string) ProducerOpt {
	return producerOnly(func(c *config) {
		if id == "" {
			c.fail("transactional.id: empty")
		}
		c.txn.id = id
	})
}

// TransactionTimeout sets transaction.timeout.ms: how long the transaction
// coordinator lets a transaction stay open before it aborts it (a producer
// that died mid-transaction). Default: franz-go's, 40s. The broker refuses
// values above its transaction.max.timeout.ms (15 minutes by default).
func TransactionTimeout(d time.Duration) ProducerOpt {
	return producerOnly(func(c *config) {
		if d <= 0 {
			c.fail("transaction.timeout.ms: %v is not positive", d)
		}
		c.txn.timeout = d
	})
}

// transactional returns the franz-go options of a transactional client;
// idempotent says whether c's producer is idempotent.
func (c *config) transactional(idempotent bool) ([]kgo.Opt, error) {
	if c.txn.id == "" {
		if c.txn.timeout != 0 && c.role.produces() {
			return nil, fmt.Errorf("transaction.timeout.ms: set without transactional.id")
		}
		return nil, nil
	}
	if !c.role.produces() {
		// Given to New: it is the base of consumers and admin clients too.
		return nil, nil
	}
	if !idempotent {
		return nil, fmt.Errorf("transactional.id: %q needs an idempotent producer (enable.idempotence=true, acks=all), have acks=%s enable.idempotence=%v", c.txn.id, c.produce.acks, c.produce.idempotence == 1)
	}
	opts := []kgo.Opt{kgo.TransactionalID(c.txn.id)}
	if c.txn.timeout > 0 {
		opts = append(opts, kgo.TransactionTimeout(c.txn.timeout))
	}
	return opts, nil
}

// RoleTransactSession is the role of a GroupTransactSession's client, which
// both consumes in a group and produces: options and hooks of either role
// apply to it.
const RoleTransactSession = RoleProducer | RoleConsumer

// NewGroupTransactSession returns a consume-transform-produce session:
// franz-go's GroupTransactSession on one client that consumes topics in
// the group of GroupID and produces records of K keys and V values in
// transactions of TransactionalID, so that the offsets consumed commit in
// the same transaction as the records produced from them (exactly once).
// Both options are required, as is ConsumeTopics; opts apply on top of the
// factory's, and any producer or consumer option may be among them. The session reads
// read_committed and requires stable offsets (KIP-447), whatever
// isolation.level says: reading another transaction's uncommitted records
// would break exactly once.
//
// Its requests carry the factory's consistency token like those of every
// client the factory makes. A transaction cannot span clusters: once the
// bootstrap servers name another cluster, End aborts and returns an error
// satisfying errors.Is(err, rebootstrap.ErrClusterChanged), and the session
// stays failed (Begin and polls return that error). Close it and make a new
// one, which joins the group on the new cluster. See
// producer.GroupTransactSession.
func NewGroupTransactSession[K, V any](f *Factory, keys producer.Serializer[K], values producer.Serializer[V], opts ...TransactOpt) (*producer.GroupTransactSession[K, V], error) {
	if keys == nil || values == nil {
		return nil, fmt.Errorf("%w: NewGroupTransactSession needs a key and a value serializer", ErrConfig)
	}
	all := asOpts(opts)
	var sess *kgo.GroupTransactSession
	all = append(all, factoryOpt(func(c *config) {
		c.newClient = func(kopts ...kgo.Opt) (*kgo.Client, error) {
			s, err := kgo.NewGroupTransactSession(kopts...)
			if err != nil {
				return nil, err
			}
			sess = s
			return s.Client(), nil
		}
	}))
	if f.s.Closed() {
		return nil, ErrClosed
	}
	cfg, err := f.clientConfig(RoleTransactSession, all)
	if err != nil {
		return nil, err
	}
	var missing []error
	if len(cfg.topics) == 0 {
		missing = append(missing, errors.New("ConsumeTopics: required by a GroupTransactSession"))
	}
	if cfg.consume.groupID == "" {
		missing = append(missing, errors.New("group.id: required by a GroupTransactSession"))
	}
	if cfg.txn.id == "" {
		missing = append(missing, errors.New("transactional.id: required by a GroupTransactSession"))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrConfig, errors.Join(missing...))
	}
	extra := []kgo.Opt{
		kgo.ConsumeTopics(cfg.topics...),
		// No kgo.RequireStableFetchOffsets: kgo now always asks for stable
		// offsets in a group, and the option is a deprecated no-op.
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	}
	b, err := f.describe(cfg, extra)
	if err != nil {
		return nil, err
	}
	l, err := f.s.GroupTransact(b)
	if err != nil {
		return nil, err
	}
	gs, err := producer.NewGroupTransactSession(link.Seal(link.GroupTransact{Producer: l, Session: sess}), keys, values)
	if err != nil {
		sess.Close() // not handed over
		return nil, err
	}
	return gs, nil
}
