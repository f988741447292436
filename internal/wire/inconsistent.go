package wire

import (
	"bytes"
	"encoding/binary"
	"reflect"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// How INCONSISTENT_METADATA reaches kgo, and why.
//
// kerr maps codes it does not know, 1243 among them, to
// UNKNOWN_SERVER_ERROR, which neither kgo nor kadm retries. So a frame that
// may carry the code is held back and decoded, and when some ErrorCode
// field holds the code the answer is turned into something kgo retries on
// its own. A frame may carry it when it answers a request that carried a
// token, whatever the answer's header token: KIP-1243 lets a broker that
// was behind answer with the offset it judged at (below the request's),
// with its latest, which it may have reached meanwhile, or with none. An
// answer whose header token is below the request's is held and decoded; any
// other is held only when it is small enough to be an INCONSISTENT_METADATA
// answer (mayBeInconsistent) and holds the code's two bytes, which a scan
// of the bytes already read usually settles without a copy. Nothing here
// needs a broker's tokens to rise from one answer to the next. Facts from
// franz-go v1.22.3 that decide the form:
//
//   - Requests issued through Client.Request (every kadm call: ListTopics,
//     CreateTopics, DescribeConfigs...; also kgo's own metadata, group and
//     coordinator requests) go through retryable.Request (client.go). It
//     retries an error for which isRetryableBrokerErr (errors.go) holds,
//     and that is true for any error with Temporary() true, up to
//     RequestRetries tries and RetryTimeout, then returns the last error.
//     So for these the connection fails with *InconsistentMetadataError
//     (Temporary, errors.Is consistency.ErrInconsistentMetadata): the
//     request is re-sent on a new connection, and once the budget is spent
//     the caller gets the typed error.
//   - Fetch (source.go) backs off and re-fetches after any connection
//     error, without limit, as consumers always do. Same treatment.
//   - Produce is different. sink.go clears batch.canFailFromLoadErrs when it
//     writes a batch and sets it back only on a response, and
//     handleRetryBatches is called with canFail=false for request errors:
//     an idempotent producer never fails a batch whose request died on the
//     connection, so a broker stuck behind would make records wait forever,
//     past RecordDeliveryTimeout. Produce responses are therefore rewritten
//     in place: each partition's code becomes NOT_ENOUGH_REPLICAS, which is
//     retriable and means the batch was not appended (unlike
//     REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND, which make kgo
//     unsure). The broker did not process the batch, so resending it with
//     the same sequence numbers is exact; after RecordRetries or
//     RecordDeliveryTimeout kgo fails the records with NOT_ENOUGH_REPLICAS,
//     ErrRecordRetries or ErrRecordTimeout, and the producer wrapper can
//     tell the cause from Observer.OnInconsistentMetadata. Like every
//     retriable produce error in kgo, each retry waits for a metadata
//     refresh, which MetadataMinAge (default 5s) rate-limits; clients that
//     expect stale-metadata answers should lower it. Should the
//     re-encoded body differ in length from the broker's (the size prefix
//     already went to kgo) the connection fails instead.
const produceRetryCode = 19 // NOT_ENOUGH_REPLICAS

// inspect decodes a held response body and returns the bytes to hand to
// kgo, or the error to fail the connection with.
func (r *responseReader) inspect(req inflight, brokerAt int64, body []byte) ([]byte, error) {
	if req.key == apiVersionsKey {
		rewriteAPIVersionsError(body)
		if len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == r.i.code {
			// A KIP-1243 broker behind the token an ApiVersions v3+
			// request carried (the KIP exempts no API): kgo would fail
			// the connection with UNKNOWN_SERVER_ERROR, for good. The
			// broker processed nothing; the handshake is made again on a
			// new connection, as for any other request.
			r.i.inconsistent.Add(1)
			if r.i.observer != nil {
				r.i.observer.OnInconsistentMetadata(r.addr, req.key, req.sent, brokerAt)
			}
			return nil, &InconsistentMetadataError{Addr: r.addr, APIKey: req.key, Sent: req.sent, BrokerAt: brokerAt}
		}
		if len(body) >= 2 {
			switch binary.BigEndian.Uint16(body) {
			case rebootstrapRequired:
				r.i.noteRefused(r.addr)
				if ro, ok := r.i.observer.(RejectObserver); ok && req.sent >= 0 {
					// A KIP-1243 broker refusing the cluster the token
					// named: on a bootstrap server the session checks
					// which cluster it belongs to now.
					ro.OnStampRejected(r.addr)
				}
			case 0:
				r.i.noteAccepted(r.addr)
				if r.moved != nil && req.version >= 5 {
					r.movedOK.Store(true) // the broker checked the node it was named
				}
			}
		}
		if v := r.view.Load(); v != nil {
			r.i.emu.afterRead(v, &answer{key: req.key, version: req.version, apiVersions: body})
		}
		return body, nil
	}
	resp := kmsg.ResponseForKey(req.key)
	resp.SetVersion(req.version)
	if err := resp.ReadFrom(body); err != nil {
		if v := r.view.Load(); v != nil {
			r.i.emu.afterRead(v, &answer{key: req.key, version: req.version, flexible: req.flexible, token: r.holdTok})
		}
		return body, nil // not a body kmsg reads: kgo reports that itself
	}
	if m, ok := resp.(*kmsg.MetadataResponse); ok && m.ClusterID != nil {
		// A pinned client checks every Metadata answer, KIP-1243 or not:
		// a broker of another cluster must not teach it partition leaders.
		if pin := r.pinned(); pin != "" && *m.ClusterID != pin {
			return nil, r.misroute(pin, *m.ClusterID)
		}
		if r.learning() {
			r.i.learner.Learn(*m.ClusterID)
		}
	}
	if v := r.view.Load(); v != nil {
		a := &answer{key: req.key, version: req.version, flexible: req.flexible,
			token: r.holdTok, resp: resp, deadline: nanosTime(r.rdl.Load())}
		if writesMetadata(req.key) {
			a.req = r.writes.take(req.corr)
		}
		r.i.emu.afterRead(v, a)
	}
	v := reflect.ValueOf(resp)
	if !rewriteCodes(v, r.i.code, 0) {
		if r.uncoveredWrite(&req, r.holdTok, brokerAt) {
			// Answered, with a token that does not cover the write.
			r.i.emu.coverWrite(nanosTime(r.rdl.Load()))
		}
		return body, nil
	}
	r.i.inconsistent.Add(1)
	if r.i.observer != nil {
		r.i.observer.OnInconsistentMetadata(r.addr, req.key, req.sent, brokerAt)
	}
	r.i.log(kgo.LogLevelDebug, "broker answered INCONSISTENT_METADATA", "addr", r.addr, "key", req.key, "sent", req.sent, "broker_at", brokerAt)
	if req.key == metadataKey {
		r.notePartitions(resp)
	}
	if req.key == produceKey {
		r.notePartitions(resp) // while the codes still say which
		rewriteCodes(v, r.i.code, produceRetryCode)
		if fixed := resp.AppendTo(make([]byte, 0, len(body))); len(fixed) == len(body) {
			return fixed, nil
		}
	}
	return nil, &InconsistentMetadataError{Addr: r.addr, APIKey: req.key, Sent: req.sent, BrokerAt: brokerAt}
}

// rewriteCodes reports whether any int16 field named ErrorCode in v (walking
// structs, pointers and slices) equals code, and sets those fields to to
// when to is not 0.
func rewriteCodes(v reflect.Value, code, to int16) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return false
		}
		return rewriteCodes(v.Elem(), code, to)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return false
		}
		found := false
		for k := 0; k < v.Len(); k++ {
			found = rewriteCodes(v.Index(k), code, to) || found
		}
		return found
	case reflect.Struct:
		found := false
		t := v.Type()
		for k := 0; k < v.NumField(); k++ {
			f := v.Field(k)
			if !t.Field(k).IsExported() {
				continue
			}
			if t.Field(k).Name == "ErrorCode" && f.Kind() == reflect.Int16 {
				if int16(f.Int()) == code {
					found = true
					if to != 0 && f.CanSet() {
						f.SetInt(int64(to))
					}
				}
				continue
			}
			found = rewriteCodes(f, code, to) || found
		}
		return found
	}
	return false
}

