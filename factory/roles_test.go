package factory

import (
	"context"
	"crypto/tls"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
)

// TestOptionsForAnotherRole: an option a client of another role would
// ignore does not compile there (its type is not that role's option type);
// in New it is the base of the clients that use it and reaches no other
// client; each constructor takes its own role's options and ClientOpts.
func TestOptionsForAnotherRole(t *testing.T) {
	type pair struct {
		opt, takes reflect.Type
		want       bool
	}
	producerOpt, consumerOpt, adminOpt := reflect.TypeFor[ProducerOpt](), reflect.TypeFor[ConsumerOpt](), reflect.TypeFor[AdminOpt]()
	transactOpt, kgoOpt, clientOpt := reflect.TypeFor[TransactOpt](), reflect.TypeFor[KgoClientOpt](), reflect.TypeFor[ClientOpt]()
	plain := reflect.TypeFor[Opt]()
	for _, p := range []pair{
		{consumerOpt, producerOpt, false}, {consumerOpt, adminOpt, false},
		{producerOpt, consumerOpt, false}, {producerOpt, adminOpt, false},
		{producerOpt, transactOpt, true}, {consumerOpt, transactOpt, true},
		{producerOpt, kgoOpt, true}, {consumerOpt, kgoOpt, true},
		{clientOpt, producerOpt, true}, {clientOpt, consumerOpt, true}, {clientOpt, adminOpt, true},
		{clientOpt, transactOpt, true}, {clientOpt, kgoOpt, true},
		{plain, producerOpt, false}, {plain, consumerOpt, false}, {plain, adminOpt, false}, {plain, kgoOpt, false},
	} {
		require.Equal(t, p.want, p.opt.Implements(p.takes), "%v as %v", p.opt, p.takes)
	}
	// The factory-wide options are plain Opts: no client takes them.
	for _, o := range []Opt{WithStore(nil), Consistency(ModeAuto)} {
		_, isClient := o.(KgoClientOpt)
		require.False(t, isClient, "%T", o)
	}

	f, err := New(BootstrapServers("127.0.0.1:1"), GroupID("base"), RequiredAcks(LeaderAck), Linger(0), IsolationLevel(ReadCommitted))
	require.NoError(t, err, "any option may be part of the base")
	t.Cleanup(func() { _ = f.Close(context.Background()) })

	// The base's role options reach only their role's clients.
	c, err := NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"), AutoOffsetReset(ResetEarliest))
	require.NoError(t, err)
	require.Equal(t, "base", c.Kgo().OptValue(kgo.ConsumerGroup))
	require.Equal(t, 10*time.Millisecond, c.Kgo().OptValue(kgo.ProducerLinger), "franz-go's default: the base's linger.ms is a producer's")
	c.Close(context.Background())
	p, err := NewProducer(f, producer.String(), producer.String(), Linger(5), Idempotence(false), DeliveryTimeout(time.Second))
	require.NoError(t, err)
	require.Equal(t, 5*time.Nanosecond, p.Kgo().OptValue(kgo.ProducerLinger))
	require.Equal(t, "", p.Kgo().OptValue(kgo.ConsumerGroup), "the base's group.id is a consumer's")
	require.NoError(t, p.Close(context.Background()))
	cl, err := f.KgoClient(GroupID("g"), RequiredAcks(LeaderAck), ClientID("bare"))
	require.NoError(t, err)
	require.Equal(t, "g", cl.OptValue(kgo.ConsumerGroup))
	cl.Close()
	adm, err := f.Admin(ClientID("admin"))
	require.NoError(t, err)
	require.Equal(t, "", adm.Kgo().OptValue(kgo.ConsumerGroup))
	adm.Close(context.Background())

	// A nil option is an error that says which, never a panic.
	_, err = NewProducer(f, producer.String(), producer.String(), Linger(0), nil)
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "option 2 of 2 is nil")
	_, err = f.Admin(nil)
	require.ErrorContains(t, err, "option 1 of 1 is nil")
}

