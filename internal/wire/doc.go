// Package wire stamps KIP-1243 consistency tokens into Kafka request headers
// and reads them back from response headers, below franz-go.
//
// franz-go has no hook on request or response headers, so the work happens
// on the byte stream: [Interceptor.DialContext] is passed to kgo.Dialer and
// every connection it returns parses the frames kgo writes and reads.
//
//   - Requests with a flexible header (RequestHeader v2) get tag 0,
//     ConsistencyState{ClusterId, ConsistencyToken}, from the shared
//     consistency.Store; nothing is added while the store is Unknown. A
//     stamped request of up to 4 KiB is built in one buffer and sent with
//     one write (and the buffer wiped after); a larger one goes out as the
//     rewritten header and kgo's untouched body in one writev. Requests
//     without a stamp are written as kgo wrote them.
//   - Responses with a flexible header (ResponseHeader v1, every flexible
//     response but ApiVersions) advance the store with their tag 0. Bytes
//     reach kgo unchanged; kgo skips header tags itself.
//   - A response naming another cluster is a misrouted connection: the store
//     is left alone and the connection fails, so kgo reconnects and the
//     KIP-1242 ApiVersions check decides what happens next.
//   - With a [Relocator], a dial to an address whose broker just closed a
//     connection first asks the bootstrap servers where that node went, and
//     follows a move; the new connection must open with kgo's KIP-1242
//     ApiVersions naming the node (see relocate.go).
//   - A response whose token is below the one sent may carry
//     INCONSISTENT_METADATA. Only such frames are held back and decoded; see
//     inconsistent.go for how each kind of request is then retried by kgo.
//
// Input from brokers is never trusted: malformed headers fail the connection
// with errors wrapping [ErrMalformedHeader] and leave the store unchanged.
package wire
