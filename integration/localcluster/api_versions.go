package localcluster

import (
	"encoding/binary"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rule of ApiVersions: kfake answers, so it performs KIP-1242's cluster and
// node check; the gateway then does what a KRaft broker does with the
// answer's features (v3+): FinalizedFeaturesEpoch is the offset of the last
// metadata record the broker has applied (the offset its header tokens
// carry), and metadata.version is among the finalized features. Kafka 4.4
// reports its image offset there, so clients can learn how far a broker
// has applied the log without KIP-1243. DescribeQuorum, which the gateway
// answers itself (api_quorum.go), is added to the keys. Answers with an
// error code (REBOOTSTRAP_REQUIRED, UNSUPPORTED_VERSION in v0 form) and
// versions before v3, which have no features, pass untouched.

// metadataVersionFeature is the feature KRaft always finalizes.
const metadataVersionFeature = "metadata.version"

// fallbackMetadataVersion is finalized when kfake finalizes no
// metadata.version and supports none: 4.0-IV3, the level Kafka 4.0 formats
// a cluster at.
const fallbackMetadataVersion int16 = 25

// rewriteAPIVersions returns kfake's ApiVersions response frame with the
// broker's features, or frame itself when there is nothing to rewrite or the
// body does not decode (the client then sees kfake's answer, as before).
func (cn *conn) rewriteAPIVersions(x *exchange, frame []byte) []byte {
	if x.key != apiVersionsKey || x.version < 3 || x.version > (*kmsg.ApiVersionsRequest)(nil).MaxVersion() {
		return frame
	}
	// The response header is v0 at every version: correlation id only.
	if len(frame) < 10 {
		return frame
	}
	corr := int32(binary.BigEndian.Uint32(frame[4:]))
	body := frame[8:]
	// Every ApiVersions body starts with the error code. An error answer
	// may be in v0 form whatever the request's version (KIP-511), so it is
	// not decoded at all.
	if binary.BigEndian.Uint16(body) != 0 {
		return frame
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(x.version)
	if err := resp.ReadFrom(body); err != nil {
		cn.b.c.cfg.logger.Warn("localcluster: ApiVersions response from kfake does not decode; passing it on", "node", cn.b.node, "version", x.version, "err", err)
		return frame
	}
	cn.setFeatures(resp)
	addAPIKey(resp, (*kmsg.DescribeQuorumRequest)(nil).Key(), 0, (*kmsg.DescribeQuorumRequest)(nil).MaxVersion())
	return appendResponseFrame(make([]byte, 0, len(frame)+32), corr, false, nil, "", 0, resp.AppendTo(make([]byte, 0, len(body)+32)))
}

// setFeatures sets the epoch to the applied offset and makes sure
// metadata.version is finalized, at the highest level the broker supports,
// as a freshly formatted cluster is; with FeaturesEpoch(false) it removes
// both.
func (cn *conn) setFeatures(resp *kmsg.ApiVersionsResponse) {
	if cn.b.c.cfg.noFeaturesEpoch {
		resp.FinalizedFeaturesEpoch, resp.FinalizedFeatures = -1, nil
		return
	}
	resp.FinalizedFeaturesEpoch = cn.b.appliedOffset()
	for _, f := range resp.FinalizedFeatures {
		if f.Name == metadataVersionFeature {
			return
		}
	}
	level := fallbackMetadataVersion
	for _, f := range resp.SupportedFeatures {
		if f.Name == metadataVersionFeature {
			level = f.MaxVersion
		}
	}
	ff := kmsg.NewApiVersionsResponseFinalizedFeature()
	ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = metadataVersionFeature, level, level
	resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
	slices.SortFunc(resp.FinalizedFeatures, func(a, b kmsg.ApiVersionsResponseFinalizedFeature) int {
		return strings.Compare(a.Name, b.Name)
	})
}

// addAPIKey advertises key unless kfake already does, keeping keys sorted.
func addAPIKey(resp *kmsg.ApiVersionsResponse, key, minVersion, maxVersion int16) {
	i := len(resp.ApiKeys)
	for j, k := range resp.ApiKeys {
		if k.ApiKey == key {
			return
		}
		if k.ApiKey > key && i == len(resp.ApiKeys) {
			i = j
		}
	}
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = key, minVersion, maxVersion
	resp.ApiKeys = slices.Insert(resp.ApiKeys, i, k)
}
