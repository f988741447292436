package localcluster

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Opt configures a Cluster; see New.
type Opt func(*config)

type config struct {
	brokers          int
	lag              time.Duration
	brokerLag        map[int32]time.Duration
	clusterID        string
	waitMax          time.Duration
	idleTimeout      time.Duration
	errorMode        bool
	behind           Behind            // how a broker that cannot wait says it is behind
	inconsistentTok  InconsistentToken // the header token of an INCONSISTENT_METADATA answer
	writesAtCommit   bool              // WriteAnswers(WritesAtCommit)
	writesOwnBelow   bool              // WriteAnswers(WritesAtCommitOwnOffset)
	tokensOff        bool              // Native(false); the zero config is native
	noFeaturesEpoch  bool              // FeaturesEpoch(false)
	quorumRefused    bool              // DescribeQuorumAllowed(false)
	inconsistentCode int16
	logger           *slog.Logger
	seedTopics       []seedTopic
	kfakeOpts        []kfake.Opt
	errs             []error
}

type seedTopic struct {
	partitions int32
	names      []string
}

// DefaultWaitMax is how long a broker holds a request whose token it has
// not applied yet, unless WaitMax says otherwise.
const DefaultWaitMax = 5 * time.Second

// DefaultIdleTimeout is how long a gateway keeps a connection that does
// nothing, unless IdleTimeout says otherwise; it is the default of Kafka's
// connections.max.idle.ms.
const DefaultIdleTimeout = 10 * time.Minute

// DefaultInconsistentMetadataCode is the provisional INCONSISTENT_METADATA
// error code of the ARCHITECTURE contract; KIP-1243 has no code upstream.
const DefaultInconsistentMetadataCode int16 = 1243

// Brokers sets the number of brokers, 1 to 64; the default is 3. Node ids
// are 0..n-1, as in kfake.
func Brokers(n int) Opt {
	return func(c *config) {
		if n < 1 || n > 64 {
			c.errs = append(c.errs, fmt.Errorf("Brokers(%d): want 1 to 64 brokers", n))
			return
		}
		c.brokers = n
	}
}

// Lag sets how long every broker waits after a record is committed before it
// applies it; BrokerLag overrides it for one broker. The default is 0: brokers
// apply a commit as soon as they see it (still asynchronously).
func Lag(d time.Duration) Opt {
	return func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("Lag(%v): negative lag", d))
			return
		}
		c.lag = d
	}
}

// BrokerLag sets the apply lag of one broker, overriding Lag. Change it at
// run time with Cluster.SetLag.
func BrokerLag(node int32, d time.Duration) Opt {
	return func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("BrokerLag(%d, %v): negative lag", node, d))
			return
		}
		if c.brokerLag == nil {
			c.brokerLag = make(map[int32]time.Duration)
		}
		c.brokerLag[node] = d
	}
}

// ClusterID sets the cluster id written in the ClusterIDRecord at offset 0,
// given to kfake (so its KIP-1242 ApiVersions check agrees) and put in every
// response header. The default is a random 22-character id, like Kafka's.
func ClusterID(id string) Opt {
	return func(c *config) {
		if id == "" || len(id) > 255 {
			c.errs = append(c.errs, fmt.Errorf("ClusterID(%q): want 1 to 255 bytes", id))
			return
		}
		c.clusterID = id
	}
}

// WaitMax bounds how long a broker holds a request whose header token it has
// not applied yet (default DefaultWaitMax); a request with a timeout of its
// own (TimeoutMillis: Produce, CreateTopics, DeleteTopics...) is held no
// longer than that. When the wait runs out, the broker says it is behind as
// in ErrorMode (see BehindAnswer). WaitMax also bounds how long the answer
// to a metadata write waits for the answering broker to apply the write.
func WaitMax(d time.Duration) Opt {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("WaitMax(%v): want a positive duration", d))
			return
		}
		c.waitMax = d
	}
}

// IdleTimeout sets how long a gateway keeps a connection on which the
// client sends nothing while no request is in flight and no response went
// out (default DefaultIdleTimeout), like Kafka's connections.max.idle.ms.
// Clients reconnect when they need to, as they do with Kafka.
func IdleTimeout(d time.Duration) Opt {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("IdleTimeout(%v): want a positive duration", d))
			return
		}
		c.idleTimeout = d
	}
}

