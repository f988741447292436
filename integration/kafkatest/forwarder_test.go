package kafkatest_test

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// fakeBroker answers every Kafka frame on loopback with an ApiVersions
// response carrying errCode; its name travels as the MaxVersion of the only
// ApiKeys entry, so a test can tell which server answered.
type fakeBroker struct {
	ln      net.Listener
	name    int16
	errCode int16
	wg      sync.WaitGroup
}

func newFakeBroker(t *testing.T, name, errCode int16) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := &fakeBroker{ln: ln, name: name, errCode: errCode}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.wg.Add(1)
			go func() { defer b.wg.Done(); b.serve(c) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); b.wg.Wait() })
	return b
}

func (b *fakeBroker) addr() string { return b.ln.Addr().String() }

func (b *fakeBroker) serve(c net.Conn) {
	defer c.Close()
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = int16(binary.BigEndian.Uint16(body[2:]))
		resp.ErrorCode = b.errCode
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MaxVersion: b.name}}
		out := binary.BigEndian.AppendUint32(make([]byte, 4), binary.BigEndian.Uint32(body[4:])) // size, correlation id
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// roundTrip sends an ApiVersions v5 request naming cluster "A", node 1, and
// returns the name of the fake broker that answered.
func roundTrip(t *testing.T, c net.Conn, corr int32) (int16, error) {
	t.Helper()
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 5
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	cluster := "A"
	req.ClusterID, req.NodeID = &cluster, 1
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fwd-test")).AppendRequest(nil, req, corr)
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	if _, err := c.Write(frame); err != nil {
		return 0, err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return 0, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, err
	}
	require.Equal(t, corr, int32(binary.BigEndian.Uint32(body)))
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 5
	require.NoError(t, resp.ReadFrom(body[4:]))
	return resp.ApiKeys[0].MaxVersion, nil
}

func TestForwarderObservesFrames(t *testing.T) {
	t.Parallel()
	b := newFakeBroker(t, 7, kerr.RebootstrapRequired.Code)
	fwd, err := kafkatest.NewForwarder(b.addr())
	require.NoError(t, err)
	defer fwd.Close()
	var mu sync.Mutex
	var frames []kafkatest.Frame
	fwd.Observe(func(fr kafkatest.Frame) { mu.Lock(); frames = append(frames, fr); mu.Unlock() })

	c, err := net.Dial("tcp", fwd.Addr())
	require.NoError(t, err)
	defer c.Close()
	name, err := roundTrip(t, c, 42)
	require.NoError(t, err)
	require.Equal(t, int16(7), name)

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, frames, 2)
	req, resp := frames[0], frames[1]
	require.True(t, req.Request)
	require.False(t, resp.Request)
	for _, fr := range frames {
		require.Equal(t, uint64(1), fr.Conn)
		require.Equal(t, b.addr(), fr.Target)
		require.Equal(t, int16(18), fr.Key, "the response is matched to its request by correlation id")
		require.Equal(t, int16(5), fr.Version)
		require.Equal(t, int32(42), fr.CorrelationID)
	}
	require.Equal(t, "fwd-test", req.ClientID)

	areq, err := req.ApiVersionsRequest()
	require.NoError(t, err)
	require.Equal(t, "A", *areq.ClusterID)
	require.Equal(t, int32(1), areq.NodeID)
	require.Equal(t, "test", areq.ClientSoftwareName)
	aresp, err := resp.ApiVersionsResponse()
	require.NoError(t, err)
	require.Equal(t, kerr.RebootstrapRequired.Code, aresp.ErrorCode)

	_, err = resp.ApiVersionsRequest()
	require.ErrorIs(t, err, kafkatest.ErrNotApiVersions)
	_, err = req.ApiVersionsResponse()
	require.ErrorIs(t, err, kafkatest.ErrNotApiVersions)
	trunc := req
	trunc.Body = req.Body[:9]
	_, err = trunc.ApiVersionsRequest()
	require.Error(t, err, "a truncated header is an error, not a panic")
}

func TestForwarderSwitchClosesConnections(t *testing.T) {
	t.Parallel()
	a, b := newFakeBroker(t, 1, 0), newFakeBroker(t, 2, 0)
	fwd, err := kafkatest.NewForwarder(a.addr())
	require.NoError(t, err)
	defer fwd.Close()

	old, err := net.Dial("tcp", fwd.Addr())
	require.NoError(t, err)
	defer old.Close()
	name, err := roundTrip(t, old, 1)
	require.NoError(t, err)
	require.Equal(t, int16(1), name)
	require.Equal(t, 1, fwd.Conns())

	fwd.SetTarget(b.addr())
	require.Equal(t, b.addr(), fwd.Target())
	_, err = roundTrip(t, old, 2)
	require.Error(t, err, "the connection to A was closed by the switch")

	fresh, err := net.Dial("tcp", fwd.Addr())
	require.NoError(t, err)
	defer fresh.Close()
	name, err = roundTrip(t, fresh, 3)
	require.NoError(t, err)
	require.Equal(t, int16(2), name, "a new connection reaches B")
}

func TestForwarderRefuses(t *testing.T) {
	t.Parallel()
	b := newFakeBroker(t, 1, 0)
	for _, tc := range []struct {
		name   string
		target string
		send   []byte
	}{
		{"no target", "", nil},
		{"target down", closedAddr(t), nil},
		{"negative frame size", b.addr(), []byte{0xff, 0xff, 0xff, 0xff}},
		{"oversized frame", b.addr(), []byte{0x7f, 0xff, 0xff, 0xff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fwd, err := kafkatest.NewForwarder(tc.target)
			require.NoError(t, err)
			defer fwd.Close()
			c, err := net.Dial("tcp", fwd.Addr())
			require.NoError(t, err)
			defer c.Close()
			if tc.send != nil {
				_, err = c.Write(tc.send)
				require.NoError(t, err)
			}
			require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err = c.Read(make([]byte, 1))
			require.ErrorIs(t, err, io.EOF, "the forwarder closes the connection")
			if tc.name == "target down" {
				require.Error(t, fwd.LastDialError())
			}
		})
	}
}

func TestForwarderClose(t *testing.T) {
	t.Parallel()
	b := newFakeBroker(t, 1, 0)
	fwd, err := kafkatest.NewForwarder(b.addr())
	require.NoError(t, err)
	c, err := net.Dial("tcp", fwd.Addr())
	require.NoError(t, err)
	defer c.Close()
	_, err = roundTrip(t, c, 1)
	require.NoError(t, err)

	require.NoError(t, fwd.Close())
	require.NoError(t, fwd.Close(), "closing twice is harmless")
	require.Zero(t, fwd.Conns())
	_, err = roundTrip(t, c, 2)
	require.Error(t, err, "open connections are closed")
	// The port is free again, and another process of a parallel test may
	// have taken it: a connection there must not reach the broker.
	if c2, err := net.DialTimeout("tcp", fwd.Addr(), time.Second); err == nil {
		defer c2.Close()
		_ = c2.SetDeadline(time.Now().Add(2 * time.Second))
		_, err = roundTrip(t, c2, 3)
		require.Error(t, err, "the listener is gone")
	}
	require.Zero(t, fwd.Conns(), "nothing was accepted after Close")
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
