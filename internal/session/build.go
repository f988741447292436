package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/cluster"
	"github.com/kconsist/kconsist/internal/tokens"
	"github.com/kconsist/kconsist/internal/wire"
	"github.com/kconsist/kconsist/rebootstrap"
)

// Build describes one franz-go client, resolved for its role and validated
// by the factory: nothing in it is checked again, and it is never modified,
// so a client built again after a cluster change is built from the same
// description.
type Build struct {
	// Settings translates the client's settings into franz-go options
	// and the TLS config the interceptor dials with (nil: plaintext). It
	// is called for every client built: franz-go options must not be
	// shared by clients built at once (kgo.ProducerBatchCompression's
	// codecs are deduplicated in place), and a client built again after a
	// cluster change reads certificate files anew. The factory checked it
	// once; it fails only if a file changed since.
	Settings func() ([]kgo.Opt, *tls.Config, error)
	// Extra are options of the client's kind (topics to consume...),
	// applied after the session's own; KgoOpts are the user's raw
	// options, applied last.
	Extra, KgoOpts []kgo.Opt
	// Seeds are the bootstrap servers.
	Seeds []string
	// Pin is the only cluster the client may talk to; "" follows the
	// bootstrap servers.
	Pin string
	// Strategy and ClusterCheck are metadata.recovery.strategy and
	// metadata.cluster.check.enable.
	Strategy     rebootstrap.Strategy
	ClusterCheck bool
	// Resolver replaces DNS resolution of host names; nil: the system's.
	Resolver rebootstrap.Resolver
	// InconsistentMetadataCode is the error code of INCONSISTENT_METADATA;
	// 0: the wire layer's default.
	InconsistentMetadataCode int16
	// Logger gets the wire layer's logs. May be nil.
	Logger *slog.Logger
	// Observer hears what the client's connections saw; nil: nobody.
	Observer Observer
	// Hooks returns the options that install the user's hooks on one new
	// client; it is called for every client built, a swap's included.
	// May be nil.
	Hooks func() []kgo.Opt
	// NewClient builds the client instead of kgo.NewClient (a
	// GroupTransactSession wraps its own). May be nil.
	NewClient func(...kgo.Opt) (*kgo.Client, error)
	// BaseSecurity says the watcher's probes speak for this client: its
	// bootstrap servers, credentials and TLS settings are the factory's
	// own, so their authentication failures are its own too.
	BaseSecurity bool
	// Recheck is how often a pinned producer that refuses records asks
	// the bootstrap servers again.
	Recheck time.Duration

	// checked: a session's own client that keeps kgo's KIP-1242 check
	// and rebootstraps to the seeds (the oracle's, see oracle.go), unless
	// the factory turned the check off.
	checked bool
}

// Observer hears what the connections of one client saw, for the
// factory's events. It is called on the client's network path (advances
// under the store owner's lock): it must only queue. The session does its
// own bookkeeping first. Moves and heals are the store owner's to report
// (Config.OnTokenChange).
type Observer interface {
	wire.Observer
}

// Client returns a client made from b, for a user. After Close it returns
// Config.ErrClosed.
func (s *Session) Client(b Build) (*kgo.Client, error) {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.closed {
		return nil, s.cfg.ErrClosed
	}
	return s.userClient(b)
}

// userClient makes a client handed to a user; s.life is held shared.
func (s *Session) userClient(b Build) (*kgo.Client, error) {
	var store consistency.Store = s.store
	if s.cfg.NoTokens {
		store = noTokens{}
	}
	cl, err := s.newKgo(b, store, true)
	if err != nil {
		return nil, err
	}
	s.root().learnOnce.Do(s.watcher.Watch)
	return cl, nil
}

// newKgo builds a franz-go client from b whose connections go through a
// wire interceptor on store. A shared client (any client handed to a user)
// reports events, counts stats and rebootstraps through the watcher; the
// session's own clients (probes, the oracle) do none of that.
func (s *Session) newKgo(b Build, store consistency.Store, shared bool) (*kgo.Client, error) {
	opts, tlsCfg, err := b.Settings()
	if err != nil {
		return nil, err
	}
	owner := s.tokens
	if store != s.store {
		owner = tokens.New(store, nil) // the session's own clients: nothing to report
	}
	wcfg := wire.Config{
		Tokens: owner,
		// No timeout of its own: the interceptor bounds the whole dial.
		Dial:                     cluster.Dialer(b.Resolver, (&net.Dialer{}).DialContext),
		TLS:                      tlsCfg,
		InconsistentMetadataCode: b.InconsistentMetadataCode,
		Logger:                   KgoLogger(b.Logger),
	}
	dial := &lateDialer{ready: make(chan struct{})}
	kopts := append(opts, kgo.Dialer(dial.DialContext))
	var rb rebootstrapOpts
	if shared {
		wcfg.Observer = &observer{s: s, o: b.Observer, seeds: seedSet(b.Seeds), pinned: b.Pin != ""}
		if pin := b.Pin; pin != "" {
			wcfg.ExpectedCluster = func() string { return pin }
		} else {
			wcfg.Adopt = s.adopt(b)
			wcfg.Learner = s.watcher
		}
		wcfg.Emulator = s.emu
		wcfg.Healer = s.healer
		rb = newRebootstrapOpts(b.Strategy, b.ClusterCheck, b.Seeds, func() {
			s.stats.rebootstraps.Add(1)
			s.watcher.Rebootstrapped()
		})
		kopts = append(kopts, kgo.WithHooks(closeHook(func() { s.stats.remove(dial.ic) })))
		if b.Hooks != nil {
			kopts = append(kopts, b.Hooks()...)
		}
	} else if b.checked && b.ClusterCheck && b.Strategy != rebootstrap.None { // the oracle's: see oracle
		rb = newRebootstrapOpts(rebootstrap.Rebootstrap, true, b.Seeds, nil)
	} else {
		rb = newRebootstrapOpts(rebootstrap.None, false, b.Seeds, nil)
		if l := KgoLogger(b.Logger); l != nil {
			// The watcher logs each distinct probe failure once;
			// franz-go would warn at every attempt.
			kopts = append(kopts, kgo.WithLogger(quietLogger{l}))
		}
	}
	kopts = append(kopts, rb.opts...)
	kopts = append(kopts, b.Extra...)
	kopts = append(kopts, b.KgoOpts...)
	newClient := kgo.NewClient
	if b.NewClient != nil {
		newClient = b.NewClient
	}
	cl, err := newClient(kopts...)
	if err != nil {
		close(dial.ready)
		return nil, configError(s.cfg.ErrConfig, err)
	}
	// The client has not dialed yet (lateDialer holds its dials), so a
	// refused client leaves nothing behind but its Close.
	if err := rb.check(cl); err != nil {
		close(dial.ready)
		cl.Close()
		return nil, fmt.Errorf("%w: %w", s.cfg.ErrConfig, err)
	}
	wcfg.DialTimeout, _ = cl.OptValue(kgo.DialTimeout).(time.Duration)
	wcfg.Relocator = s.relocator(b, cl, shared)
	ic, err := wire.New(wcfg)
	if err != nil {
		close(dial.ready)
		cl.Close()
		return nil, configError(s.cfg.ErrConfig, err)
	}
	if shared {
		s.stats.add(ic)
	}
	dial.ic = ic
	close(dial.ready)
	return cl, nil
}

