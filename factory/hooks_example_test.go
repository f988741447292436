package factory_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/producer"
)

// connects is a franz-go hook that counts connections.
type connects struct{ n atomic.Int64 }

func (c *connects) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}

// ExampleHooks installs a hook on the factory's producers only, and makes
// one per client with HooksPerClient (as kprom needs).
func ExampleHooks() {
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		panic(err)
	}
	defer kc.Close()
	var producers connects
	f, err := factory.New(factory.BootstrapServers(kc.ListenAddrs()...),
		factory.Hooks(factory.RoleProducer, &producers),
		factory.HooksPerClient(func(c factory.ClientInfo) []kgo.Hook {
			fmt.Println("new", c.Role, "client")
			return nil
		}))
	if err != nil {
		panic(err)
	}
	defer f.Close(context.Background())
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	if err != nil {
		panic(err)
	}
	defer p.Close(context.Background())
	if _, err := p.Produce(context.Background(), producer.Record[string, string]{Topic: "orders", Value: "v"}); err != nil {
		panic(err)
	}
	fmt.Println("producer connected:", producers.n.Load() > 0)
	// Output:
	// new producer client
	// producer connected: true
}