const (
	inconsistentClusterID = 104 // INCONSISTENT_CLUSTER_ID
	rebootstrapRequired   = 129 // REBOOTSTRAP_REQUIRED
)

// rewriteAPIVersionsError turns an ApiVersions INCONSISTENT_CLUSTER_ID into
// REBOOTSTRAP_REQUIRED, in place. Earlier drafts of KIP-1242 answered a
// request naming the wrong cluster with INCONSISTENT_CLUSTER_ID; franz-go
// rebootstraps only on REBOOTSTRAP_REQUIRED and would fail the connection
// for good on the other, though both mean the same: this address belongs
// to another cluster. The error code is the first field of every version
// of the response body.
func rewriteAPIVersionsError(body []byte) {
	if len(body) >= 2 && binary.BigEndian.Uint16(body) == inconsistentClusterID {
		binary.BigEndian.PutUint16(body, rebootstrapRequired)
	}
}

// maxInconsistentGrowth and maxInconsistentSlack bound an
// INCONSISTENT_METADATA answer to a Fetch, ShareFetch or Metadata request
// by its request: a broker that answers it served nothing, so the answer
// lists what the request named (partitions, topics), each with the code
// and a few fixed fields, and no records or partition lists. Per named
// thing the answer is at most about one and a half times the request's. A
// larger answer to these carries data: it is not INCONSISTENT_METADATA and
// passes untouched, unscanned. These are the answers that are both large
// and frequent (every poll, every metadata refresh), whose holding would
// cost; a Metadata answer has no error message to grow it, and a Fetch
// answer's one is its top level's.
//
// Other answers are looked at whatever their size (up to maxHeldFrame):
// most carry an error message per named thing (a resource, a topic to
// create, a coordinator key), which a broker may fill as Kafka's own error
// answers do, so an INCONSISTENT_METADATA answer to a request naming many
// short names is many times the request's size (50 topics' configs with an
// 80-byte message each: 4.4 KB against a 355-byte request). They are
// admin, group and transaction answers, seldom large: scanning one costs
// about 25 ns per KiB, and holding it (only when the code's two bytes
// occur, or it is not all in the read buffer) one copy.
const (
	maxInconsistentGrowth = 8
	maxInconsistentSlack  = 1024
)