func configError(sentinel, err error) error { return fmt.Errorf("%w: %v", sentinel, err) }

// errNoTokens: CheckToken on a session that keeps no tokens (the factory
// refuses that before it asks).
var errNoTokens = errors.New("session: consistency.mode is off: no tokens are kept")

// lateDialer holds a client's dials until the client is built. kgo applies
// its DialTimeout only to its own dialer and hands a custom one a context
// without a deadline, so the interceptor is made with the DialTimeout the
// built client reports, a kgo.DialTimeout in KgoOpts included. NewClient
// never waits for a dial.
type lateDialer struct {
	ready chan struct{}
	ic    *wire.Interceptor // set before ready closes; nil if the client was refused
}

func (d *lateDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	select {
	case <-d.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if d.ic == nil {
		return nil, kgo.ErrClientClosed
	}
	return d.ic.DialContext(ctx, network, addr)
}

// closeHook runs fn when the client it is installed on closes.
type closeHook func()

func (h closeHook) OnClientClosed(*kgo.Client) { h() }

// apiVersionsKey is the request key of ApiVersions; v5 is the first that
// names the cluster and node the client expects (KIP-1242).
const apiVersionsKey = 18

// rebootstrapOpts are the kgo options that enforce a recovery strategy and
// the cluster check, with what is needed to verify, once the client is
// built, that no option in KgoOpts replaced them.
type rebootstrapOpts struct {
	opts []kgo.Opt
	// capped: the cluster check is off, by capping ApiVersions at v4.
	capped bool
	// hook is the OnRebootstrapRequired installed; nil: none.
	hook func() ([]string, error)
}

func newRebootstrapOpts(strategy rebootstrap.Strategy, clusterCheck bool, seeds []string, onRequired func()) rebootstrapOpts {
	var r rebootstrapOpts
	if strategy == rebootstrap.None || !clusterCheck {
		v := kversion.Stable()
		v.SetMaxKeyVersion(apiVersionsKey, 4)
		r.capped = true
		r.opts = append(r.opts, kgo.MaxVersions(v))
	}
	if strategy == rebootstrap.Rebootstrap {
		seeds := append([]string(nil), seeds...)
		r.hook = func() ([]string, error) {
			if onRequired != nil {
				onRequired()
			}
			// Host names go back unresolved: the dialer resolves them
			// again, so a moved DNS name is followed.
			return seeds, nil
		}
		r.opts = append(r.opts, kgo.OnRebootstrapRequired(r.hook))
	}
	return r
}

// check reports a KgoOpts option that replaced one of r's in cl.
func (r rebootstrapOpts) check(cl *kgo.Client) error {
	var errs []error
	if r.capped {
		mv, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions)
		if v, ok := mv.LookupMaxKeyVersion(apiVersionsKey); mv == nil || !ok || v > 4 {
			errs = append(errs, errors.New("KgoOpts: kgo.MaxVersions allows ApiVersions v5, which turns the cluster check back on; with ClusterCheck(false) or RecoveryStrategy(None) cap key 18 at 4 (SetMaxKeyVersion(18, 4))"))
		}
	}
	got, _ := cl.OptValue(kgo.OnRebootstrapRequired).(func() ([]string, error))
	// A func value can only be compared by its code: a closure made
	// elsewhere than newRebootstrapOpts has other code.
	if (got == nil) != (r.hook == nil) || got != nil && reflect.ValueOf(got).Pointer() != reflect.ValueOf(r.hook).Pointer() {
		errs = append(errs, errors.New("KgoOpts: kgo.OnRebootstrapRequired would replace the factory's, which resets the consistency store and reports rebootstraps; use WithObserver to hear about rebootstraps"))
	}
	return errors.Join(errs...)
}
