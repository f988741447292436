package producer

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/rebootstrap"
)

// pinState is a pinned producer's side of following cluster changes
// (factory.PinCluster): while the bootstrap servers name another cluster
// than the pinned one, records are refused at once, and the records the
// client holds are failed. Replacing the client (retire) is the engine's.
//
// It meets the engine through values set once (pinTo): the session's
// cluster names and watcher, and the current client.
type pinState struct {
	pin    string             // the pinned cluster; "" when not pinned
	names  link.ClusterNames  // nil when unknown
	watch  link.ClusterWatch  // nil without a watcher
	every  time.Duration      // how often, at most, a refusal asks for a check
	client func() *kgo.Client // the current client
	cancel func()             // ends the OnChange subscription

	topics sync.Map // topics the producer sent to (noteTopic)
	// refused is set while the pinned cluster is gone from behind the
	// bootstrap servers (refusal): records fail at once.
	refused atomic.Pointer[rebootstrap.ClusterChangedError]
	// lastRecheck is when (UnixNano) a refused record last asked for a
	// check.
	lastRecheck atomic.Int64
}

// pinTo sets what p meets, before the engine is used.
func (p *pinState) pinTo(l link.Producer, client func() *kgo.Client) {
	p.pin, p.names, p.watch, p.client = l.Pin, l.Clusters, l.Watch, client
	p.every = l.Recheck
	if p.every <= 0 {
		p.every = defaultRecheck
	}
}

// on reports whether the producer is pinned to one cluster.
func (p *pinState) on() bool { return p.pin != "" }

// refusal returns the error to fail records with while the bootstrap
// servers name another cluster than the pinned one, and nil while they
// name it (or nothing is known).
func (p *pinState) refusal() *rebootstrap.ClusterChangedError {
	if p.names == nil {
		return nil
	}
	if now := p.names.Cluster(); now != "" && now != p.pin {
		return &rebootstrap.ClusterChangedError{From: p.pin, To: now}
	}
	return nil
}

// changed notes a cluster change: it reports whether records are refused
// from now on.
func (p *pinState) changed() bool {
	if refused := p.refusal(); refused != nil {
		p.lastRecheck.Store(time.Now().UnixNano()) // this was a check
		p.refused.Store(refused)
		return true
	}
	p.refused.Store(nil)
	return false
}

// stillRefused reports whether records are still refused, starting a check
// of the bootstrap servers now and then: the pinned cluster may come back
// behind them, and no client of the producer talks to them meanwhile.
func (p *pinState) stillRefused() bool {
	now := time.Now().UnixNano()
	if last := p.lastRecheck.Load(); now-last >= int64(p.every) && p.lastRecheck.CompareAndSwap(last, now) {
		p.watch.Check(false)
	}
	if p.refusal() == nil {
		p.refused.Store(nil)
		return false
	}
	return true
}

// failBuffered fails every record the current client holds for a topic
// the producer sent to.
func (p *pinState) failBuffered() {
	var topics []string
	p.topics.Range(func(k, _ any) bool {
		topics = append(topics, k.(string))
		return true
	})
	p.client().PurgeTopicsFromClient(topics...)
}

// noteTopic remembers a topic the producer sent to: failBuffered purges it.
func (p *pinState) noteTopic(topic string) {
	if _, ok := p.topics.Load(topic); !ok {
		p.topics.Store(topic, struct{}{})
	}
}

// recheck fails, again, what the client holds if records became refused
// while one was being given to it: the change's own purge may have run
// just before.
func (p *pinState) recheck() {
	if p.on() && p.refused.Load() != nil {
		p.failBuffered()
	}
}
