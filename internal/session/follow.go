package session

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/rebootstrap"
)

// Producer returns how a producer described by b meets the session (see
// link.Producer, which producer.New takes): its franz-go clients are made
// from b, the first one when it is attached; producers of one key share
// one client through the key's link.Share, and a nil key gives the
// producer a client of its own. key must be comparable. After Close it
// returns Config.ErrClosed.
func (s *Session) Producer(b Build, key any) (link.Producer, error) {
	if s.Closed() {
		return link.Producer{}, s.cfg.ErrClosed
	}
	l := s.producerLink(b)
	l.Clients = producerClients{s: s, b: b}
	l.Pin, l.Recheck = b.Pin, b.Recheck
	if key != nil {
		l.Share = s.producerShare(key)
	}
	return l, nil
}

// producerShare returns the share of the producers of key, made on first
// use. A share outlives the clients in it: once the last producer on one
// closes it, the share is empty until the next producer of the key.
func (s *Session) producerShare(key any) *link.Share {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	sh := s.producers[key]
	if sh == nil {
		if s.producers == nil {
			s.producers = map[any]*link.Share{}
		}
		sh = new(link.Share)
		s.producers[key] = sh
	}
	return sh
}

// producerClients is the link.ClientMaker of producers described by b.
type producerClients struct {
	s *Session
	b Build
}

// NewClient makes a client of b (after Close it fails with
// Config.ErrClosed).
func (c producerClients) NewClient() (*kgo.Client, error) { return c.s.Client(c.b) }

// producerLink is what every client that produces meets: the watcher (its
// cluster changes, the cluster it names), the clocks of
// INCONSISTENT_METADATA answers and authentication failures.
func (s *Session) producerLink(b Build) link.Producer {
	return link.Producer{
		Watch:    s.watcher,
		Clusters: s.watcher,
		Marks:    &s.produceMarks,
		Auth:     s.authWatch(b),
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
// NewClient keeps the session it wraps, and returns how the session meets
// this one: it never swaps its client, so it is given no ClientMaker.
// After Close it returns Config.ErrClosed.
func (s *Session) GroupTransact(b Build) (link.Producer, error) {
	if _, err := s.Client(b); err != nil {
		return link.Producer{}, err
	}
	return s.producerLink(b), nil
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
