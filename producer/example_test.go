package producer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

type payment struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

// A producer made by the factory that created the topic writes to it at
// once, although every broker applies the create 300ms late.
func ExampleProducer_Produce() {
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(300*time.Millisecond))
	if err != nil {
		panic(err)
	}
	defer lc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...))
	if err != nil {
		panic(err)
	}
	defer f.Close(context.Background())
	adm, err := f.Admin()
	if err != nil {
		panic(err)
	}
	defer adm.Close(context.Background())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "payments"); err != nil {
		panic(err)
	}

	p, err := factory.NewProducer(f, producer.String(), producer.JSON[payment]())
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	for _, pay := range []payment{{"p-1", 9.5}, {"p-2", 20}} {
		res, err := p.Produce(ctx, producer.Record[string, payment]{
			Topic:   "payments",
			Key:     pay.ID,
			Value:   pay,
			Headers: []producer.Header{{Key: "source", Value: []byte("example")}},
		})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s → %s[%d]@%d\n", pay.ID, res.Topic, res.Partition, res.Offset)
	}
	// Output:
	// p-1 → payments[0]@0
	// p-2 → payments[0]@1
}

// ProduceAsync queues a record and reports its outcome to a callback; Flush
// waits for every queued record. A value that does not serialize is refused
// at once, before anything is sent.
func ExampleProducer_ProduceAsync() {
	lc, err := localcluster.New(localcluster.Brokers(1), localcluster.SeedTopics(1, "metrics"))
	if err != nil {
		panic(err)
	}
	defer lc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...))
	if err != nil {
		panic(err)
	}
	defer f.Close(context.Background())
	p, err := factory.NewProducer(f, producer.String(), producer.JSON[any]())
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)

	offsets := make(chan int64, 3)
	for i := range 3 {
		err := p.ProduceAsync(ctx, producer.Record[string, any]{Topic: "metrics", Value: i},
			func(r producer.Result, err error) {
				if err != nil {
					panic(err)
				}
				offsets <- r.Offset
			})
		if err != nil {
			panic(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		panic(err)
	}
	fmt.Println("acknowledged:", len(offsets))

	err = p.ProduceAsync(ctx, producer.Record[string, any]{Topic: "metrics", Value: make(chan int)}, nil)
	fmt.Println("serialize error:", errors.Is(err, producer.ErrSerialize))
	// Output:
	// acknowledged: 3
	// serialize error: true
}
