package wire

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/tokens"
)

// DefaultInconsistentMetadataCode is the provisional error code of
// INCONSISTENT_METADATA; KIP-1243 has no code assigned upstream yet.
const DefaultInconsistentMetadataCode int16 = 1243

// DefaultDialTimeout bounds a dial when Config.DialTimeout is not set; it
// is kgo's default DialTimeout.
const DefaultDialTimeout = 10 * time.Second

// Observer is told about events on intercepted connections. Methods are
// called synchronously from connection goroutines and must return quickly.
type Observer interface {
	// OnTokenAdvanced is called after a response moved the store forward.
	OnTokenAdvanced(from, to consistency.Token)
	// OnInconsistentMetadata is called when a broker answered
	// INCONSISTENT_METADATA: the request carried token sent and the broker
	// had only applied brokerAt.
	OnInconsistentMetadata(addr string, apiKey int16, sent, brokerAt int64)
	// OnMisroute is called when a response named another cluster than the
	// one expected; the connection is then closed.
	OnMisroute(addr string, expectedCluster, gotCluster string)
}

// RejectObserver is an optional extension of Observer: OnStampRejected is
// called when a broker closed a connection while a request carrying a token
// awaited its answer. A KIP-1243 broker does that to a request naming
// another cluster than its own.
type RejectObserver interface {
	OnStampRejected(addr string)
}

// Adoption is what a response from another cluster than the store's
// does to the store (Config.Adopt).
type Adoption int8

const (
	// AdoptNone: a misroute; the connection fails.
	AdoptNone Adoption = iota
	// AdoptMove: the bootstrap servers moved to the answer's cluster. The
	// store is reset, then learns the new cluster's tokens; the store's
	// owner reports the move (tokens.Moved).
	AdoptMove
	// AdoptForeign: the store's token names a cluster the bootstrap
	// servers never belonged to (a token given to a fresh factory). It is
	// replaced by the answer's token, a token of a cluster that applied
	// it, and reported as a heal (tokens.Healed), once. The store's owner
	// has the last word: a token it learnt from its brokers makes the
	// answer a move, and one another writer put in a store it shares
	// across clusters a misroute (tokens.Owner.Judge).
	AdoptForeign
)

// Config configures an [Interceptor].
type Config struct {
	// Tokens owns the consistency store every connection reads and
	// advances: every change goes through it. Required, unless Store is
	// set (tests): then an owner of Store that reports to nobody.
	Tokens *tokens.Owner
	// Store is the store when Tokens is nil.
	Store consistency.Store
	// Dial dials the TCP connection. Nil means a net.Dialer. It is called
	// with a context that ends after DialTimeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTimeout bounds each dial: TCP connect and TLS handshake
	// together. Zero or less means 10s, kgo's default DialTimeout. kgo
	// applies its DialTimeout only to its own dialer and passes a custom
	// one a context without a deadline, so without this bound a peer
	// that accepts and never answers the handshake holds a dial forever.
	DialTimeout time.Duration
	// TLS, when not nil, makes DialContext run the TLS handshake itself:
	// kgo cannot combine DialTLSConfig with Dialer. An empty ServerName is
	// filled from the host of each address (on a clone).
	TLS *tls.Config
	// InconsistentMetadataCode is the error code of INCONSISTENT_METADATA;
	// 0 means [DefaultInconsistentMetadataCode].
	InconsistentMetadataCode int16
	// Logger receives debug logs for stamping and advancing and warnings
	// for misroutes. May be nil.
	Logger kgo.Logger
	// Observer is told about advances, INCONSISTENT_METADATA answers and
	// misroutes. May be nil.
	Observer Observer
	// ExpectedCluster, when not nil, returns a pinned cluster id or "".
	// A response naming another cluster is a misroute even while the
	// store is Unknown.
	ExpectedCluster func() string
	// Adopt, when not nil and no cluster is pinned, is asked about a
	// response from a cluster other than the store's (see Adoption).
	// AdoptNone fails the connection as misrouted; a client that follows
	// its bootstrap servers to a new cluster (the Java client's
	// behaviour) answers AdoptMove or AdoptForeign for connections to
	// those servers. Adopt is also the notification of a move.
	Adopt func(addr, cluster string) Adoption
	// Learner, when not nil, is told the cluster id of Metadata answers
	// while it is Learning (see Learner).
	Learner Learner
	// Emulator, when not nil, makes tokens from KRaft offsets for brokers
	// whose response headers carry none (see emulate.go). It must work on
	// Store. One Emulator may serve many Interceptors.
	Emulator *Emulator
	// Relocator, when not nil, is asked where a broker went before a dial
	// to an address whose broker just closed a connection, and the dial
	// follows a move (see relocate.go). Only useful with kgo's KIP-1242
	// check on: the node to follow is learnt from its ApiVersions v5
	// requests, and a redirected connection must open with one.
	Relocator Relocator
	// Healer, when not nil, is asked (Healer.Held) when a request
	// carrying a token stays unanswered for a short bound, and a
	// connection whose held request carried a token the store no longer
	// holds is failed so that kgo sends it again (see held.go). It must
	// work on Store, or on the store Store is handed over.
	Healer *Healer

	// timing replaces the timing policy in tests; zero fields take the
	// defaults.
	timing timing
}

