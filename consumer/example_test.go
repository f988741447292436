package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

type reading struct {
	Sensor string  `json:"sensor"`
	Value  float64 `json:"value"`
}

// A group consumer of the factory that created the topic joins and reads
// it at once, on brokers that apply the create 300ms late. A record that
// does not decode is not dropped: Poll returns a *DeserializeError that
// names it, next to the records that did decode.
func ExampleConsumer_Poll() {
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
	defer adm.Close(ctx)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "readings"); err != nil {
		panic(err)
	}
	p, err := factory.NewProducer(f, producer.String(), producer.Bytes())
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	for _, v := range []string{`{"sensor":"s1","value":21.5}`, `not json`, `{"sensor":"s2","value":19}`} {
		if _, err := p.Produce(ctx, producer.Record[string, []byte]{Topic: "readings", Value: []byte(v)}); err != nil {
			panic(err)
		}
	}

	c, err := factory.NewConsumer(f, consumer.String(), consumer.JSON[reading](), factory.ConsumeTopics("readings"),
		factory.GroupID("dashboard"), factory.AutoOffsetReset(factory.ResetEarliest))
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	lines := map[int64]string{} // by offset: one poll or several, same output
	for len(lines) < 3 {
		recs, err := c.Poll(ctx, 0)
		for _, r := range recs {
			lines[r.Offset] = fmt.Sprintf("%+v", r.Value)
		}
		var de *consumer.DeserializeError
		if errors.As(err, &de) {
			lines[de.Offset] = de.Field + " did not decode"
		} else if err != nil {
			panic(err)
		}
	}
	for off := range int64(3) {
		fmt.Printf("offset %d: %s\n", off, lines[off])
	}
	if err := c.Commit(ctx); err != nil {
		panic(err)
	}
	// Output:
	// offset 0: {Sensor:s1 Value:21.5}
	// offset 1: value did not decode
	// offset 2: {Sensor:s2 Value:19}
}

// Without a group, Assign chooses partitions and start offsets.
func ExampleConsumer_Assign() {
	lc, err := localcluster.New(localcluster.Brokers(1), localcluster.SeedTopics(2, "logs"))
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
	p, err := factory.NewProducer(f, producer.String(), producer.String(), factory.KgoOpts(kgo.RecordPartitioner(kgo.ManualPartitioner())))
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	for i := range 4 {
		rec := producer.Record[string, string]{Topic: "logs", Partition: 1, Value: fmt.Sprint("line ", i)}
		if _, err := p.Produce(ctx, rec); err != nil {
			panic(err)
		}
	}

	c, err := factory.NewConsumer(f, consumer.String(), consumer.String())
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Assign(map[string]map[int32]kgo.Offset{"logs": {1: kgo.NewOffset().At(2)}}); err != nil {
		panic(err)
	}
	for got := 0; got < 2; {
		recs, err := c.Poll(ctx, 0)
		if err != nil {
			panic(err)
		}
		for _, r := range recs {
			fmt.Printf("%s[%d]@%d: %s\n", r.Topic, r.Partition, r.Offset, r.Value)
			got++
		}
	}
	// Output:
	// logs[1]@2: line 2
	// logs[1]@3: line 3
}

// Records decodes every record into one reused value: nothing is allocated
// per record beyond what the deserializers need. Errors come in the loop;
// breaking out keeps the rest of the poll for the next read.
func ExampleConsumer_Records() {
	lc, err := localcluster.New(localcluster.Brokers(1), localcluster.SeedTopics(1, "events"))
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
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	for _, v := range []string{"login", "view", "logout"} {
		if _, err := p.Produce(ctx, producer.Record[string, string]{Topic: "events", Key: "user-7", Value: v}); err != nil {
			panic(err)
		}
	}

	c, err := factory.NewConsumer(f, consumer.String(), consumer.Bytes())
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Assign(map[string]map[int32]kgo.Offset{"events": {0: kgo.NewOffset().AtStart()}}); err != nil {
		panic(err)
	}
	for r, err := range c.Records(ctx) {
		if err != nil {
			panic(err)
		}
		// r is reused by the next iteration; its Bytes() value is
		// franz-go's and stays valid (see consumer.Bytes).
		fmt.Printf("@%d %s: %s\n", r.Offset, r.Key, r.Value)
		if r.Offset == 1 {
			break
		}
	}
	// The next read starts where the loop stopped.
	recs, err := c.Poll(ctx, 0)
	if err != nil {
		panic(err)
	}
	fmt.Printf("then @%d %s\n", recs[0].Offset, recs[0].Value)
	// Output:
	// @0 user-7: login
	// @1 user-7: view
	// then @2 logout
}

// AppendPoll reuses the caller's slice from one poll to the next.
func ExampleConsumer_AppendPoll() {
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
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	for i := range 5 {
		if _, err := p.Produce(ctx, producer.Record[string, string]{Topic: "metrics", Value: fmt.Sprint(i * i)}); err != nil {
			panic(err)
		}
	}

	c, err := factory.NewConsumer(f, consumer.String(), consumer.String())
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Assign(map[string]map[int32]kgo.Offset{"metrics": {0: kgo.NewOffset().AtStart()}}); err != nil {
		panic(err)
	}
	var batch []consumer.Record[string, string]
	for seen := 0; seen < 5; {
		batch, err = c.AppendPoll(ctx, batch[:0], 2)
		if err != nil {
			panic(err)
		}
		for _, r := range batch {
			fmt.Print(r.Value, " ")
		}
		seen += len(batch)
	}
	fmt.Println()
	// Output: 0 1 4 9 16
}

// Poll's slice is reused by the next Poll: the records of one poll are
// valid until the next. Copy what must outlive it: append(kept, recs...)
// copies the records, r := recs[i] copies one; keys, values and headers
// are never reused.
func ExampleConsumer_Poll_keep() {
	lc, err := localcluster.New(localcluster.Brokers(1), localcluster.SeedTopics(1, "jobs"))
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
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	if err != nil {
		panic(err)
	}
	defer p.Close(ctx)
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		if _, err := p.Produce(ctx, producer.Record[string, string]{Topic: "jobs", Value: v}); err != nil {
			panic(err)
		}
	}

	c, err := factory.NewConsumer(f, consumer.String(), consumer.String())
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	if err := c.Assign(map[string]map[int32]kgo.Offset{"jobs": {0: kgo.NewOffset().AtStart()}}); err != nil {
		panic(err)
	}
	var kept []consumer.Record[string, string] // outlives the polls
	var last consumer.Record[string, string]
	for len(kept) < 5 {
		recs, err := c.Poll(ctx, 2)
		if err != nil {
			panic(err)
		}
		kept = append(kept, recs...) // copies the records out of recs
		if len(recs) > 0 {
			last = recs[len(recs)-1] // a copy too; &recs[i] would not be
		}
	}
	for _, r := range kept {
		fmt.Print(r.Value, " ")
	}
	fmt.Println("last:", last.Value)
	// Output: a b c d e last: e
}
