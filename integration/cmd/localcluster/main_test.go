package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"flag"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
	// A bound against a hang, not a measure: a JVM starting on a loaded
	// machine took longer than 20 s to have 100 records acknowledged.
	deadline := time.Now().Add(time.Minute)
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
		done <- run(ctx, []string{"-brokers", "2", "-lag", "1ms", "-dump", "-cluster-id", "cmd-test", "-topics", "a,b", "-partitions", "2"}, nil, &out, &errOut, nil)
	}()
	var bootstrap string
	// The cluster-id line is printed after the bootstrap line: wait for
	// both.
	waitFor(t, "the bootstrap and cluster-id lines", func() bool {
		id := false
		for _, line := range strings.Split(out.String(), "\n") {
			if s, ok := strings.CutPrefix(line, "bootstrap: "); ok {
				bootstrap = s
			}
			id = id || strings.HasPrefix(line, "cluster-id: ")
		}
		return bootstrap != "" && id
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
		{"-switch-node", "3"},
		{"-brokers", "2", "-switch-node", "-1"},
		{"extra"},
	} {
		var out, errOut syncBuffer
		err := run(context.Background(), args, nil, &out, &errOut, nil)
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
			go func() { done <- run(ctx, append([]string{"-brokers", "1"}, tc.args...), nil, &out, &errOut, nil) }()
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
	require.ErrorIs(t, run(context.Background(), []string{"-help"}, nil, &out, &errOut, nil), flag.ErrHelp)
	require.Contains(t, errOut.String(), "-native")
	require.Contains(t, errOut.String(), "-native=false behaves like Apache Kafka 4.4")
	for _, f := range []string{"-brokers", "-lag", "-cluster-id", "-wait-max", "-error-mode", "-inconsistent-code", "-dump", "-v", "-topics", "-partitions", "-second", "-switch-node", `"switch"`, "SIGUSR1"} {
		require.Contains(t, errOut.String(), f, "-help explains %s", f)
	}
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

// startRun runs the command with stdin and a switch signal channel and
// returns its output once both bootstrap lines are printed.
func startRun(t *testing.T, args ...string) (out, errOut *syncBuffer, stdin io.WriteCloser, signals chan os.Signal, lines map[string]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut = &syncBuffer{}, &syncBuffer{}
	pr, pw := io.Pipe()
	signals = make(chan os.Signal, 1)
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, pr, out, errOut, signals) }()
	t.Cleanup(func() {
		cancel()
		pw.Close()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(20 * time.Second):
			t.Error("run did not return after cancel")
		}
	})
	lines = map[string]string{}
	waitFor(t, "the bootstrap lines", func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if k, v, ok := strings.Cut(line, ": "); ok {
				lines[k] = v
			}
		}
		// Each cluster-id line follows its bootstrap line.
		return lines["bootstrap"] != "" && lines["cluster-id"] != "" && lines["bootstrap-b"] != "" && lines["cluster-id-b"] != ""
	})
	return out, errOut, pw, signals, lines
}

// -second runs cluster B; "switch" on stdin (or the signal) hands A's
// node address to B, whose KIP-1242 check answers a kgo client of A
// REBOOTSTRAP_REQUIRED, and the next "switch" hands it back.
func TestRunSwitch(t *testing.T) {
	out, _, stdin, signals, lines := startRun(t, "-brokers", "2", "-second", "-switch-node", "1", "-cluster-id", "sw")
	require.Equal(t, "sw", lines["cluster-id"])
	require.Equal(t, "sw-b", lines["cluster-id-b"])
	addrs := strings.Split(lines["bootstrap"], ",")
	require.Len(t, addrs, 2)

	var rebootstraps atomic.Int64
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs[0]), kgo.OnRebootstrapRequired(func() ([]string, error) {
		rebootstraps.Add(1)
		return addrs[:1], nil
	}))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = cl.Broker(1).Request(ctx, kmsg.NewPtrMetadataRequest()) // learns node 1 at addrs[1]
	require.NoError(t, err)

	_, err = io.WriteString(stdin, "switch\n")
	require.NoError(t, err)
	waitFor(t, "the switched line", func() bool {
		return strings.Contains(out.String(), "switched: "+addrs[1]+" (cluster sw node 1) now serves cluster sw-b node 1")
	})
	cl.ForceMetadataRefresh()
	waitFor(t, "REBOOTSTRAP_REQUIRED", func() bool {
		_, _ = cl.Broker(1).Request(ctx, kmsg.NewPtrMetadataRequest())
		return rebootstraps.Load() > 0
	})

	_, err = io.WriteString(stdin, "what\nswitch 9\nswitch x\n")
	require.NoError(t, err)
	waitFor(t, "the hints", func() bool {
		return strings.Contains(out.String(), `unknown command "what"`) &&
			strings.Contains(out.String(), "switch 9: no such node (have 0..1)") &&
			strings.Contains(out.String(), `switch "x": not a node id`)
	})

	signals <- syscall.SIGUSR1
	waitFor(t, "the switch back", func() bool {
		return strings.Contains(out.String(), "switched: "+addrs[1]+" serves cluster sw node 1 again; REBOOTSTRAP_REQUIRED answered ")
	})
	require.NotContains(t, out.String(), "answered 0 times")
	waitFor(t, "node 1 to serve again", func() bool {
		_, err := cl.Broker(1).Request(ctx, kmsg.NewPtrMetadataRequest())
		return err == nil
	})
}