// ErrorMode makes brokers answer a request whose token they have not applied
// at once, instead of waiting: KIP-1243's "it may return an
// INCONSISTENT_METADATA error" rather than "it may wait up to the request
// timeout". How the broker says it is set by BehindAnswer (an error answer,
// or a closed connection), the header token of the error answer by
// InconsistentTokenIs.
func ErrorMode(on bool) Opt {
	return func(c *config) { c.errorMode = on }
}

// Behind is how a broker tells a client that it has not applied the
// request's token, once it will wait no longer (at once in ErrorMode, else
// when the wait ran out). Either way the request is neither executed nor
// served from the broker's older metadata.
type Behind int8

const (
	// BehindError answers INCONSISTENT_METADATA in the API's error fields
	// (see inconsistent.go), and closes the connection where the answer
	// has no place for it (an API without error fields, a Metadata request
	// for all topics) or no answer is sent (acks=0 Produce). The default.
	BehindError Behind = iota
	// BehindClose closes the connection of every such request, error
	// fields or not: a broker that never sends INCONSISTENT_METADATA.
	BehindClose
)

func (b Behind) String() string {
	switch b {
	case BehindError:
		return "error"
	case BehindClose:
		return "close"
	}
	return fmt.Sprintf("Behind(%d)", int8(b))
}

// BehindAnswer sets how a broker says it is behind a request's token
// (default BehindError).
func BehindAnswer(b Behind) Opt {
	return func(c *config) {
		if b != BehindError && b != BehindClose {
			c.errs = append(c.errs, fmt.Errorf("BehindAnswer(%v): want BehindError or BehindClose", b))
			return
		}
		c.behind = b
	}
}

// InconsistentToken is the offset an INCONSISTENT_METADATA answer carries
// in its header's tag 0. KIP-1243 says only "After handling a request,
// Kafka servers will include their latest cluster metadata offset in the
// ResponseHeader", which a broker may read in more than one way.
type InconsistentToken int8

const (
	// TokenApplied is the offset the broker has applied when the answer
	// is written, as in every other answer: a broker's tokens never
	// decrease. It may be at or above the request's token when the
	// broker caught up between judging and answering. The default.
	TokenApplied InconsistentToken = iota
	// TokenJudged is the applied offset the broker judged the request
	// against, below the request's token, even if an answer written
	// before it carried a higher one.
	TokenJudged
	// TokenFetched is the newest offset the broker knows committed (the
	// end of the metadata log it fetched) though it has not applied it:
	// at or above the request's token, and above what the broker's next
	// answers carry, so its tokens go back down.
	TokenFetched
)

func (t InconsistentToken) String() string {
	switch t {
	case TokenApplied:
		return "applied"
	case TokenJudged:
		return "judged"
	case TokenFetched:
		return "fetched"
	}
	return fmt.Sprintf("InconsistentToken(%d)", int8(t))
}

// WriteAnswer is when a broker answers a metadata write (CreateTopics,
// DeleteTopics, CreatePartitions, AlterConfigs, IncrementalAlterConfigs)
// that the controller committed, and with which header token.
type WriteAnswer int8

const (
	// WritesAfterOwnApply answers once the answering broker has applied
	// the write, with its own applied offset (at or above the write): its
	// tokens never decrease. Past WaitMax or the request's own timeout, the
	// write is answered REQUEST_TIMED_OUT with the broker's offset. The
	// default.
	WritesAfterOwnApply WriteAnswer = iota
	// WritesAtCommit answers as soon as the write is committed, with the
	// commit offset, which the answering broker may not have applied: its
	// next answer's token can be lower. Clients must not need a broker's
	// tokens to rise; this variant checks that they do not. It also keeps
	// writes as fast as on Kafka 4.4, where a lagging broker is felt by
	// reads only.
	WritesAtCommit
	// WritesAtCommitOwnOffset answers as soon as the write is committed,
	// with the answering broker's own applied offset, which may be below
	// the write: the literal text of KIP-1243 ("After handling a request,
	// Kafka servers will include their latest cluster metadata offset")
	// allows it, and such a token does not cover the write. A client that
	// reads its own writes must learn the write's offset otherwise (the
	// SDK asks the quorum, as for Kafka 4.4). Stats().WritesAnsweredBelow
	// counts the writes the answering broker had not applied then.
	WritesAtCommitOwnOffset
)

