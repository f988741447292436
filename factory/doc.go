// Package factory makes Kafka clients that share one consistency store: the
// Go form of KIP-1243's Factory.
//
// Every admin client, producer and consumer made by one [Factory] shares
// one token: the latest metadata offset any of them has seen. So after an
// admin call returns, the factory's producer and consumer see its effect on
// every broker, and no read goes back to an older view. Where the brokers
// implement KIP-1243 they send the token in every response and a lagging
// broker waits (or answers INCONSISTENT_METADATA, which the clients retry)
// instead of serving stale metadata. Apache Kafka 4.4 sends none, so by
// default ([ModeAuto]) the factory makes the token from KRaft's own
// offsets: the committed end of the metadata log (DescribeQuorum) after a
// write, and each broker's applied offset (ApiVersions) before a request,
// which waits until its broker has caught up. [Consistency] chooses the
// mode; [EventConsistencyOff] reports a cluster where neither works, and
// [EventConsistencyLimited] a principal without DESCRIBE on CLUSTER, which
// keeps monotonic reads and read-your-writes of its own topic writes.
//
//	f, err := factory.New(factory.BootstrapServers("localhost:9092"))
//	adm, err := f.Admin()
//	_, err = adm.CreateTopic(ctx, 3, 1, nil, "orders")
//	p, err := factory.NewProducer(f, producer.String(), producer.JSON[Order]())
//	_, err = p.Produce(ctx, producer.Record[string, Order]{Topic: "orders", Key: "k", Value: o})
//
// Configuration comes as Go options ([BootstrapServers], [RequiredAcks],
// ...) or as client properties in the Java client's or librdkafka's names
// ([FromProperties], [LoadProperties]); unknown keys and bad values are
// errors that name the key. Options are typed by the roles that take them
// (see [Opt]): one of another role given to a client does not compile.
// [Hooks] and [HooksPerClient] install franz-go hooks (kprom, kotel) per
// role; [KgoOpts] passes raw franz-go options through.
//
// As franz-go means a client to be used, the producers of a factory share
// one franz-go client (one producer id, one set of connections, one buffer)
// whatever their key and value types, unless their settings differ or one
// asks for its own with [SeparateClient]; see [NewProducer].
//
// A token handed over by another service is input, not truth: take it with
// Factory.WithToken (its clients wait for it; the factory's other clients do
// not), or Factory.Accept, both of which ask the cluster first and refuse
// a token of another cluster or beyond the committed metadata offset
// (TokenError). A store that holds such a token anyway heals itself on the
// first long wait (EventTokenHealed). Factory.WaitApplied waits until every
// broker has applied a token, for processes that share no store (cmd/kconsist).
//
// The factory also applies KIP-1242 (misrouted connections): see package
// rebootstrap for metadata.recovery.strategy and
// metadata.cluster.check.enable.
package factory
