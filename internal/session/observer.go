package session

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/wire"
)

// observer is the wire observer of one client: the session's bookkeeping,
// then the factory's Observer, if any.
type observer struct {
	s      *Session
	o      Observer // nil: nobody listens
	seeds  map[string]bool
	pinned bool
}

var (
	_ wire.RejectObserver  = (*observer)(nil)
	_ wire.ProduceObserver = (*observer)(nil)
)

// OnStampRejected: a bootstrap server closed the connection of a stamped
// request, which a KIP-1243 broker of another cluster does; check which
// cluster the bootstrap servers name now.
func (w *observer) OnStampRejected(addr string) {
	if w.seeds[normalAddr(addr)] {
		w.s.watcher.Check(false)
	}
}

func (w *observer) OnTokenAdvanced(from, to consistency.Token) {
	if w.o != nil {
		w.o.OnTokenAdvanced(from, to)
	}
}

func (w *observer) OnInconsistentMetadata(addr string, key int16, sent, at int64) {
	// Any such answer may be what held a record that then timed out (its
	// metadata, its producer id): the producer's clock moves for all.
	w.s.produceMarks.Tick()
	if h := w.s.healer; h != nil {
		h.Check()
	}
	if w.o != nil {
		w.o.OnInconsistentMetadata(addr, key, sent, at)
	}
}

// OnProduceInconsistentMetadata: see link.InconsistentMarks.At.
func (w *observer) OnProduceInconsistentMetadata(topic string, partition int32) {
	w.s.produceMarks.Mark(topic, partition)
}

func (w *observer) OnMisroute(addr, expected, got string) {
	if w.pinned {
		// The pinned cluster may be gone from behind the bootstrap
		// servers; find out, so that waiting records fail.
		w.s.watcher.Check(false)
	}
	if w.o != nil {
		w.o.OnMisroute(addr, expected, got)
	}
}

// adopt lets an unpinned client follow its bootstrap servers to a new
// KIP-1243 cluster: a bootstrap server answering for another cluster resets
// the store (the old cluster's offsets mean nothing there), while any other
// address answering for another cluster stays a misroute. A store whose
// cluster the watcher never found behind the bootstrap servers (it knows
// none yet, or knows the answer's) may hold a foreign token, given to a
// fresh factory: that is no move, and the token is replaced as a heal.
// The store's owner has the last word (tokens.Owner.Judge): a token it
// learnt from its own brokers makes it a move whatever the watcher knows
// yet, and one another writer put in a store shared across clusters a
// misroute.
func (s *Session) adopt(b Build) func(addr, cluster string) wire.Adoption {
	seeds := seedSet(b.Seeds)
	return func(addr, cluster string) wire.Adoption {
		if !seeds[normalAddr(addr)] {
			return wire.AdoptNone
		}
		if known := s.watcher.Cluster(); known == "" || known == cluster {
			return wire.AdoptForeign
		}
		return wire.AdoptMove
	}
}

func seedSet(seeds []string) map[string]bool {
	set := make(map[string]bool, len(seeds))
	for _, s := range seeds {
		set[normalAddr(s)] = true
	}
	return set
}

// normalAddr puts host:port in one spelling (IPv6 brackets, lower case).
func normalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return strings.ToLower(addr)
	}
	return net.JoinHostPort(strings.ToLower(host), port)
}

// Stats are counters summed over every client of a session; the fields
// are those of factory.Stats, which converts it.
type Stats struct {
	RequestsStamped      uint64
	ResponsesRead        uint64
	TokensAdvanced       uint64
	Misroutes            uint64
	InconsistentMetadata uint64
	Rebootstraps         uint64
	StoreResets          uint64
}

// Stats returns the counters of every client the session made.
func (s *Session) Stats() Stats {
	st := s.stats.snapshot()
	st.StoreResets = s.tokens.Stats().Resets
	return st
}

// wireStats sums the counters of the interceptors of live clients, plus
// those of closed clients, folded into closed when they close.
type wireStats struct {
	mu           sync.Mutex
	interceptors map[*wire.Interceptor]struct{}
	closed       wire.Stats
	rebootstraps atomic.Uint64
}

func (s *wireStats) add(i *wire.Interceptor) {
	s.mu.Lock()
	if s.interceptors == nil {
		s.interceptors = map[*wire.Interceptor]struct{}{}
	}
	s.interceptors[i] = struct{}{}
	s.mu.Unlock()
}

func (s *wireStats) remove(i *wire.Interceptor) {
	s.mu.Lock()
	if _, ok := s.interceptors[i]; ok {
		delete(s.interceptors, i)
		addStats(&s.closed, i.Stats())
	}
	s.mu.Unlock()
}

func addStats(dst *wire.Stats, st wire.Stats) {
	dst.RequestsStamped += st.RequestsStamped
	dst.ResponsesRead += st.ResponsesRead
	dst.TokensAdvanced += st.TokensAdvanced
	dst.Misroutes += st.Misroutes
	dst.InconsistentMetadata += st.InconsistentMetadata
}

func (s *wireStats) snapshot() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := s.closed
	for i := range s.interceptors {
		addStats(&sum, i.Stats())
	}
	return Stats{
		RequestsStamped:      sum.RequestsStamped,
		ResponsesRead:        sum.ResponsesRead,
		TokensAdvanced:       sum.TokensAdvanced,
		Misroutes:            sum.Misroutes,
		InconsistentMetadata: sum.InconsistentMetadata,
		Rebootstraps:         s.rebootstraps.Load(),
	}
}
