package factory

import (
	"context"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/kconsist/kconsist/producer"
	"github.com/kconsist/kconsist/rebootstrap"
)

// TestKgoClientHonoursGroupOptions: a bare franz-go client takes the
// consumer's options, the group's among them, so it honours them as a
// consumer does: OnPartitionsAssigned is called when its group assigns it
// the topic, BlockRebalanceOnPoll and the other callbacks are installed.
// (Before, the rebalance wiring knew only the consumer role: the client
// joined the group and fn was never called.)
func TestKgoClientHonoursGroupOptions(t *testing.T) {
	kc := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	f, err := New(BootstrapServers(kc.ListenAddrs()...))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })
	ctx := testkit.Ctx(t)

	assigned := make(chan map[string][]int32, 1)
	fn := func(_ context.Context, g *consumer.Group, ps map[string][]int32) {
		select {
		case assigned <- ps:
		default:
		}
	}
	noop := func(context.Context, *consumer.Group, map[string][]int32) {}
	cl, err := f.KgoClient(ConsumeTopics("t"), GroupID("g"), OnPartitionsAssigned(fn),
		OnPartitionsRevoked(noop), OnPartitionsLost(noop), BlockRebalanceOnPoll())
	require.NoError(t, err)
	defer cl.Close()
	require.Equal(t, true, cl.OptValue("BlockRebalanceOnPoll"))
	require.NotNil(t, cl.OptValue("OnPartitionsRevoked"))
	require.NotNil(t, cl.OptValue("OnPartitionsLost"))

	// Poll until the group assigned the topic; then stop polling and let
	// the group rebalance, so that Close can leave it.
	pollCtx, stopPolling := context.WithCancel(ctx)
	polls := make(chan struct{})
	go func() {
		defer close(polls)
		for pollCtx.Err() == nil {
			cl.PollFetches(pollCtx)
			cl.AllowRebalance()
		}
	}()
	select {
	case ps := <-assigned:
		require.Equal(t, map[string][]int32{"t": {0}}, ps)
	case <-ctx.Done():
		t.Fatal("OnPartitionsAssigned given to KgoClient was never called")
	}
	stopPolling()
	<-polls
	cl.AllowRebalance()
	cl.Close()

	// Without a group they are refused, as for a consumer.
	_, err = f.KgoClient(ConsumeTopics("t"), OnPartitionsAssigned(fn))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "OnPartitionsAssigned: needs group.id")
}

// TestRoleOptionsReachOnlyTheirRole: the consumer's settings given to New
// (topics, group) reach no admin client and no producer: an admin client
// made by a factory with ConsumeTopics in its base consumed them before.
func TestRoleOptionsReachOnlyTheirRole(t *testing.T) {
	kc := newKfake(t, kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	f, err := New(BootstrapServers(kc.ListenAddrs()...), ConsumeTopics("t"), GroupID("g"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close(context.Background()) })

	adm, err := f.Admin()
	require.NoError(t, err)
	defer adm.Close(context.Background())
	require.Empty(t, adm.Kgo().GetConsumeTopics(), "admin client")
	require.Equal(t, "", adm.Kgo().OptValue(kgo.ConsumerGroup), "admin client")
	p, err := NewProducer(f, producer.String(), producer.String())
	require.NoError(t, err)
	defer p.Close(context.Background())
	require.Empty(t, p.Kgo().GetConsumeTopics(), "producer")
	c, err := NewConsumer(f, consumer.String(), consumer.String())
	require.NoError(t, err)
	defer c.Close(context.Background())
	require.Equal(t, []string{"t"}, c.Kgo().GetConsumeTopics(), "consumer")
	cl, err := f.KgoClient()
	require.NoError(t, err)
	defer cl.Close()
	require.Equal(t, []string{"t"}, cl.GetConsumeTopics(), "bare client")
}

// TestHooksRefuseBadValues: Hooks for no role, for bits that name no role,
// or with a nil hook is refused with an error naming the option, like
// every other invalid typed value (before, Hooks(Role(0), h) was accepted
// and installed h on no client).
func TestHooksRefuseBadValues(t *testing.T) {
	h := &newClientHook{}
	for name, tc := range map[string]struct {
		opt  ClientOpt
		want string
	}{
		"no role":      {Hooks(Role(0), h), "Hooks: roles none: name at least one of RoleAdmin, RoleProducer, RoleConsumer, RoleKgo"},
		"unknown bits": {Hooks(RoleProducer|Role(1<<6), h), "Hooks: roles producer|Role(0x40): Role(0x40) is no role"},
		"nil hook":     {Hooks(AllRoles, h, nil), "Hooks: hook 2 of 2 is nil"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(BootstrapServers("127.0.0.1:1"), tc.opt)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.want)
			f, err := New(BootstrapServers("127.0.0.1:1"))
			require.NoError(t, err)
			defer f.Close(context.Background())
			_, err = f.Admin(tc.opt)
			require.ErrorContains(t, err, tc.want, "given to a client")
		})
	}
}

