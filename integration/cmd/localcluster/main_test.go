package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// syncBuffer is a bytes.Buffer the command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The command prints its bootstrap address, serves Kafka clients on it,
// dumps records as they commit, and stops when its context ends.
func TestRunServesAndDumps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-brokers", "2", "-lag", "1ms", "-dump", "-cluster-id", "cmd-test", "-topics", "a,b", "-partitions", "2"}, &out, &errOut)
	}()
	var bootstrap string
	waitFor(t, "the bootstrap line", func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if s, ok := strings.CutPrefix(line, "bootstrap: "); ok {
				bootstrap = s
				return true
			}
		}
		return false
	})
	require.Len(t, strings.Split(bootstrap, ","), 2)
	require.Contains(t, out.String(), "cluster-id: cmd-test")

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	_, err = adm.CreateTopic(rctx, 1, 1, nil, "from-client")
	require.NoError(t, err)
	waitFor(t, "the dump of the new topic", func() bool { return strings.Contains(out.String(), `TopicRecord(v1) name="from-client"`) })
	require.Contains(t, out.String(), `ClusterIDRecord(v0) cluster-id="cmd-test"`)
	require.Contains(t, out.String(), `TopicRecord(v1) name="a"`)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-brokers", "0"},
		{"-lag", "-1s"},
		{"-inconsistent-code", "70000"},
		{"-nope"},
		{"extra"},
	} {
		var out, errOut syncBuffer
		err := run(context.Background(), args, &out, &errOut)
		require.Error(t, err, "%v", args)
		require.NotContains(t, out.String(), "bootstrap:")
	}
}
