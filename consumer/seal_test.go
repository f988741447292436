package consumer_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
)

// TestNewRefusesAValueNotMadeByTheFactory: consumer.New given a
// link.Consumer that code outside this module filled by reflection with
// its own franz-go client (which carries no consistency token) is refused;
// before, it returned a working consumer. This file imports no internal
// package, as such code could not.
func TestNewRefusesAValueNotMadeByTheFactory(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	defer cl.Close()
	l := zeroFirst(consumer.New[string, string])
	f := reflect.ValueOf(&l).Elem().FieldByName("Client")
	require.True(t, f.CanSet())
	f.Set(reflect.ValueOf(cl))
	c, err := consumer.New(l, consumer.String(), consumer.String())
	require.ErrorContains(t, err, "consumer: New is for factory.NewConsumer: the link.Consumer given was not made by a factory")
	require.Nil(t, c)
}