// TestRoleTable: the option types follow roleTable. An option of each kind
// is of the option type of exactly the roles whose row takes its kind (a
// GroupTransactSession's, TransactOpt, of the producer's and the
// consumer's), so what compiles is what the client then honours; every
// option is an Opt, for New.
func TestRoleTable(t *testing.T) {
	fn := func(context.Context, *consumer.Group, map[string][]int32) {}
	byKind := map[kind][]Opt{
		kindFactory: {WithStore(nil), Consistency(ModeAuto)},
		kindClient:  {ClientID("x"), TLS(nil), Hooks(AllRoles), KgoOpts()},
		kindProduce: {RequiredAcks(LeaderAck), TransactionalID("x"), SeparateClient()},
		kindConsume: {GroupID("g"), ConsumeTopics("t"), OnPartitionsAssigned(fn), BlockRebalanceOnPoll()},
	}
	rows := append([]roleSpec(nil), roleTable[:]...)
	rows = append(rows, roleSpec{role: RoleTransactSession, opt: reflect.TypeFor[TransactOpt]()})
	for k, opts := range byKind {
		for _, o := range opts {
			require.Equal(t, k, o.kind(), "%T", o)
			for _, r := range rows {
				want := r.role.takes()&k != 0
				require.Equal(t, want, reflect.TypeOf(o).Implements(r.opt), "%T (kind %d) as %v of %s", o, k, r.opt, r.role)
			}
		}
	}
	require.Equal(t, kindClient, Role(0).takes(), "the factory's own clients get its client settings only")
	require.Equal(t, kindClient|kindProduce|kindConsume, RoleTransactSession.takes())
}

// TestOptionsRefuseValuesTheyWouldIgnore: a nil franz-go option (which
// franz-go would panic on), TLS(nil) (which set nothing: the client
// connected in plaintext) and a recovery strategy that is not one are
// refused with an error naming the option.
func TestOptionsRefuseValuesTheyWouldIgnore(t *testing.T) {
	for name, tc := range map[string]struct {
		opt  ClientOpt
		want string
	}{
		"nil kgo option":   {KgoOpts(kgo.ClientID("x"), nil), "KgoOpts: option 2 of 2 is nil"},
		"nil TLS config":   {TLS(nil), "TLS: nil *tls.Config (for SSL with the system's roots, use SecurityProtocol(SSL))"},
		"unknown strategy": {RecoveryStrategy(rebootstrap.Strategy(9)), "metadata.recovery.strategy: 9 is not one of rebootstrap.Rebootstrap, rebootstrap.None"},
	} {
		t.Run(name, func(t *testing.T) {
			f, err := New(BootstrapServers("127.0.0.1:1"))
			require.NoError(t, err)
			defer f.Close(context.Background())
			cl, err := f.KgoClient(tc.opt)
			require.ErrorIs(t, err, ErrConfig)
			require.ErrorContains(t, err, tc.want)
			require.Nil(t, cl)
		})
	}
}
