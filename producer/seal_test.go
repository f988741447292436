package producer_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/producer"
)

// This file imports no internal package: it does what code outside this
// module can do with the producer package's constructors.

// first returns the zero value of fn's first parameter without naming its
// type (type inference), with the exported fields of fields set by
// reflection.
func first[L, K, V, R any](t *testing.T, fn func(L, producer.Serializer[K], producer.Serializer[V]) (R, error), fields map[string]any) L {
	t.Helper()
	var l L
	for name, v := range fields {
		f := reflect.ValueOf(&l).Elem().FieldByName(name)
		require.True(t, f.CanSet(), "field %s of %T", name, l)
		f.Set(reflect.ValueOf(v))
	}
	return l
}

// ownClients is a link.ClientMaker of the caller's own: its clients carry
// no consistency token.
type ownClients struct{}

func (ownClients) NewClient() (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
}

// TestNewGroupTransactSessionNeedsTheFactory: NewGroupTransactSession
// given the zero link value, or one filled by reflection with a franz-go
// session of the caller's own, returns an error and no session. Before,
// the zero value and the caller's session made a working
// GroupTransactSession that carried no token.
func TestNewGroupTransactSessionNeedsTheFactory(t *testing.T) {
	s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers("127.0.0.1:1"), kgo.ConsumerGroup("g"),
		kgo.ConsumeTopics("t"), kgo.TransactionalID("x"))
	require.NoError(t, err)
	defer s.Close()
	newSession := producer.NewGroupTransactSession[string, string]
	const refused = "producer: NewGroupTransactSession is for factory.NewGroupTransactSession: the link.GroupTransact given was not made by a factory"
	for name, fields := range map[string]map[string]any{
		"zero":            nil,
		"own kgo session": {"Session": s},
	} {
		gs, err := newSession(first(t, newSession, fields), producer.String(), producer.String())
		require.ErrorContains(t, err, refused, name)
		require.Nil(t, gs, name)
	}
}

// TestNewNeedsTheFactory: producer.New given the zero link.Producer, or
// one filled by reflection with a ClientMaker of the caller's own, returns
// an error and no producer. Before, the second made a working producer
// whose client carried no token.
func TestNewNeedsTheFactory(t *testing.T) {
	newProducer := producer.New[string, string]
	const refused = "producer: New is for factory.NewProducer: the link.Producer given was not made by a factory"
	for name, fields := range map[string]map[string]any{
		"zero":        nil,
		"own clients": {"Clients": ownClients{}},
	} {
		p, err := newProducer(first(t, newProducer, fields), producer.String(), producer.String())
		require.ErrorContains(t, err, refused, name)
		require.Nil(t, p, name)
	}
}