// boundedAnswer reports whether an INCONSISTENT_METADATA answer to key is
// bounded by its request (see maxInconsistentGrowth).
func boundedAnswer(key int16) bool {
	switch kmsg.Key(key) {
	case kmsg.Fetch, kmsg.ShareFetch, kmsg.Metadata:
		return true
	}
	return false
}

// mayBeInconsistent reports whether an answer whose header token does not
// say the broker was behind must still be held to look for the code: it
// can be an INCONSISTENT_METADATA answer to req (see maxInconsistentGrowth)
// and, when its body is already whole in view, the code's two bytes occur
// in it. The steady state costs a length check and, for small answers, one
// scan of bytes already in the cache; nothing is copied or decoded unless
// the bytes occur.
func (r *responseReader) mayBeInconsistent(req *inflight, view []byte) bool {
	if boundedAnswer(req.key) && int64(r.rbody) > maxInconsistentGrowth*int64(req.size)+maxInconsistentSlack {
		return false
	}
	if len(view) >= r.rbody {
		return hasCode(view[:r.rbody], r.i.code)
	}
	return true // not all read yet: held, then scanned (fillHold)
}

// hasCode reports whether the big-endian bytes of code occur in b, as an
// int16 error field holding code would put them.
func hasCode(b []byte, code int16) bool {
	hi, lo := byte(uint16(code)>>8), byte(code)
	for {
		k := bytes.IndexByte(b, hi)
		if k < 0 || k+1 >= len(b) {
			return false
		}
		if b[k+1] == lo {
			return true
		}
		b = b[k+1:]
	}
}

// responseKnown marks the API keys kmsg can decode an answer of.
var responseKnown = func() (known [256]bool) {
	for k := range known {
		known[k] = kmsg.ResponseForKey(int16(k)) != nil
	}
	return known
}()

func knownResponse(key int16) bool {
	return key >= 0 && int(key) < len(responseKnown) && responseKnown[key]
}
