package localcluster

// Rule of Native(false): the cluster behaves like a broker without KIP-1243
// (Apache Kafka 4.4). Response headers carry the broker's own tags (kfake's,
// if any) and no tag 0; the gateway does not look at a request's tag 0 (see
// conn.handle). Everything else holds, stale reads included.

// appendResponse appends the response frame for x: with tag 0 = {cluster
// id, token} in a flexible header when the cluster is native, without it
// otherwise. tags are the other header tags, kept.
func (cn *conn) appendResponse(dst []byte, x *exchange, tags []rawTag, token int64, body []byte) []byte {
	c := cn.b.c
	clusterID := c.cfg.clusterID
	if c.cfg.tokensOff {
		clusterID = "" // no tag 0
	}
	return appendResponseFrame(dst, x.corr, x.flexible, tags, clusterID, token, body)
}

// readsTokens reports whether the broker acts on a request's tag 0.
func (c *Cluster) readsTokens() bool { return !c.cfg.tokensOff }
