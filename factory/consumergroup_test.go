package factory

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/producer"
)

// TestRebalanceOptionRoles: the rebalance options are consumer options,
// which the admin client's and the producer's constructors do not take;
// they need a group, and a nil function is refused; given to New they
// reach the roles that take a consumer's options only (a bare client's:
// TestKgoClientHonoursGroupOptions).
func TestRebalanceOptionRoles(t *testing.T) {
	fn := func(context.Context, *consumer.Group, map[string][]int32) {}
	f, err := New(BootstrapServers("127.0.0.1:1"), OnPartitionsRevoked(fn), BlockRebalanceOnPoll())
	require.NoError(t, err, "any option may be part of the base")
	t.Cleanup(func() { _ = f.Close(context.Background()) })

	// A rebalance option given to an admin client or a producer does not
	// compile: ConsumerOpt is neither an AdminOpt nor a ProducerOpt.
	consumerOpt := reflect.TypeFor[ConsumerOpt]()
	require.False(t, consumerOpt.Implements(reflect.TypeFor[AdminOpt]()))
	require.False(t, consumerOpt.Implements(reflect.TypeFor[ProducerOpt]()))
	require.True(t, consumerOpt.Implements(reflect.TypeFor[TransactOpt]()))

	_, err = NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "OnPartitionsRevoked, BlockRebalanceOnPoll: needs group.id")
	_, err = NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"), GroupID("g"), OnPartitionsAssigned(nil))
	require.ErrorContains(t, err, "OnPartitionsAssigned: nil function")

	// The base's rebalance options reach no other role's client.
	adm, err := f.Admin()
	require.NoError(t, err)
	adm.Close(context.Background())
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	require.NoError(t, p.Close(context.Background()))
	c, err := NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"), GroupID("g"), OnPartitionsAssigned(fn), OnPartitionsLost(fn))
	require.NoError(t, err)
	require.Equal(t, true, c.Kgo().OptValue("BlockRebalanceOnPoll"))
	c.Close(context.Background())

	// A GroupTransactSession consumes in a group: the rebalance options
	// reach its client as they reach a consumer's (they were dropped
	// without a word when only RoleConsumer got them).
	cfg, err := f.clientConfig(RoleTransactSession, asOpts([]TransactOpt{GroupID("g"), OnPartitionsAssigned(fn), OnPartitionsLost(fn)}))
	require.NoError(t, err)
	reb, err := cfg.rebalanceOpts()
	require.NoError(t, err)
	require.Len(t, reb, 4, "assigned, revoked and lost callbacks and BlockRebalanceOnPoll")
}
