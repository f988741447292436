package wire

// Answers to acks=0 produce requests.
//
// Kafka never answers a produce request with acks=0, so the writer does
// not put one in the in-flight FIFO: a broker that behaves would leave it
// there forever, and a connection that only produces with acks=0 would
// fill the FIFO. Some brokers answer anyway (Azure Event Hubs does), and
// kgo tolerates that: on an acks=0 produce connection it reads and drops
// whatever comes back without matching correlation ids. The reader
// tolerates it too: a response that answers no request in flight is
// taken for the answer to an acks=0 produce when this connection sent one
// with that correlation id or a later one. Its header is parsed (and its
// token observed) like any produce answer's, and the FIFO is left as it
// was.
//
// The writer publishes only the version and correlation id of the last
// acks=0 produce, in one word: kgo uses one produce version per
// connection, and its correlation ids grow by one per request.

// noAckSent marks a noAck word that describes a request.
const noAckSent = 1 << 48

// noteNoAck records the parsed request, an acks=0 produce, for the reader.
// It runs before the request reaches the socket, so the reader sees it
// before any answer.
func (w *requestWriter) noteNoAck(h *reqHeader) {
	w.noAck.Store(noAckSent | uint64(uint16(h.version))<<32 | uint64(uint32(h.corr)))
}

// noAckAnswer reports whether a response with correlation id corr, which
// answers no request in flight, may answer an acks=0 produce; if so it
// sets *req to what the reader needs to parse it.
func (r *responseReader) noAckAnswer(corr int32, req *inflight) bool {
	w := r.noAck.Load()
	if w&noAckSent == 0 {
		return false
	}
	version, last := int16(w>>32), int32(w)
	// Not newer than the last acks=0 produce sent. kgo's correlation ids
	// wrap around like int32 arithmetic does.
	if last-corr < 0 {
		return false
	}
	*req = inflight{
		corr:     corr,
		flexible: responseFlexible(produceKey, version),
		sent:     -1, // nothing waits for it: no INCONSISTENT_METADATA to inspect
		key:      produceKey,
		version:  version,
	}
	return true
}
