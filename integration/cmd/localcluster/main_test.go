package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// -native=false: response headers carry no tag 0 (Kafka 4.4); by default
// they carry the KIP-1243 token. -help documents the flag.
func TestRunNative(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantTags uint64
	}{
		{nil, 1},
		{[]string{"-native=false"}, 0},
	} {
		t.Run(strings.Join(append([]string{"args"}, tc.args...), " "), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var out, errOut syncBuffer
			done := make(chan error, 1)
			go func() { done <- run(ctx, append([]string{"-brokers", "1"}, tc.args...), &out, &errOut) }()
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
			require.Equal(t, tc.wantTags, metadataHeaderTags(t, bootstrap))
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("run did not return after cancel")
			}
		})
	}

	var out, errOut syncBuffer
	require.ErrorIs(t, run(context.Background(), []string{"-help"}, &out, &errOut), flag.ErrHelp)
	require.Contains(t, errOut.String(), "-native")
	require.Contains(t, errOut.String(), "-native=false behaves like Apache Kafka 4.4")
}

// metadataHeaderTags sends Metadata v12 (flexible headers) over a plain TCP
// connection and returns how many tagged fields the response header has.
func metadataHeaderTags(t *testing.T, addr string) uint64 {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(20*time.Second)))
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	frame := []byte{0, 0, 0, 0}
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.Key()))
	frame = binary.BigEndian.AppendUint16(frame, uint16(req.GetVersion()))
	frame = binary.BigEndian.AppendUint32(frame, 7) // correlation id
	frame = binary.BigEndian.AppendUint16(frame, 1)
	frame = append(frame, 't', 0) // client id, no header tags
	frame = req.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	_, err = conn.Write(frame)
	require.NoError(t, err)

	var size [4]byte
	_, err = io.ReadFull(conn, size[:])
	require.NoError(t, err)
	resp := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err = io.ReadFull(conn, resp)
	require.NoError(t, err)
	require.Equal(t, uint32(7), binary.BigEndian.Uint32(resp))
	n, k := binary.Uvarint(resp[4:])
	require.Positive(t, k, "header tag count")
	return n
}
