package kafkatest_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file reads KIP-1243 header tags off the wire, independently of the
// SDK's codec: a dialer that taps every connection of a plain franz-go
// client, a raw connection that writes hand-made request headers, and a
// reader of the metadata log on disk.

// stamp is a decoded header tag 0 (ConsistencyState).
type stamp struct {
	clusterID *string
	token     int64
}

// appendState encodes ConsistencyState: compact nullable string, int64,
// empty tagged fields.
func appendState(dst []byte, clusterID *string, token int64) []byte {
	if clusterID == nil {
		dst = binary.AppendUvarint(dst, 0)
	} else {
		dst = binary.AppendUvarint(dst, uint64(len(*clusterID)+1))
		dst = append(dst, *clusterID...)
	}
	dst = binary.BigEndian.AppendUint64(dst, uint64(token))
	return binary.AppendUvarint(dst, 0)
}

// tagSection returns a header's tagged fields holding tag 0 = data, or no
// tag when data is nil.
func tagSection(data []byte) []byte {
	if data == nil {
		return []byte{0}
	}
	b := binary.AppendUvarint(nil, 1)
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// readTags reads a header's tagged fields and decodes tag 0, if present.
func readTags(b *kbin.Reader) (*stamp, error) {
	var st *stamp
	n := b.Uvarint()
	for range n {
		tag, size := b.Uvarint(), b.Uvarint()
		data := b.Span(int(size))
		if tag != 0 {
			continue
		}
		r := kbin.Reader{Src: data}
		s := &stamp{clusterID: r.CompactNullableString()}
		s.token = r.Int64()
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return nil, fmt.Errorf("tag 0: %w", err)
		}
		st = s
	}
	if !b.Ok() {
		return nil, fmt.Errorf("header tags: %w", kbin.ErrNotEnoughData)
	}
	return st, nil
}

// flexibleResponse reports whether the answer to key at version has a
// flexible header (v1); ApiVersions answers never do.
func flexibleResponse(key, version int16) bool {
	if key == 18 {
		return false
	}
	req := kmsg.RequestForKey(key)
	if req == nil {
		return false
	}
	req.SetVersion(version)
	return req.IsFlexible()
}

// wireTap counts, per API key, the requests a client wrote and the
// flexible responses it read, and how many of those carried tag 0.
type wireTap struct {
	mu         sync.Mutex
	requests   map[int16]int
	flexible   map[int16]int
	tagged     map[int16]int
	clusterIDs map[string]int
	maxToken   int64
	errs       []error
}

func newWireTap() *wireTap {
	return &wireTap{requests: map[int16]int{}, flexible: map[int16]int{}, tagged: map[int16]int{}, clusterIDs: map[string]int{}, maxToken: -1}
}

// dialer returns a kgo.Dialer option that taps every connection.
func (w *wireTap) dialer() kgo.Opt {
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		return &tapConn{Conn: c, w: w, pending: map[int32][2]int16{}}, nil
	})
}

type tapConn struct {
	net.Conn
	w          *wireTap
	mu         sync.Mutex
	wbuf, rbuf []byte
	pending    map[int32][2]int16
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.wbuf = append(c.wbuf, p...)
	for len(c.wbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.wbuf))
		if len(c.wbuf) < 4+size {
			break
		}
		f := c.wbuf[4 : 4+size]
		if len(f) >= 8 {
			key, ver := int16(binary.BigEndian.Uint16(f)), int16(binary.BigEndian.Uint16(f[2:]))
			c.pending[int32(binary.BigEndian.Uint32(f[4:]))] = [2]int16{key, ver}
			c.w.mu.Lock()
			c.w.requests[key]++
			c.w.mu.Unlock()
		}
		c.wbuf = c.wbuf[4+size:]
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rbuf = append(c.rbuf, p[:n]...)
	for len(c.rbuf) >= 4 {
		size := int(binary.BigEndian.Uint32(c.rbuf))
		if len(c.rbuf) < 4+size {
			break
		}
		c.response(c.rbuf[4 : 4+size])
		c.rbuf = c.rbuf[4+size:]
	}
	return n, err
}

func (c *tapConn) response(f []byte) {
	b := kbin.Reader{Src: f}
	corr := b.Int32()
	kv, ok := c.pending[corr]
	if !ok {
		return
	}
	delete(c.pending, corr)
	if !flexibleResponse(kv[0], kv[1]) {
		return
	}
	st, err := readTags(&b)
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	c.w.flexible[kv[0]]++
	if err != nil {
		c.w.errs = append(c.w.errs, fmt.Errorf("%s v%d response: %w", kmsg.NameForKey(kv[0]), kv[1], err))
		return
	}
	if st == nil {
		return
	}
	c.w.tagged[kv[0]]++
	id := "<null>"
	if st.clusterID != nil {
		id = *st.clusterID
	}
	c.w.clusterIDs[id]++
	c.w.maxToken = max(c.w.maxToken, st.token)
}

type tapCounts struct {
	requests, flexible, tagged map[int16]int
	clusterIDs                 map[string]int
	maxToken                   int64
	errs                       []error
}

