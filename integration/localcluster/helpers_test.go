package localcluster

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/kconsist/kconsist/internal/wire"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newCluster(t testing.TB, opts ...Opt) *Cluster {
	t.Helper()
	c, err := New(opts...)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func newClient(t testing.TB, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// rawClient speaks the Kafka protocol by hand, so a test can put a
// ConsistencyState in the request header and read the one in the response
// header, independently of the SDK's wire interceptor.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return &rawClient{t: t, conn: conn}
}

// headerState is a request header ConsistencyState; nil sends none.
type headerState struct {
	clusterID *string
	token     int64
}

func (r *rawClient) send(req kmsg.Request, st *headerState) int32 {
	r.t.Helper()
	corr, err := r.trySend(req, st)
	require.NoError(r.t, err)
	return corr
}

// dialRawNoCleanup is dialRaw for goroutines other than the test's.
func dialRawNoCleanup(addr string) (*rawClient, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &rawClient{conn: conn}, nil
}

// roundTrip sends req and reads its response, without failing the test.
func (r *rawClient) roundTrip(req kmsg.Request, st *headerState) (kmsg.Response, *wire.State, error) {
	corr, err := r.trySend(req, st)
	if err != nil {
		return nil, nil, err
	}
	return r.recv(req, corr)
}

func (r *rawClient) trySend(req kmsg.Request, st *headerState) (int32, error) {
	r.corr++
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(r.corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		if st == nil {
			b = append(b, 0)
		} else {
			var payload []byte
			if st.clusterID == nil {
				payload = binary.AppendUvarint(nil, 0)
				payload = binary.BigEndian.AppendUint64(payload, uint64(st.token))
				payload = append(payload, 0)
			} else {
				payload = wire.AppendState(nil, *st.clusterID, st.token)
			}
			b = append(b, 1, 0)
			b = binary.AppendUvarint(b, uint64(len(payload)))
			b = append(b, payload...)
		}
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := r.conn.Write(b)
	return r.corr, err
}

// recv reads one response to req. state is nil when the header has no tag 0.
func (r *rawClient) recv(req kmsg.Request, corr int32) (kmsg.Response, *wire.State, error) {
	_ = r.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	frame, err := readFrame(r.conn)
	if err != nil {
		return nil, nil, err
	}
	b := frame[4:]
	if got := int32(binary.BigEndian.Uint32(b)); got != corr {
		return nil, nil, fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	b = b[4:]
	var st *wire.State
	if req.IsFlexible() && req.Key() != 18 {
		var rest []byte
		_, err := wire.EachTag(b, func(tag uint64, data []byte) error {
			if tag == 0 {
				s, err := wire.ParseState(data)
				if err != nil {
					return err
				}
				s.ClusterID = bytes.Clone(s.ClusterID)
				st = &s
			}
			return nil
		}, &rest)
		if err != nil {
			return nil, nil, err
		}
		b = rest
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(b); err != nil {
		return nil, nil, err
	}
	return resp, st, nil
}

func (r *rawClient) do(req kmsg.Request, st *headerState) (kmsg.Response, *wire.State) {
	r.t.Helper()
	resp, rst, err := r.recv(req, r.send(req, st))
	require.NoError(r.t, err)
	return resp, rst
}

// expectClosed asserts the gateway closed the connection.
func (r *rawClient) expectClosed() {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := r.conn.Read(make([]byte, 1))
	require.ErrorIs(r.t, err, io.EOF)
}

func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	if topics == nil {
		req.Topics = nil
		return req
	}
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func createTopicsReq(partitions int32, configs map[string]string, topics ...string) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = 5000
	for _, tp := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = tp, partitions, 1
		for _, k := range sortedKeys(configs) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(configs[k])
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func topicNames(resp *kmsg.MetadataResponse) map[string]int {
	out := make(map[string]int)
	for _, t := range resp.Topics {
		if t.ErrorCode == 0 && t.Topic != nil {
			out[*t.Topic] = len(t.Partitions)
		}
	}
	return out
}

// eventually polls cond, bounded, for conditions with nothing to wait on.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// captureConn is a net.Conn that keeps what is written to it.
type captureConn struct {
	net.Conn
	out *[]byte
}

func (c *captureConn) Write(p []byte) (int, error) {
	*c.out = append(*c.out, p...)
	return len(p), nil
}
