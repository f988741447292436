package admin_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/admin"
)

// zeroFirst returns the zero value of fn's first parameter without naming
// its type: how code outside this module could still reach admin.New with
// a link.Admin it cannot write.
func zeroFirst[L, R any](fn func(L) (R, error)) L {
	var l L
	return l
}

// TestNewNeedsTheFactory: admin.New given the zero link.Admin (all a
// caller outside this module can get) returns an error and no client,
// rather than a client that panics on first use.
func TestNewNeedsTheFactory(t *testing.T) {
	c, err := admin.New(zeroFirst(admin.New))
	require.ErrorContains(t, err, "factory.Factory.Admin")
	require.Nil(t, c)
}