func (w *wireTap) counts() tapCounts {
	w.mu.Lock()
	defer w.mu.Unlock()
	cp := func(m map[int16]int) map[int16]int {
		o := make(map[int16]int, len(m))
		for k, v := range m {
			o[k] = v
		}
		return o
	}
	ids := make(map[string]int, len(w.clusterIDs))
	for k, v := range w.clusterIDs {
		ids[k] = v
	}
	return tapCounts{requests: cp(w.requests), flexible: cp(w.flexible), tagged: cp(w.tagged), clusterIDs: ids, maxToken: w.maxToken, errs: append([]error(nil), w.errs...)}
}

func total(m map[int16]int) (n int) {
	for _, v := range m {
		n += v
	}
	return n
}

// byName renders a per-key map with API names, sorted, for logs.
func byName(m map[int16]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, int(k))
	}
	sort.Ints(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", kmsg.NameForKey(int16(k)), m[int16(k)])
	}
	return b.String()
}

// rawConn talks Kafka over one TCP connection with hand-written request
// headers (v2, so they can carry any tagged fields).
type rawConn struct {
	net.Conn
	corr int32
}

func dialRaw(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &rawConn{Conn: c}, nil
}

// send writes req with header v2 whose tagged-field section is tags, as is.
func (r *rawConn) send(req kmsg.Request, tags []byte) (int32, error) {
	r.corr++
	b := make([]byte, 4, 64)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(r.corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len("kip1243-raw")))
	b = append(b, "kip1243-raw"...)
	b = append(b, tags...)
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	_, err := r.Write(b)
	return r.corr, err
}

// recv reads one response into resp and returns its header's tag 0 (nil
// for an ApiVersions answer, whose header is v0 and has no tags).
func (r *rawConn) recv(resp kmsg.Response, deadline time.Time) (*stamp, error) {
	_ = r.SetReadDeadline(deadline)
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	f := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(r, f); err != nil {
		return nil, err
	}
	b := kbin.Reader{Src: f}
	if corr := b.Int32(); corr != r.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, r.corr)
	}
	var st *stamp
	if resp == nil || resp.Key() != 18 {
		var err error
		if st, err = readTags(&b); err != nil {
			return nil, err
		}
	}
	if resp != nil {
		if err := resp.ReadFrom(b.Src); err != nil {
			return st, fmt.Errorf("%s response: %w", kmsg.NameForKey(resp.Key()), err)
		}
	}
	return st, nil
}

// roundTrip sends req with the given tag 0 (nil: none) and reads its answer.
func (r *rawConn) roundTrip(req kmsg.Request, tag0 []byte, timeout time.Duration) (kmsg.Response, *stamp, error) {
	if _, err := r.send(req, tagSection(tag0)); err != nil {
		return nil, nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	st, err := r.recv(resp, time.Now().Add(timeout))
	return resp, st, err
}

// metadataWriteOffset finds, in a node's copy of the metadata log, the
// offset of the TopicRecord (metadata record type 2) that created topic.
func metadataWriteOffset(dataDir, topic string) (int64, error) {
	return metadataRecordOffset(dataDir, 2, topic)
}

// metadataRecordOffset finds, in a node's copy of the metadata log, the
// offset of the last record of type recType whose value contains part.
func metadataRecordOffset(dataDir string, recType uint32, part string) (int64, error) {
	segs, err := filepath.Glob(filepath.Join(dataDir, "__cluster_metadata-0", "*.log"))
	if err != nil || len(segs) == 0 {
		return -1, fmt.Errorf("no metadata log segments under %s (%v)", dataDir, err)
	}
	sort.Strings(segs)
	found := int64(-1)
	for _, seg := range segs {
		buf, err := os.ReadFile(seg)
		if err != nil {
			return -1, err
		}
		for len(buf) >= 12 {
			length := int(int32(binary.BigEndian.Uint32(buf[8:])))
			if length <= 0 || len(buf) < 12+length {
				break // the active segment's end
			}
			var batch kmsg.RecordBatch
			if err := batch.ReadFrom(buf[:12+length]); err != nil {
				return -1, fmt.Errorf("%s: batch at %d: %w", seg, batch.FirstOffset, err)
			}
			buf = buf[12+length:]
			if batch.Attributes&0x20 != 0 || batch.Attributes&0x07 != 0 { // control or compressed
				continue
			}
			recs := batch.Records
			for range batch.NumRecords {
				l, n := binary.Varint(recs)
				if n <= 0 || len(recs) < n+int(l) {
					return -1, errors.New("truncated record")
				}
				var rec kmsg.Record
				if err := rec.ReadFrom(recs[:n+int(l)]); err != nil {
					return -1, err
				}
				recs = recs[n+int(l):]
				v := kbin.Reader{Src: rec.Value}
				v.Uvarint() // frame version
				if v.Uvarint() == recType && bytes.Contains(rec.Value, []byte(part)) {
					found = batch.FirstOffset + int64(rec.OffsetDelta)
				}
			}
		}
	}
	if found < 0 {
		return -1, fmt.Errorf("no record of type %d with %q in %s", recType, part, dataDir)
	}
	return found, nil
}
