package localcluster

import "encoding/binary"

// Rule of Native(false): the cluster behaves like a broker without KIP-1243
// (Apache Kafka 4.4). Response headers carry the broker's own tags (kfake's,
// if any) and no tag 0; the gateway does not look at a request's tag 0 (see
// conn.handle). Everything else holds, stale reads included.

// appendResponse appends the response frame for x: with tag 0 = {cluster
// id, token} in a flexible header when the cluster is native, without it
// otherwise. tags are the other header tags, kept.
func (cn *conn) appendResponse(dst []byte, x *exchange, tags []rawTag, token int64, body []byte) []byte {
	c := cn.b.c
	if !c.cfg.tokensOff {
		return appendResponseFrame(dst, x.corr, x.flexible, tags, c.cfg.clusterID, token, body)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(x.corr))
	if x.flexible {
		dst = binary.AppendUvarint(dst, uint64(len(tags)))
		for _, t := range tags {
			dst = binary.AppendUvarint(dst, t.tag)
			dst = binary.AppendUvarint(dst, uint64(len(t.data)))
			dst = append(dst, t.data...)
		}
	}
	dst = append(dst, body...)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// readsTokens reports whether the broker acts on a request's tag 0.
func (c *Cluster) readsTokens() bool { return !c.cfg.tokensOff }
