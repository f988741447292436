package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/integration/localcluster"
)

// TestRun: without the token B does not find A's new topic; with it, B
// describes it and consumes A's records at once.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"-lag", "1s"}, &out, &errOut)
	t.Logf("output:\n%s%s", out.String(), errOut.String())
	require.NoError(t, err)
	s := out.String()
	require.Contains(t, s, "without a token\n       B: orders: not found\n", "a lagging broker answers B without the token")
	require.Contains(t, s, "B: orders: 3 partitions, end offsets 0 0 0; consuming it\n")
	require.Contains(t, s, "B: consumed 3 records: order-0 order-1 order-2\n")
	require.Contains(t, s, "OK: B read what A wrote")
}

// TestBadToken: B refuses a token it cannot parse (400), one of another
// cluster than its own (409) and one beyond the cluster's committed
// metadata offset (400), and none of them reaches B's store.
func TestBadToken(t *testing.T) {
	c, err := localcluster.New(localcluster.Brokers(1))
	require.NoError(t, err)
	defer c.Close()
	b, err := newServiceB(c.Addrs())
	require.NoError(t, err)
	defer b.close()
	srv := httptest.NewServer(b.routes())
	defer srv.Close()
	ctx := context.Background()

	body, status, err := call(ctx, http.MethodGet, srv.URL+"/topics/orders", "not-a-token")
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, body, TokenHeader)

	body, status, err = call(ctx, http.MethodPost, srv.URL+"/subscriptions/orders", consistency.MustOf("cluster-x", 9).Encode())
	require.NoError(t, err)
	require.Equal(t, http.StatusConflict, status, body)
	require.Contains(t, body, "cluster-x")

	body, status, err = call(ctx, http.MethodGet, srv.URL+"/topics/orders", consistency.MustOf(c.ClusterID(), 1<<60).Encode())
	require.NoError(t, err)
	require.Equal(t, http.StatusBadRequest, status, body)
	require.Contains(t, body, "committed metadata offset")
	require.True(t, b.f.Token().IsUnknown(), "a refused token changes nothing: %v", b.f.Token())
}

func TestBadArgs(t *testing.T) {
	var out, errOut bytes.Buffer
	// -h prints the usage and is no error (exit 0), as with Go's tools.
	require.NoError(t, run(context.Background(), []string{"-h"}, &out, &errOut))
	require.Contains(t, errOut.String(), "-timeout")
	require.ErrorContains(t, run(context.Background(), []string{"-lag", "0s"}, &out, &errOut), "-lag")
	require.ErrorContains(t, run(context.Background(), []string{"x"}, &out, &errOut), "unexpected arguments")
}