// TestClientSecurityReplacesBase: security options given to a client
// replace the base's as a whole, in any order, and leave the base alone.
func TestClientSecurityReplacesBase(t *testing.T) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
	f, err := New(BootstrapServers("127.0.0.1:1"), TLS(tlsCfg), SASL(Plain, "base", "p"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	for name, tc := range map[string]struct {
		opts []Opt
		want securityConfig
	}{
		"none given":          {nil, securityConfig{tls: tlsCfg, sasl: saslConfig{mechanism: Plain, user: "base", pass: "p"}}},
		"plaintext":           {[]Opt{SecurityProtocol(Plaintext)}, securityConfig{protocolSet: Plaintext}},
		"sasl alone":          {[]Opt{SASL(ScramSHA512, "u", "q")}, securityConfig{sasl: saslConfig{mechanism: ScramSHA512, user: "u", pass: "q"}}},
		"other settings kept": {[]Opt{ClientID("x")}, securityConfig{tls: tlsCfg, sasl: saslConfig{mechanism: Plain, user: "base", pass: "p"}}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := f.clientConfig(RoleKgo, tc.opts)
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.security)
			require.Equal(t, SASLSSL, f.base.security.protocol(), "the base is untouched")
		})
	}
}

// newClientHook records the clients it is installed on.
type newClientHook struct {
	mu      sync.Mutex
	clients []*kgo.Client
}

func (h *newClientHook) OnNewClient(cl *kgo.Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clients = append(h.clients, cl)
}

func (h *newClientHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

// TestHooksPerRole: hooks reach the clients of their roles, base and
// client hooks add up, HooksPerClient makes hooks per client with distinct
// ids, and the factory's internal clients get none.
func TestHooksPerRole(t *testing.T) {
	kc := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	all, prod, cons, extra := &newClientHook{}, &newClientHook{}, &newClientHook{}, &newClientHook{}
	var mu sync.Mutex
	var infos []ClientInfo
	f, err := New(BootstrapServers(kc.ListenAddrs()...),
		Hooks(AllRoles, all), Hooks(RoleProducer, prod), Hooks(RoleConsumer|RoleAdmin, cons),
		HooksPerClient(func(info ClientInfo) []kgo.Hook {
			mu.Lock()
			defer mu.Unlock()
			infos = append(infos, info)
			return nil
		}))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := testkit.Ctx(t)

	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	_, err = adm.ListTopics(ctx)
	require.NoError(t, err)
	p, err := NewProducer(f, producer.String(), producer.String(), Hooks(RoleProducer, extra))
	require.NoError(t, err)
	defer p.Close(ctx)
	_, err = p.Produce(ctx, producer.Record[string, string]{Topic: "t", Value: "v"})
	require.NoError(t, err)
	c, err := NewConsumer(f, consumer.String(), consumer.String(), ConsumeTopics("t"))
	require.NoError(t, err)
	defer c.Close(context.Background())
	cl, err := f.KgoClient()
	require.NoError(t, err)
	defer cl.Close()

	require.Equal(t, 4, all.count(), "admin, producer, consumer, kgo; no internal client")
	require.Equal(t, 1, prod.count())
	require.Equal(t, 2, cons.count())
	require.Equal(t, 1, extra.count(), "a client's hooks add to the base's")
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, infos, 4)
	roles := map[Role]bool{}
	ids := map[uint64]bool{}
	for _, in := range infos {
		roles[in.Role] = true
		ids[in.ID] = true
	}
	require.Equal(t, map[Role]bool{RoleAdmin: true, RoleProducer: true, RoleConsumer: true, RoleKgo: true}, roles)
	require.Len(t, ids, 4, "distinct ids")
}

func TestRoleString(t *testing.T) {
	require.Equal(t, "admin|producer|consumer|kgo", AllRoles.String())
	require.Equal(t, "consumer", RoleConsumer.String())
	require.Equal(t, "none", Role(0).String())
	require.Equal(t, "producer|Role(0x80)", (RoleProducer | Role(1<<7)).String())
}

func TestHooksPerClientNil(t *testing.T) {
	_, err := New(BootstrapServers("127.0.0.1:1"), HooksPerClient(nil))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "HooksPerClient: nil function")
}
