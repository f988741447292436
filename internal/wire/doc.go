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
//   - A response to a request that carried a token may carry
//     INCONSISTENT_METADATA, whatever its own header token (below the one
//     sent, at or above it, or none). One whose token is below is held
//     back and decoded; any other only when it is small enough to be such
//     an answer and holds the code's two bytes (a scan, in place when the
//     frame is whole in the read). Code 1243 never reaches kgo from a
//     frame held; see inconsistent.go for how each kind of request is then
//     retried by kgo, and for the size bound.
//   - With an [Emulator], brokers that send no tokens get tokens made from
//     their KRaft offsets (see emulate.go); where DescribeQuorum is refused
//     for want of DESCRIBE on CLUSTER, a write's offset is learnt from the
//     first broker that shows the write (shown.go), whose request the
//     writer keeps for the reader (writeNotes).
//   - With a [Healer], a request carrying a token that stays unanswered
//     for a short bound has the store checked, and once the store no
//     longer holds that token the connection fails so that kgo sends the
//     request again: healing never waits for a broker's answer (held.go).
//
// Input from brokers is never trusted: malformed headers fail the connection
// with errors wrapping [ErrMalformedHeader] and leave the store unchanged.
//
// # Who owns what
//
//   - An [Interceptor] (one per franz-go client) owns the dial, the tables
//     of addresses that refused the client (refused.go) or whose broker
//     moved (relocate.go), its counters and its timing. It is safe for
//     concurrent use.
//   - A conn (one per connection) is two halves over a link (conn.go): the
//     requestWriter (writer.go) belongs to the goroutine that calls Write,
//     the responseReader (reader.go) to the goroutine that calls Read. The
//     link holds what both see: what the dial fixed, and the in-flight FIFO
//     of requests awaiting answers, whose one rule is that the writer
//     pushes and the reader peeks and pops (a lock-free ring, inflights);
//     the rest of the link is atomics. Close and the deadlines are safe from
//     any goroutine.
//   - An [Emulator] (one per factory, shared by its Interceptors) owns what
//     is known of each broker (brokerView), the questions to the cluster and
//     the goroutines that ask them (ask.go). A conn reaches it in six
//     places: view when it is built, bind after a relocation, beforeWrite
//     on the writer, before a request is stamped, and holds, afterRead
//     and coverWrite on the reader (holds, at the header, says which
//     answers to keep for it; afterRead sees an answer once it is read;
//     coverWrite learns the offset of a write a KIP-1243 broker answered
//     with a token that cannot cover it, uncoveredWrite). None of them
//     asks the cluster itself, and none waits past its request's bound.
//     Its policy (which API keys, which bounds) is emulate_policy.go.
//   - A [Healer] (one per factory) owns the check of a store against the
//     committed offset, on a goroutine of its own (heal.go). The Emulator,
//     the session and each connection's held-request timer (held.go) ask
//     it; none waits for it.
//   - None of them writes the store: every change (an answer's token, an
//     emulated commit, a heal, a foreign token replaced, a move) is a call
//     to the factory's tokens.Owner (an advance merges and never lowers;
//     a heal, replacement or move is a compare-and-swap from the value
//     the caller judged), which reports it in store order.
//
// # Locks
//
// No lock is held across a call into another type, a question to the
// cluster, a socket read or write, or a callback (Observer, Relocator,
// OnOff), with two exceptions: question.mu is held while the
// asker's mu is taken to start a flight, and the store owner's lock
// (tokens.Owner) is held while it calls the connection's Observer
// OnTokenAdvanced, which only queues an event. So the orders are
// question.mu, then asker.mu; the owner's lock, then the event stream's;
// every other mutex (Emulator.mu for its broker table,
// brokerView.mu, Healer.mu, refusals.mu, relocation.mu) is a leaf. A
// connection's held-request watch (held.go) takes none: atomics and one
// timer. The hot path of a
// request or a response takes none: atomics only.
//
// # Time
//
// Every wait, pause and timer uses the time package's clock, which
// testing/synctest replaces: timing tests run in a bubble and assert exact
// durations. The durations tests shorten are in Config.timing; the
// Emulator's bounds are in emulate_policy.go and EmulationConfig.
package wire