// WriteAnswers sets when metadata writes are answered (default
// WritesAfterOwnApply). Native(false) clusters answer at commit whatever
// the setting, with no token, as Kafka 4.4 does.
func WriteAnswers(w WriteAnswer) Opt {
	return func(c *config) {
		if w != WritesAfterOwnApply && w != WritesAtCommit && w != WritesAtCommitOwnOffset {
			c.errs = append(c.errs, fmt.Errorf("WriteAnswers(%d): want WritesAfterOwnApply, WritesAtCommit or WritesAtCommitOwnOffset", w))
			return
		}
		c.writesAtCommit = w == WritesAtCommit
		c.writesOwnBelow = w == WritesAtCommitOwnOffset
	}
}

// InconsistentTokenIs sets the header token of INCONSISTENT_METADATA
// answers (default TokenApplied).
func InconsistentTokenIs(t InconsistentToken) Opt {
	return func(c *config) {
		if t < TokenApplied || t > TokenFetched {
			c.errs = append(c.errs, fmt.Errorf("InconsistentTokenIs(%v): want TokenApplied, TokenJudged or TokenFetched", t))
			return
		}
		c.inconsistentTok = t
	}
}

// InconsistentMetadataCode sets the error code of INCONSISTENT_METADATA
// (default DefaultInconsistentMetadataCode). It must be positive and not a
// code Kafka has assigned, which today end below 200.
func InconsistentMetadataCode(code int16) Opt {
	return func(c *config) {
		if code < 200 {
			c.errs = append(c.errs, fmt.Errorf("InconsistentMetadataCode(%d): want a code of 200 or more, clear of Kafka's", code))
			return
		}
		c.inconsistentCode = code
	}
}

// Logger sets where the cluster logs what it refuses or fails to do (closed
// connections, cluster id mismatches). The default discards.
func Logger(l *slog.Logger) Opt {
	return func(c *config) {
		if l == nil {
			c.errs = append(c.errs, fmt.Errorf("Logger(nil)"))
			return
		}
		c.logger = l
	}
}

// SeedTopics creates topics with the given partition count before the
// cluster serves; their records follow the cluster id record, and every
// broker has applied them when New returns.
func SeedTopics(partitions int32, topics ...string) Opt {
	return func(c *config) {
		if partitions < 1 {
			c.errs = append(c.errs, fmt.Errorf("SeedTopics(%d, ...): want at least one partition", partitions))
			return
		}
		c.seedTopics = append(c.seedTopics, seedTopic{partitions, topics})
	}
}

// KfakeOpts passes options to the kfake cluster underneath. The local
// cluster sets NumBrokers, ClusterID and SeedTopics itself; options that
// create topics behind the gateways (AllowAutoTopicCreation) make topics the
// metadata log never hears of, and gateways hide them.
func KfakeOpts(opts ...kfake.Opt) Opt {
	return func(c *config) { c.kfakeOpts = append(c.kfakeOpts, opts...) }
}

// Native sets whether brokers implement KIP-1243 (default true). Native(false)
// makes them behave like Apache Kafka 4.4, which has no header tokens: no tag
// 0 in response headers, and a request's tag 0 is skipped like any unknown
// header tag, so no request is held or answered INCONSISTENT_METADATA and
// no header cluster id is checked. Brokers still lag and serve stale reads,
// and still report their applied offset as ApiVersions'
// FinalizedFeaturesEpoch and the log's high watermark in DescribeQuorum: what
// a client needs to emulate tokens.
func Native(on bool) Opt {
	return func(c *config) { c.tokensOff = !on }
}

// FeaturesEpoch sets whether ApiVersions answers (v3+) carry the broker's
// applied offset as FinalizedFeaturesEpoch (default true, as KRaft brokers
// do). FeaturesEpoch(false) answers like a broker that has no finalized
// features: no FinalizedFeaturesEpoch (-1, so the tag is left out) and no
// FinalizedFeatures. It is for testing clients against brokers whose
// applied offset cannot be learnt.
func FeaturesEpoch(on bool) Opt {
	return func(c *config) { c.noFeaturesEpoch = !on }
}

// DescribeQuorumAllowed sets whether DescribeQuorum is answered (default
// true). DescribeQuorumAllowed(false) answers it CLUSTER_AUTHORIZATION_FAILED,
// as Kafka answers a principal without DESCRIBE on CLUSTER.
func DescribeQuorumAllowed(on bool) Opt {
	return func(c *config) { c.quorumRefused = !on }
}
