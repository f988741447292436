package factory

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/producer"
)

// TestOptionsForAnotherRole: an option a client of its role would ignore,
// as a Go option or a property, is refused by that client's constructor and
// named; in New it is the base of the clients that use it.
func TestOptionsForAnotherRole(t *testing.T) {
	f, err := New(nil, BootstrapServers("127.0.0.1:1"), GroupID("base"), Acks("1"), Linger(0), IsolationLevel("read_committed"))
	require.NoError(t, err, "any option may be part of the base")
	t.Cleanup(f.Close)
	props, err := FromProperties(map[string]string{"acks": "0", "compression.type": "zstd"})
	require.NoError(t, err)

	_, err = f.Admin(GroupID("g"), ClientID("fine"))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "group.id (a consumer setting): not used by admin clients")

	_, err = f.Admin(DeliveryTimeout(1))
	require.ErrorContains(t, err, "delivery.timeout.ms (a producer setting): not used by admin clients")

	_, err = NewProducer(f, producer.String(), producer.String(), GroupID("g"), AutoOffsetReset("earliest"), IsolationLevel("read_committed"))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "group.id (a consumer setting), auto.offset.reset (a consumer setting), isolation.level (a consumer setting): not used by producer clients")

	_, err = NewConsumer(f, consumer.String(), consumer.String(), []string{"t"}, Acks("1"), Idempotence(false), Linger(0))
	require.ErrorContains(t, err, "acks (a producer setting), enable.idempotence (a producer setting), linger.ms (a producer setting): not used by consumer clients")

	_, err = NewConsumer(f, consumer.String(), consumer.String(), []string{"t"}, props...)
	require.ErrorContains(t, err, "acks (a producer setting), compression.type (a producer setting): not used by consumer clients", "properties too")

	// Each role takes its own options, and a bare client takes all.
	p, err := NewProducer(f, producer.String(), producer.String(), append(props, Acks("all"), Linger(5), Idempotence(true), DeliveryTimeout(1e9))...)
	require.NoError(t, err)
	require.NoError(t, p.Close(context.Background()))
	c, err := NewConsumer(f, consumer.String(), consumer.String(), []string{"t"}, GroupID("g"), AutoOffsetReset("earliest"), IsolationLevel("read_uncommitted"))
	require.NoError(t, err)
	c.Close(context.Background())
	cl, err := f.KgoClient(GroupID("g"), Acks("1"))
	require.NoError(t, err)
	cl.Close()
	adm, err := f.Admin(ClientID("admin"))
	require.NoError(t, err)
	adm.Close(context.Background())
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
	f, err := New(nil, BootstrapServers(kc.ListenAddrs()...),
		Hooks(AllRoles, all), Hooks(RoleProducer, prod), Hooks(RoleConsumer|RoleAdmin, cons),
		HooksPerClient(func(info ClientInfo) []kgo.Hook {
			mu.Lock()
			defer mu.Unlock()
			infos = append(infos, info)
			return nil
		}))
	require.NoError(t, err)
	t.Cleanup(f.Close)
	ctx := testCtx(t)

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
	c, err := NewConsumer(f, consumer.String(), consumer.String(), []string{"t"})
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
}

func TestHooksPerClientNil(t *testing.T) {
	_, err := New(nil, BootstrapServers("127.0.0.1:1"), HooksPerClient(nil))
	require.ErrorIs(t, err, ErrConfig)
	require.ErrorContains(t, err, "HooksPerClient: nil function")
}
