package session

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/bridge"
	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/rebootstrap"
)

// Producer attaches a producer to the franz-go client of producers with
// key, made from b when there is none yet (or the last producer on it is
// closing it); a nil key gives the producer a client of its own. attach
// attaches the typed producer the caller made to a client and reports
// whether it could (see bridge.ProducerClient.Attach); on a client just
// made it always can. key must be comparable. After Close it returns
// Config.ErrClosed.
func (s *Session) Producer(b Build, key any, attach func(bridge.ProducerClient) bool) error {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return s.cfg.ErrClosed
	}
	if key == nil {
		c, err := s.newProducerClient(b, nil)
		if err != nil {
			return err
		}
		attach(c)
		return nil
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if c := s.producers[key]; c != nil && attach(c) {
		return nil
	}
	var c bridge.ProducerClient
	c, err := s.newProducerClient(b, func() {
		s.pmu.Lock()
		if s.producers[key] == c {
			delete(s.producers, key)
		}
		s.pmu.Unlock()
	})
	if err != nil {
		return err
	}
	if s.producers == nil {
		s.producers = map[any]bridge.ProducerClient{}
	}
	s.producers[key] = c
	attach(c)
	return nil
}

// newProducerClient makes the franz-go client of producers described by b;
// released, if not nil, is called when the last producer on it closes.
// s.life is held shared.
func (s *Session) newProducerClient(b Build, released func()) (bridge.ProducerClient, error) {
	cl, err := s.userClient(b)
	if err != nil {
		return nil, err
	}
	f := s.producerFollow(b)
	f.Pinned = b.Pin != ""
	f.Changed = s.changed(b.Pin)
	f.Refuse = func() error {
		if now := s.watcher.Cluster(); now != "" && now != b.Pin {
			return &rebootstrap.ClusterChangedError{From: b.Pin, To: now}
		}
		return nil
	}
	f.Recheck = b.Recheck
	f.NewClient = func() (*kgo.Client, error) { return s.Client(b) }
	f.Released = released
	return bridge.NewProducerClient(cl, f), nil
}

// producerFollow is what every client that produces follows: cluster
// changes (though a transaction never follows one), the clocks of
// INCONSISTENT_METADATA answers and authentication failures.
func (s *Session) producerFollow(b Build) bridge.ProducerFollow {
	return bridge.ProducerFollow{
		Watch:          s.watcher,
		Cluster:        s.watcher.Cluster,
		ClusterOf:      s.watcher.ClusterOf,
		Inconsistent:   s.produceMarks.Clock(),
		InconsistentOn: s.produceMarks.At,
		TopicHeldAt:    s.produceMarks.TopicHeldAt,
		Auth:           s.authWatch(b),
	}
}

// Consumer returns what a consumer described by b is made of
// (consumer.New): its first client, and how it follows cluster changes and
// hears of authentication failures. The caller sets Group. After Close it
// returns Config.ErrClosed.
func (s *Session) Consumer(b Build) (link.Consumer, error) {
	cl, err := s.Client(b)
	if err != nil {
		return link.Consumer{}, err
	}
	return link.Consumer{Client: cl, Follow: follower{s, b}, Auth: s.authWatch(b)}, nil
}

// follower is the link.Follower of a client described by b: it hears
// cluster changes from the watcher and builds b again after one, or, for a
// client pinned to a cluster, says it is gone.
type follower struct {
	s *Session
	b Build
}

func (f follower) OnChange(fn func()) (cancel func()) { return f.s.watcher.OnChange(fn) }

func (f follower) Follow() (*kgo.Client, error) {
	if f.b.Pin != "" {
		return nil, f.s.changed(f.b.Pin)()
	}
	cl, err := f.s.Client(f.b)
	if err != nil {
		return nil, fmt.Errorf("follow the cluster change: %w", err)
	}
	return cl, nil
}

// GroupTransact makes the client of a GroupTransactSession with b, whose
// NewClient keeps the session it wraps, and returns what the session
// follows: it never swaps its client. After Close it returns
// Config.ErrClosed.
func (s *Session) GroupTransact(b Build) (bridge.ProducerFollow, error) {
	if _, err := s.Client(b); err != nil {
		return bridge.ProducerFollow{}, err
	}
	return s.producerFollow(b), nil
}

// changed returns the error of a pinned client after a cluster change.
func (s *Session) changed(pin string) func() error {
	return func() error {
		return &rebootstrap.ClusterChangedError{From: pin, To: s.watcher.Cluster()}
	}
}

// authWatch returns the watcher as the authentication-failure watch of a
// client described by b, or nil when the watcher's probes say nothing
// about it. An interface, so that "none" is a nil interface and not a nil
// *cluster.Watcher.
func (s *Session) authWatch(b Build) link.AuthWatch {
	if !b.BaseSecurity {
		return nil
	}
	return s.watcher
}
