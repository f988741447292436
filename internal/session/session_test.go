package session

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/link"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

// TestMain fails the package's tests if any goroutine outlives them: Close
// must join everything the session started.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	errClosed = errors.New("test: closed")
	errConfig = errors.New("test: invalid configuration")
)

// build describes a client of a cluster nobody listens on: kgo dials only
// when asked to, so the clients are made and closed without a network.
func build() Build {
	seeds := []string{"127.0.0.1:1"}
	return Build{
		Settings: func() ([]kgo.Opt, *tls.Config, error) {
			return []kgo.Opt{kgo.SeedBrokers(seeds...)}, nil, nil
		},
		Seeds:        seeds,
		Strategy:     rebootstrap.Rebootstrap,
		ClusterCheck: true,
	}
}

func newSession(t *testing.T, cfg Config) *Session {
	t.Helper()
	cfg.Store = consistency.NewMemoryStore()
	cfg.Base = build()
	cfg.ErrClosed, cfg.ErrConfig = errClosed, errConfig
	s, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// newProducer makes a string producer of key as the factory does.
func newProducer(s *Session, key any) (*producer.Producer[string, string], error) {
	l, err := s.Producer(build(), key)
	if err != nil {
		return nil, err
	}
	return producer.New(link.Seal(l), producer.String(), producer.String())
}

// TestProducersShareByKey: producers of one key share one franz-go
// client; a nil key, or another key, gets a client of its own; once the
// last producer of a shared client closes it, the key gets a new one.
func TestProducersShareByKey(t *testing.T) {
	s := newSession(t, Config{})
	a, err := newProducer(s, "k")
	require.NoError(t, err)
	b, err := newProducer(s, "k")
	require.NoError(t, err)
	own, err := newProducer(s, nil)
	require.NoError(t, err)
	other, err := newProducer(s, "other")
	require.NoError(t, err)
	require.Same(t, a.Kgo(), b.Kgo(), "one key, one client")
	require.NotSame(t, a.Kgo(), own.Kgo(), "a nil key shares nothing")
	require.NotSame(t, a.Kgo(), other.Kgo(), "another key, another client")
	require.NoError(t, own.Close(t.Context()))
	require.NoError(t, other.Close(t.Context()))

	first := a.Kgo()
	require.NoError(t, a.Close(t.Context()))
	require.NoError(t, b.Close(t.Context())) // the last one: the client closes and the key's share is empty
	c, err := newProducer(s, "k")
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close(t.Context())) }()
	require.NotSame(t, first, c.Kgo(), "a closed client is never handed out again")
}

// TestClosedSessionMakesNothing: after Close every constructor returns
// Config.ErrClosed, and Close has joined the watcher, which the first
// client started (TestMain checks for leaks).
func TestClosedSessionMakesNothing(t *testing.T) {
	s := newSession(t, Config{})
	cl, err := s.Client(build())
	require.NoError(t, err)
	defer cl.Close()
	s.Close()
	require.True(t, s.Closed())

	_, err = s.Client(build())
	require.ErrorIs(t, err, errClosed)
	_, err = s.Consumer(build())
	require.ErrorIs(t, err, errClosed)
	_, err = s.GroupTransact(build())
	require.ErrorIs(t, err, errClosed)
	_, err = s.Child(consistency.Unknown())
	require.ErrorIs(t, err, errClosed)
	_, err = s.Producer(build(), "k")
	require.ErrorIs(t, err, errClosed)
	_, err = s.Producer(build(), nil)
	require.ErrorIs(t, err, errClosed)
	_, err = s.AskCluster(t.Context())
	require.ErrorIs(t, err, errClosed, "the oracle is closed too")
}

// TestChildSharesTheWatcher: a child session has a store of its own over
// its parent's and shares the parent's watcher; closing it stops only its
// own constructors.
func TestChildSharesTheWatcher(t *testing.T) {
	s := newSession(t, Config{})
	tok, err := consistency.Of("c", 7)
	require.NoError(t, err)
	child, err := s.Child(tok)
	require.NoError(t, err)
	require.Same(t, s.Watcher(), child.Watcher())
	require.Equal(t, tok, child.Store().Load())
	require.True(t, s.Store().Load().IsUnknown(), "the child's token never raises the parent's store")

	child.Close()
	_, err = child.Client(build())
	require.ErrorIs(t, err, errClosed)
	cl, err := s.Client(build())
	require.NoError(t, err, "the parent is still open")
	cl.Close()
}

// TestAuthWatchOnlyForBaseSecurity: only a client whose security settings
// are the factory's watches the probes' authentication failures, and "no
// watch" is a nil interface, not a nil *cluster.Watcher in one (which the
// clients would call).
func TestAuthWatchOnlyForBaseSecurity(t *testing.T) {
	s := newSession(t, Config{})
	b := build()
	b.BaseSecurity = true
	require.NotNil(t, s.authWatch(b))
	b.BaseSecurity = false
	require.Nil(t, s.authWatch(b), "a nil watch must be a nil interface")

	l, err := s.Consumer(b)
	require.NoError(t, err)
	l.Client.Close()
	require.Nil(t, l.Auth)
	b.BaseSecurity = true
	l, err = s.Consumer(b)
	require.NoError(t, err)
	l.Client.Close()
	require.NotNil(t, l.Auth)
}

// TestNoTokensKeepsNone: with NoTokens the clients stamp from a store that
// stays Unknown, and there is no oracle to check tokens with.
func TestNoTokensKeepsNone(t *testing.T) {
	s := newSession(t, Config{NoTokens: true})
	require.Nil(t, s.oracle)
	require.Nil(t, s.emu)
	_, err := s.AskCluster(t.Context())
	require.ErrorIs(t, err, errNoTokens)
}

// TestRefusedOptionsWrapErrConfig: franz-go's refusal of a client's
// options, and KgoOpts that undo the rebootstrap hook, wrap ErrConfig.
func TestRefusedOptionsWrapErrConfig(t *testing.T) {
	s := newSession(t, Config{})
	b := build()
	b.KgoOpts = []kgo.Opt{kgo.OnRebootstrapRequired(func() ([]string, error) { return nil, nil })}
	_, err := s.Client(b)
	require.ErrorIs(t, err, errConfig)
	require.ErrorContains(t, err, "kgo.OnRebootstrapRequired")
	b = build()
	b.KgoOpts = []kgo.Opt{kgo.SeedBrokers()}
	_, err = s.Client(b)
	require.ErrorIs(t, err, errConfig)
}