// Learner learns which cluster a factory's clients reached first, from
// their own Metadata answers, until it knows one. Its background probe of
// the bootstrap servers may answer only after they moved to another
// cluster: learnt from that probe alone, the move would look like no
// change at all (a record failing there with UNKNOWN_TOPIC_ID, its topic
// id being the first cluster's, would be delivered, not sent again).
// While Learning reports true every Metadata answer is held whole and
// decoded, a handful at a client's start; after that, nothing is.
type Learner interface {
	Learning() bool
	Learn(cluster string)
}

// timing is an Interceptor's timing policy. Every timer of the package
// runs on the time package's clock, which testing/synctest replaces in
// tests; these are the durations tests may shorten.
type timing struct {
	idleCheckAfter  time.Duration // see idle.go
	relocateWindow  time.Duration // see relocate.go
	refusedPauseMin time.Duration // see refused.go
	refusedPauseMax time.Duration
	refusedForget   time.Duration
}

func (t timing) withDefaults() timing {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.idleCheckAfter, defaultIdleCheckAfter)
	def(&t.relocateWindow, defaultRelocateWindow)
	def(&t.refusedPauseMin, defaultRefusedPauseMin)
	def(&t.refusedPauseMax, defaultRefusedPauseMax)
	def(&t.refusedForget, defaultRefusedForget)
	return t
}

// Interceptor makes and wraps connections that stamp and read consistency
// tokens. One Interceptor may serve any number of kgo clients and
// connections; all of them share its store and counters.
type Interceptor struct {
	store    consistency.Store
	tokens   *tokens.Owner
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout  time.Duration
	tls      *tls.Config
	code     int16
	logger   kgo.Logger
	observer Observer
	expected func() string
	adopt    func(addr, cluster string) Adoption
	learner  Learner
	emu      *Emulator
	healer   *Healer
	reloc    relocation
	refused  refusals
	timing   timing

	stamped, read, advanced, misroutes, inconsistent atomic.Uint64
}

// Stats counts what an Interceptor did since it was made.
type Stats struct {
	RequestsStamped      uint64 // requests that went out with tag 0
	ResponsesRead        uint64 // response headers parsed
	TokensAdvanced       uint64 // responses that moved the store forward
	Misroutes            uint64 // responses that named another cluster
	InconsistentMetadata uint64 // INCONSISTENT_METADATA answers seen
}

// ErrNoStore is returned by [New] when Config has neither Tokens nor Store.
var ErrNoStore = errors.New("wire: Config.Tokens (or Store) is required")

// New returns an Interceptor for cfg.
func New(cfg Config) (*Interceptor, error) {
	if cfg.Tokens == nil {
		if cfg.Store == nil {
			return nil, ErrNoStore
		}
		cfg.Tokens = tokens.New(cfg.Store, nil)
	}
	i := &Interceptor{
		store:    cfg.Tokens.Store(),
		tokens:   cfg.Tokens,
		dial:     cfg.Dial,
		timeout:  cfg.DialTimeout,
		tls:      cfg.TLS,
		code:     cfg.InconsistentMetadataCode,
		logger:   cfg.Logger,
		observer: cfg.Observer,
		expected: cfg.ExpectedCluster,
		adopt:    cfg.Adopt,
		learner:  cfg.Learner,
		emu:      cfg.Emulator,
		healer:   cfg.Healer,
		reloc:    relocation{r: cfg.Relocator},
		timing:   cfg.timing.withDefaults(),
	}
	if i.code == 0 {
		i.code = DefaultInconsistentMetadataCode
	}
	if i.timeout <= 0 {
		i.timeout = DefaultDialTimeout
	}
	if i.dial == nil {
		i.dial = (&net.Dialer{}).DialContext
	}
	return i, nil
}

