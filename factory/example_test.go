package factory_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

// README quick start: the code from "type Order" to the end of quickStart is
// copied verbatim into README.md's "Quick start" block. Change both together:
// Example_quickStart keeps the code compiling and working, and
// TestREADMEQuickStart fails when the README's copy differs.

type Order struct {
	ID   int    `json:"id"`
	Item string `json:"item"`
}

// quickStart creates a topic, writes an order and reads it back through
// three clients of one factory. They share a consistency token, so the
// producer and the consumer see the new topic at once, on every broker.
func quickStart(ctx context.Context, bootstrap string) error {
	f, err := factory.New(factory.BootstrapServers(bootstrap))
	if err != nil {
		return err
	}
	defer f.Close(context.Background())

	adm, err := f.Admin()
	if err != nil {
		return err
	}
	defer adm.Close(ctx)
	// On a second run the topic is there already, which is fine.
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}

	p, err := factory.NewProducer(f, producer.String(), producer.JSON[Order]())
	if err != nil {
		return err
	}
	defer p.Close(ctx)
	order := Order{ID: 1, Item: "book"}
	if _, err := p.Produce(ctx, producer.Record[string, Order]{Topic: "orders", Key: "o-1", Value: order}); err != nil {
		return err
	}

	c, err := factory.NewConsumer(f, consumer.String(), consumer.JSON[Order](), factory.ConsumeTopics("orders"),
		factory.AutoOffsetReset(factory.ResetEarliest))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	for {
		recs, err := c.Poll(ctx, 1)
		if err != nil {
			return err
		}
		if len(recs) > 0 {
			r := recs[0]
			fmt.Printf("%s: %+v (partition %d, offset %d)\n", r.Key, r.Value, r.Partition, r.Offset)
			tok := f.Token()
			fmt.Println("token:", tok)                 // readable, for logs
			fmt.Println("to hand over:", tok.Encode()) // parses back with consistency.ParseToken
			return nil
		}
	}
}

// End of the README quick start.

// The README's quick start, run on a local KIP-1243 cluster whose brokers
// apply metadata changes 200ms late: the producer and the consumer still see
// the topic the admin client just created, on their first try.
func Example_quickStart() {
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(200*time.Millisecond),
		localcluster.ClusterID("example-cluster"))
	if err != nil {
		panic(err)
	}
	defer lc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := quickStart(ctx, strings.Join(lc.Addrs(), ",")); err != nil {
		fmt.Println("error:", err)
	}
	// Output:
	// o-1: {ID:1 Item:book} (partition 0, offset 0)
	// token: example-cluster@4
	// to hand over: kc1.4.ZXhhbXBsZS1jbHVzdGVy
}

// TestQuickStartTwice: the code a user pastes from the README runs again
// against the same cluster, where the topic exists already.
func TestQuickStartTwice(t *testing.T) {
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer lc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for run := 1; run <= 2; run++ {
		if err := quickStart(ctx, strings.Join(lc.Addrs(), ",")); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
}

// Java client properties work as they are; unknown keys and bad values are
// errors that name the key.
func ExampleFromProperties() {
	opts, err := factory.FromProperties(map[string]string{
		"bootstrap.servers":          "broker-1:9092,broker-2:9092",
		"acks":                       "all",
		"linger.ms":                  "5",
		"metadata.recovery.strategy": "rebootstrap",
	})
	if err != nil {
		panic(err)
	}
	f, err := factory.New(opts...)
	if err != nil {
		panic(err)
	}
	defer f.Close(context.Background())
	fmt.Println(f != nil, err)

	_, err = factory.FromProperties(map[string]string{"linger.ms": "soon"})
	fmt.Println(err)
	// Output:
	// true <nil>
	// factory: invalid configuration: linger.ms: "soon" is not an integer number of milliseconds >= 0 (accepted: an integer number of milliseconds >= 0)
}

// ParseProperties reads a Java .properties file's text; LoadProperties does
// the same from a path.
func ExampleParseProperties() {
	props, err := factory.ParseProperties(strings.NewReader(`
# producer.properties
bootstrap.servers = localhost:9092
enable.idempotence: true
compression.type zstd
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(props)
	_, err = factory.FromProperties(props)
	fmt.Println(err)
	// Output:
	// map[bootstrap.servers:localhost:9092 compression.type:zstd enable.idempotence:true]
	// <nil>
}

// Every client a factory makes reports consistency events to an observer:
// here, the token moving when the admin client creates a topic.
func ExampleWithObserver() {
	lc, err := localcluster.New(localcluster.Brokers(1), localcluster.ClusterID("example-cluster"))
	if err != nil {
		panic(err)
	}
	defer lc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	tokens := make(chan string, 100)
	f, err := factory.New(factory.BootstrapServers(lc.Addrs()...),
		factory.WithObserver(factory.ObserverFunc(func(ev factory.Event) {
			if ev.Kind == factory.EventTokenAdvanced {
				select {
				case tokens <- ev.Token.String():
				default: // a slow observer delays later events: do not wait
				}
			}
		})))
	if err != nil {
		panic(err)
	}
	defer f.Close(context.Background())
	adm, err := f.Admin()
	if err != nil {
		panic(err)
	}
	defer adm.Close(context.Background())
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "events"); err != nil {
		panic(err)
	}
	// Events reach the observer on the factory's own goroutine, in order;
	// Close delivers what is still queued. The first response names the
	// cluster at its current offset; the create's response carries the
	// offset of the new topic's records.
	if err := f.Close(ctx); err != nil {
		panic(err)
	}
	var last string
	for len(tokens) > 0 {
		last = <-tokens
	}
	fmt.Println("last token event:", last)
	fmt.Println("stamped requests:", f.Stats().RequestsStamped > 0)
	// Output:
	// last token event: example-cluster@2
	// stamped requests: true
}

// TestREADMEQuickStart checks that README.md shows the quick start exactly as
// it is compiled and run here.
func TestREADMEQuickStart(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	start := strings.Index(text, "type Order struct")
	end := strings.Index(text, "// End of the README quick start.")
	if start < 0 || end < start {
		t.Fatal("quick start markers not found in example_test.go")
	}
	code := strings.TrimSpace(text[start:end])
	if !strings.Contains(string(readme), "```go\n"+code+"\n```") {
		t.Fatalf("README.md's quick start block differs from example_test.go; paste this into it:\n%s", code)
	}
}

// A token handed over by another service is checked with the cluster and
// confined to the work it came with: the session's clients wait for it,
// the factory's other clients do not. A token no broker can reach is
// refused at once.
func ExampleFactory_WithToken() {
	lc, err := localcluster.New(localcluster.Brokers(1), localcluster.ClusterID("example-cluster"))
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

	handed, err := consistency.ParseToken(consistency.MustOf("example-cluster", lc.LogEnd()).Encode())
	if err != nil {
		panic(err)
	}
	sess, err := f.WithToken(ctx, handed)
	if err != nil {
		panic(err)
	}
	defer sess.Close(context.Background())
	fmt.Println("session waits for", sess.Token(), "- factory holds", f.Token())

	_, err = f.WithToken(ctx, consistency.MustOf("example-cluster", 1<<40))
	fmt.Println(errors.Is(err, consistency.ErrFutureToken))
	// Output:
	// session waits for example-cluster@0 - factory holds unknown
	// true
}
