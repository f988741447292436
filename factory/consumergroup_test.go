package factory

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/producer"
)

// TestRebalanceOptionRoles: the rebalance options are consumer options,
// refused by the other roles' constructors (a bare client takes franz-go's
// own through KgoOpts) and named; they need a group, and a nil function;
// given to New they reach consumers only.
func TestRebalanceOptionRoles(t *testing.T) {
	fn := func(context.Context, *consumer.Group, map[string][]int32) {}
	f, err := New(nil, BootstrapServers("127.0.0.1:1"), OnPartitionsRevoked(fn), BlockRebalanceOnPoll())
	require.NoError(t, err, "any option may be part of the base")
	t.Cleanup(f.Close)

	_, err = f.Admin(OnPartitionsAssigned(fn))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "OnPartitionsAssigned (a consumer setting): not used by admin clients")
	_, err = NewProducer(f, producer.String(), producer.String(), OnPartitionsLost(fn), BlockRebalanceOnPoll())
	require.ErrorContains(t, err, "OnPartitionsLost (a consumer setting), BlockRebalanceOnPoll (a consumer setting): not used by producer clients")
	_, err = f.KgoClient(OnPartitionsRevoked(fn))
	require.ErrorContains(t, err, "OnPartitionsRevoked (a consumer setting): not used by kgo clients")

	_, err = NewConsumer(f, consumer.String(), consumer.String(), []string{"t"})
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "OnPartitionsRevoked, BlockRebalanceOnPoll: needs group.id")
	_, err = NewConsumer(f, consumer.String(), consumer.String(), []string{"t"}, GroupID("g"), OnPartitionsAssigned(nil))
	require.ErrorContains(t, err, "OnPartitionsAssigned: nil function")

	// The base's rebalance options reach no other role's client.
	adm, err := f.Admin()
	require.NoError(t, err)
	adm.Close(context.Background())
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	require.NoError(t, p.Close(context.Background()))
	c, err := NewConsumer(f, consumer.String(), consumer.String(), []string{"t"}, GroupID("g"), OnPartitionsAssigned(fn), OnPartitionsLost(fn))
	require.NoError(t, err)
	require.Equal(t, true, c.Kgo().OptValue("BlockRebalanceOnPoll"))
	c.Close(context.Background())
}