// DialContext dials addr (and runs the TLS handshake when Config.TLS is
// set) and returns the intercepting connection. Pass it to kgo.Dialer. The
// whole dial ends after Config.DialTimeout, or earlier with ctx. With a
// Config.Relocator, a dial to an address whose broker just closed a
// connection may go to the broker's new address instead (see relocate.go).
// A dial to an address that just refused the client as another cluster's
// (REBOOTSTRAP_REQUIRED) first waits out a pause that grows with each
// refusal in a row, 80 ms doubling up to 800 ms (see refused.go).
func (i *Interceptor) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if err := i.paceRefused(ctx, addr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	target := addr
	to, mv := i.relocate(ctx, addr)
	if mv != nil {
		target = to
	}
	c, err := i.dial(ctx, network, target)
	if err != nil && mv != nil {
		// The new address does not answer: dial the old one, as
		// without a Relocator.
		i.log(kgo.LogLevelInfo, "the broker's new address does not answer; dialing its old one", "addr", addr, "to", to, "err", err)
		target, mv = addr, nil
		c, err = i.dial(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	if i.tls != nil {
		cfg := i.tls.Clone()
		if cfg.ServerName == "" {
			host, _, splitErr := net.SplitHostPort(target)
			if splitErr != nil {
				host = target
			}
			cfg.ServerName = host
		}
		peer := &firstBytes{Conn: c}
		tc := tls.Client(peer, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, handshakeError(addr, err, peer.got)
		}
		c = tc
	}
	return newConn(i, c, addr, mv), nil
}

// ErrNotTLS is matched (errors.Is) by the dial error of a peer that closed
// the connection during the TLS handshake without sending a byte: what a
// plaintext Kafka listener does with a ClientHello, whose first bytes it
// reads as an impossible request size.
var ErrNotTLS = errors.New("the peer closed the connection without a TLS answer (is it a plaintext listener?)")

// handshakeError is the dial error of a failed TLS handshake with addr; got
// says whether the peer sent anything.
//
// A silent close does not wrap io.EOF: kgo retries an EOF on dial under
// AlwaysRetryEOF (which the factory sets for connections cut by proxies),
// and a TLS client pointed at a plaintext port would then try three times
// before failing, where plain kgo fails at once. A close after the peer
// spoke TLS keeps its io.EOF and stays retried.
func handshakeError(addr string, err error, got bool) error {
	if !got && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return fmt.Errorf("wire: tls handshake with %s: %w (%v)", addr, ErrNotTLS, err)
	}
	return fmt.Errorf("wire: tls handshake with %s: %w", addr, err)
}

// firstBytes notes whether anything was read through it. Set and read on
// the dialing goroutine only: kgo gets the connection after the handshake.
type firstBytes struct {
	net.Conn
	got bool
}

func (f *firstBytes) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	if n > 0 {
		f.got = true
	}
	return n, err
}

// Wrap returns c intercepted as a connection to addr. The returned conn owns
// c: closing it closes c.
func (i *Interceptor) Wrap(c net.Conn, addr string) net.Conn {
	return newConn(i, c, addr, nil)
}

// Stats returns a snapshot of the counters.
func (i *Interceptor) Stats() Stats {
	return Stats{
		RequestsStamped:      i.stamped.Load(),
		ResponsesRead:        i.read.Load(),
		TokensAdvanced:       i.advanced.Load(),
		Misroutes:            i.misroutes.Load(),
		InconsistentMetadata: i.inconsistent.Load(),
	}
}

func (i *Interceptor) debug() bool {
	return i.logger != nil && i.logger.Level() >= kgo.LogLevelDebug
}

func (i *Interceptor) log(level kgo.LogLevel, msg string, keyvals ...any) {
	if i.logger != nil && i.logger.Level() >= level {
		i.logger.Log(level, msg, keyvals...)
	}
}

// InconsistentMetadataError is returned from a connection's Read when a
// broker answered INCONSISTENT_METADATA; the connection is closed. It
// matches consistency.ErrInconsistentMetadata with errors.Is, and it is
// Temporary, which makes kgo retry the request on a new connection.
type InconsistentMetadataError struct {
	Addr     string // broker address
	APIKey   int16  // request key
	Sent     int64  // token the request carried
	BrokerAt int64  // token in the response header
}

func (e *InconsistentMetadataError) Error() string {
	return fmt.Sprintf("wire: broker %s answered INCONSISTENT_METADATA to api key %d: it was at metadata offset %d, the request carried %d", e.Addr, e.APIKey, e.BrokerAt, e.Sent)
}

// Is reports whether target is consistency.ErrInconsistentMetadata.
func (e *InconsistentMetadataError) Is(target error) bool {
	return target == consistency.ErrInconsistentMetadata
}

// Temporary reports true: the broker did not process the request and will
// catch up, so it is safe and useful to send it again. kgo's
// isRetryableBrokerErr honours it.
func (e *InconsistentMetadataError) Temporary() bool { return true }

// RequestKey returns the api key of the request the broker was behind on,
// for packages that judge the error without importing this one (the admin
// client runs a call again only when franz-go did not retry that request).
func (e *InconsistentMetadataError) RequestKey() int16 { return e.APIKey }

// ErrMisroute is matched (errors.Is) by [MisrouteError].
var ErrMisroute = errors.New("wire: response from another cluster (misrouted connection)")

// MisrouteError is returned from a connection's Read when a response named
// another cluster than the store's or the pinned one; the connection is
// closed. It matches [ErrMisroute] and consistency.ErrClusterMismatch, and it
// is Temporary so that kgo reconnects, where the KIP-1242 ApiVersions check
// decides whether to rebootstrap.
type MisrouteError struct {
	Addr     string // broker address
	Expected string // cluster the store or pin names
	Got      string // cluster the response named
}

func (e *MisrouteError) Error() string {
	return fmt.Sprintf("wire: response from %s names cluster %q, expected %q (misrouted connection)", e.Addr, e.Got, e.Expected)
}

// Is reports whether target is ErrMisroute or consistency.ErrClusterMismatch.
func (e *MisrouteError) Is(target error) bool {
	return target == ErrMisroute || target == consistency.ErrClusterMismatch
}

// Temporary reports true so that kgo retries on a new connection.
func (e *MisrouteError) Temporary() bool { return true }
