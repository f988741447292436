package localcluster

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sizePrefix is the 4-byte size of a frame of n bytes.
func sizePrefix(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// totalAlloc is the bytes the process has allocated so far.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

func TestReadFrame(t *testing.T) {
	body := make([]byte, 3*frameChunk+17) // several growths
	for i := range body {
		body[i] = byte(i)
	}
	want := append(sizePrefix(uint32(len(body))), body...)
	for name, r := range map[string]io.Reader{
		"whole":     bytes.NewReader(want),
		"half":      iotest.HalfReader(bytes.NewReader(want)),
		"data+EOF":  iotest.DataErrReader(bytes.NewReader(want)),
		"one byte":  iotest.OneByteReader(bytes.NewReader(want[:4+100])),
		"empty":     bytes.NewReader(sizePrefix(0)),
		"truncated": bytes.NewReader(want[:len(want)-1]),
		"too large": bytes.NewReader(sizePrefix(maxFrame + 1)),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := readFrame(r)
			switch name {
			case "one byte":
				// The prefix announces the whole body; only 100 bytes come.
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			case "empty":
				require.NoError(t, err)
				require.Equal(t, sizePrefix(0), got)
			case "truncated":
				require.ErrorIs(t, err, io.ErrUnexpectedEOF)
			case "too large":
				require.ErrorIs(t, err, errFrameTooLarge)
				require.ErrorContains(t, err, "104857601 bytes")
			default:
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
		})
	}
}

// An announced size costs nothing until its bytes arrive.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	in := append(sizePrefix(maxFrame), make([]byte, 1000)...)
	before := totalAlloc()
	_, err := readFrame(bytes.NewReader(in))
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	require.Less(t, totalAlloc()-before, uint64(1<<20), "a %d-byte announcement with 1000 bytes behind it", maxFrame)
}

// Connections that announce huge frames and send little do not make the
// gateway allocate what they announce (it used to: 100 MiB each).
func TestGatewayHugeAnnouncedFrames(t *testing.T) {
	c := newCluster(t, Brokers(1))
	const conns = 8
	rs := make([]*rawClient, conns)
	for i := range rs {
		rs[i] = dialRaw(t, c.Addrs()[0])
	}
	before := totalAlloc()
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Go(func() {
			_, err := r.conn.Write(append(sizePrefix(maxFrame), make([]byte, 100)...))
			assert.NoError(t, err)
			// The gateway reads an early end of the frame and closes; by
			// then it has allocated all it ever would for this frame.
			assert.NoError(t, r.conn.(*net.TCPConn).CloseWrite())
			_ = r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = r.conn.Read(make([]byte, 1))
			assert.ErrorIs(t, err, io.EOF)
		})
	}
	wg.Wait()
	grown := totalAlloc() - before
	require.Less(t, grown, uint64(32<<20), "allocated %d MiB for %d connections announcing %d MiB each", grown>>20, conns, maxFrame>>20)

	// The gateway still serves.
	r := dialRaw(t, c.Addrs()[0])
	resp, _ := r.do(metadataReq(), nil)
	require.Len(t, resp.(*kmsg.MetadataResponse).Brokers, 1)
}

func TestGatewayIdleTimeout(t *testing.T) {
	const idle = 150 * time.Millisecond
	c := newCluster(t, Brokers(1), IdleTimeout(idle))

	t.Run("never used", func(t *testing.T) {
		start := time.Now()
		dialRaw(t, c.Addrs()[0]).expectClosed()
		require.GreaterOrEqual(t, time.Since(start), idle)
	})
	t.Run("an answer restarts the clock", func(t *testing.T) {
		// The gateway reads on while kfake holds the fetch; the read times
		// out an idle after the fetch arrived, but the answer is newer.
		c := newCluster(t, Brokers(1), IdleTimeout(idle), SeedTopics(1, "t"))
		r := dialRaw(t, c.Addrs()[0])
		start := time.Now()
		_, _, err := r.roundTrip(longPoll("t", idle/2), nil)
		require.NoError(t, err)
		r.expectClosed()
		require.GreaterOrEqual(t, time.Since(start), idle+idle/2, "closed an idle after the answer, not after the request")
	})
	t.Run("a long poll is no idleness", func(t *testing.T) {
		// kfake holds a fetch of an empty partition for its MaxWait, longer
		// than the idle timeout, while the client sends nothing.
		c := newCluster(t, Brokers(1), IdleTimeout(idle), SeedTopics(1, "t"))
		r := dialRaw(t, c.Addrs()[0])
		start := time.Now()
		resp, _, err := r.roundTrip(longPoll("t", 3*idle), nil)
		require.NoError(t, err, "the connection must stay open while a request is in flight")
		require.GreaterOrEqual(t, time.Since(start), 3*idle, "kfake held the fetch")
		require.Zero(t, resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode)
		r.expectClosed()
	})
}

// longPoll is a fetch of partition 0 of topic from offset 0 that waits up to
// wait for a byte.
func longPoll(topic string, wait time.Duration) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12) // the last version naming topics
	req.MaxWaitMillis = int32(wait.Milliseconds())
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}
