package localcluster

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rule of requests kfake does not serve: kfake closes the connection on an
// API key or version it does not advertise, leaving the client to guess
// why. The gateway answers such a request itself with UNSUPPORTED_VERSION
// in the API's error fields (those INCONSISTENT_METADATA uses, see
// inconsistent.go), so a client that skips or misreads ApiVersions learns
// what it did. APIs the gateway answers itself (DescribeQuorum) are served
// at every version kmsg knows. A request whose API has no error field to
// carry the code still closes the connection, with a log line saying so.

// versionRange is an API's [min, max] version range.
type versionRange struct{ min, max int16 }

// gatewayAPIs are answered by the gateway, not kfake.
var gatewayAPIs = map[int16]bool{(*kmsg.DescribeQuorumRequest)(nil).Key(): true}

// readKfakeVersions asks kfake which APIs and versions it serves.
func (c *Cluster) readKfakeVersions(ctx context.Context) error {
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, c.direct)
	if err != nil {
		return fmt.Errorf("reading kfake's api versions: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return fmt.Errorf("reading kfake's api versions: %w", err)
	}
	c.kfVersions = make(map[int16]versionRange, len(resp.ApiKeys))
	for _, k := range resp.ApiKeys {
		c.kfVersions[k.ApiKey] = versionRange{k.MinVersion, k.MaxVersion}
	}
	return nil
}

// serves reports whether the cluster serves version of key. ApiVersions is
// always served: kfake answers unsupported versions of it in v0 form, as
// KIP-511 asks.
func (c *Cluster) serves(key, version int16) bool {
	if key == apiVersionsKey || gatewayAPIs[key] {
		return true
	}
	r, ok := c.kfVersions[key]
	return ok && version >= r.min && version <= r.max
}

// answerUnsupported answers x UNSUPPORTED_VERSION. It returns an error, and
// the connection closes, when the API has no error field for it.
func (cn *conn) answerUnsupported(x *exchange) error {
	b := cn.b
	name := kmsg.NameForKey(x.key)
	if req, err := x.request(); err == nil {
		if p, ok := req.(*kmsg.ProduceRequest); ok && p.Acks == 0 {
			return nil // no answer is expected, nor written
		}
	}
	resp, ok := cn.errorAnswer(x, kerr.UnsupportedVersion.Code)
	if !ok {
		b.c.cfg.logger.Warn("localcluster: closing connection: unsupported request has no error field to answer with", "node", b.node, "request", name, "version", x.version)
		return fmt.Errorf("%s v%d: %w", name, x.version, kerr.UnsupportedVersion)
	}
	b.c.cfg.logger.Info("localcluster: answered UNSUPPORTED_VERSION", "node", b.node, "request", name, "version", x.version)
	cn.answerLocal(x, resp, -1)
	return cn.enqueue(x)
}
