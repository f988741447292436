package producer_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/producer"
)

// TestOneHeaderType: producer and consumer share franz-go's header type, so
// a consumed record's headers are produced again as they are, without a
// conversion (this does not compile with two types).
func TestOneHeaderType(t *testing.T) {
	consumed := consumer.Record[string, string]{Headers: []consumer.Header{{Key: "trace", Value: []byte("1")}}}
	next := producer.Record[string, string]{Topic: "t", Headers: consumed.Headers}
	require.Equal(t, []producer.Header{{Key: "trace", Value: []byte("1")}}, next.Headers)
}
