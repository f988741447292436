package checker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/producer"
)

// Mode selects the clients a run uses.
type Mode string

const (
	// ModeFactory: admin clients, producers and the group consumer are
	// made by one kconsist factory and share its consistency token.
	ModeFactory Mode = "factory"
	// ModePlain: the same clients as plain franz-go kgo/kadm clients,
	// with the same franz-go options but no token.
	ModePlain Mode = "plain"
)

// ParseMode parses "factory" or "plain".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case ModeFactory, ModePlain:
		return Mode(s), nil
	}
	return "", fmt.Errorf("checker: mode %q: want factory or plain", s)
}

// Client options shared by both modes, so the modes differ only by the
// token. Admin clients keep franz-go's metadata cache for its minimum, as
// factory admin clients do; producers and consumers refresh often enough to
// find new topics and partitions within a run.
func adminKgoOpts() []kgo.Opt { return []kgo.Opt{kgo.MetadataMinAge(10 * time.Millisecond)} }

func producerKgoOpts() []kgo.Opt {
	return []kgo.Opt{kgo.MetadataMinAge(100 * time.Millisecond)}
}

func consumerKgoOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.MetadataMaxAge(time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
}

type producerClient interface {
	produce(ctx context.Context, topic, key string) (RecordRef, error)
	close()
}

type consumerClient interface {
	poll(ctx context.Context) ([]RecordRef, error)
	commit(ctx context.Context) error
	close()
}

// adminClient is what the workload asks of an admin client: a
// *kadm.Client in plain mode, a factory *admin.Client (whose reads never
// come from franz-go's metadata cache) in factory mode.
type adminClient interface {
	CreateTopic(ctx context.Context, partitions int32, replicationFactor int16, configs map[string]*string, topic string) (kadm.CreateTopicResponse, error)
	DeleteTopic(ctx context.Context, topic string) (kadm.DeleteTopicResponse, error)
	UpdatePartitions(ctx context.Context, set int, topics ...string) (kadm.CreatePartitionsResponses, error)
	AlterTopicConfigs(ctx context.Context, configs []kadm.AlterConfig, topics ...string) (kadm.AlterConfigsResponses, error)
	ListTopics(ctx context.Context, topics ...string) (kadm.TopicDetails, error)
	DescribeTopicConfigs(ctx context.Context, topics ...string) (kadm.ResourceConfigs, error)
	ListEndOffsets(ctx context.Context, topics ...string) (kadm.ListedOffsets, error)
}

// clients are the clients of one run.
type clients struct {
	admins    []adminClient
	producers []producerClient
	consumer  consumerClient
	token     func() int64
	closers   []func()
}

func (c *clients) close() {
	for i := len(c.closers) - 1; i >= 0; i-- {
		c.closers[i]()
	}
}

func newClients(mode Mode, addrs []string, admins, producers int, group string, topics []string) (_ *clients, err error) {
	c := &clients{}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	switch mode {
	case ModeFactory:
		f, err := factory.New(factory.BootstrapServers(addrs...), factory.AutoOffsetReset(factory.ResetEarliest))
		if err != nil {
			return nil, err
		}
		c.token = func() int64 {
			t := f.Token()
			if t.IsUnknown() {
				return -1
			}
			return t.Offset()
		}
		for range admins {
			a, err := f.Admin(factory.KgoOpts(adminKgoOpts()...))
			if err != nil {
				return nil, err
			}
			c.closers = append(c.closers, func() { _ = a.Close(context.Background()) })
			c.admins = append(c.admins, a)
		}
		for range producers {
			p, err := factory.NewProducer(f, producer.String(), producer.String(), factory.KgoOpts(producerKgoOpts()...))
			if err != nil {
				return nil, err
			}
			fp := factoryProducer{p}
			c.closers = append(c.closers, fp.close)
			c.producers = append(c.producers, fp)
		}
		cons, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(topics...),
			factory.GroupID(group), factory.KgoOpts(consumerKgoOpts()...))
		if err != nil {
			return nil, err
		}
		c.closers = append(c.closers, factoryConsumer{cons}.close)
		c.consumer = factoryConsumer{cons}
	case ModePlain:
		c.token = func() int64 { return -1 }
		seeds := kgo.SeedBrokers(addrs...)
		for range admins {
			cl, err := kgo.NewClient(append([]kgo.Opt{seeds}, adminKgoOpts()...)...)
			if err != nil {
				return nil, err
			}
			c.closers = append(c.closers, cl.Close)
			c.admins = append(c.admins, kadm.NewClient(cl))
		}
		for range producers {
			cl, err := kgo.NewClient(append([]kgo.Opt{seeds}, producerKgoOpts()...)...)
			if err != nil {
				return nil, err
			}
			c.closers = append(c.closers, cl.Close)
			c.producers = append(c.producers, plainProducer{cl})
		}
		opts := append([]kgo.Opt{seeds, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...)}, consumerKgoOpts()...)
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		c.closers = append(c.closers, cl.Close)
		c.consumer = plainConsumer{cl}
	default:
		return nil, fmt.Errorf("checker: unknown mode %q", mode)
	}
	return c, nil
}

type factoryProducer struct {
	p *producer.Producer[string, string]
}

func (f factoryProducer) produce(ctx context.Context, topic, key string) (RecordRef, error) {
	r, err := f.p.Produce(ctx, producer.Record[string, string]{Topic: topic, Key: key, Value: key})
	if err != nil {
		return RecordRef{Key: key, Topic: topic}, err
	}
	return RecordRef{Key: key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, nil
}

func (f factoryProducer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = f.p.Close(ctx)
}

type plainProducer struct{ cl *kgo.Client }

func (p plainProducer) produce(ctx context.Context, topic, key string) (RecordRef, error) {
	r, err := p.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(key)}).First()
	if err != nil {
		return RecordRef{Key: key, Topic: topic}, err
	}
	return RecordRef{Key: key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}, nil
}

func (p plainProducer) close() { p.cl.Close() }

type factoryConsumer struct {
	c *consumer.Consumer[string, string]
}

func (f factoryConsumer) poll(ctx context.Context) ([]RecordRef, error) {
	recs, err := f.c.Poll(ctx, 0)
	out := make([]RecordRef, len(recs))
	for i, r := range recs {
		out[i] = RecordRef{Key: r.Key, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = nil
	}
	return out, err
}

func (f factoryConsumer) commit(ctx context.Context) error { return f.c.Commit(ctx) }
func (f factoryConsumer) close()                           { f.c.Close(context.Background()) }

type plainConsumer struct{ cl *kgo.Client }

func (p plainConsumer) poll(ctx context.Context) ([]RecordRef, error) {
	fs := p.cl.PollRecords(ctx, 0)
	if fs.IsClientClosed() {
		return nil, kgo.ErrClientClosed
	}
	var errs []error
	fs.EachError(func(t string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		errs = append(errs, fmt.Errorf("fetch %s[%d]: %w", t, part, err))
	})
	var out []RecordRef
	fs.EachRecord(func(r *kgo.Record) {
		out = append(out, RecordRef{Key: string(r.Key), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
	})
	return out, errors.Join(errs...)
}

func (p plainConsumer) commit(ctx context.Context) error { return p.cl.CommitUncommittedOffsets(ctx) }
func (p plainConsumer) close()                           { p.cl.Close() }
