package consumer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consumer"
)

// zeroFirst returns the zero value of fn's first parameter without naming
// its type: how code outside this module could still reach consumer.New
// with a link.Consumer it cannot write.
func zeroFirst[L, R any](fn func(L, consumer.Deserializer[string], consumer.Deserializer[string]) (R, error)) L {
	var l L
	return l
}

// TestNewNeedsTheFactory: consumer.New given the zero link.Consumer (all a
// caller outside this module can get) or nil deserializers returns an
// error and no consumer, rather than a consumer that panics on first use.
func TestNewNeedsTheFactory(t *testing.T) {
	c, err := consumer.New(zeroFirst(consumer.New[string, string]), consumer.String(), consumer.String())
	require.ErrorContains(t, err, "factory.NewConsumer")
	require.Nil(t, c)
	c, err = consumer.New[string](zeroFirst(consumer.New[string, string]), nil, consumer.String())
	require.Error(t, err)
	require.Nil(t, c)
}
