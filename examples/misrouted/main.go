// Command misrouted shows KIP-1242 (misrouted connections) step by step:
//
//	go run ./examples/misrouted
//
// Two single-broker clusters run in-process (kfake, which like Apache Kafka
// 4.4 implements the broker side of KIP-1242). Cluster A advertises its
// broker at an address that can be switched to another target, as an IP
// address reused by another cluster's broker would be. Both clusters have a
// topic "payments". The clients bootstrap from A.
//
// The run goes through four steps: produce to A; switch the address to
// cluster B; produce and read again; switch it back. First with
// metadata.cluster.check.enable=true (the default): B refuses the misrouted
// connection with REBOOTSTRAP_REQUIRED, the client rebootstraps (shown by the
// factory's events), nothing is read from or written to B, and the records
// reach A once the address is right. Then the first three steps again with
// factory.ClusterCheck(false): nobody notices, a read is served by B, and
// only produce's topic ids keep the records out of B.
//
// It exits non-zero if either run does not behave as described.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
	"github.com/kconsist/kconsist/producer"
)

const topic = "payments"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "misrouted:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("misrouted", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the usage is all that was asked for
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for _, check := range []bool{true, false} {
		if err := scenario(ctx, stdout, check); err != nil {
			return fmt.Errorf("metadata.cluster.check.enable=%v: %w", check, err)
		}
	}
	return nil
}

// clusters is cluster A behind a switchable address and cluster B.
type clusters struct {
	fw           *kafkatest.Forwarder
	a, b         *kfake.Cluster
	realA, realB string
}

func (c *clusters) close() {
	c.a.Close()
	c.b.Close()
	_ = c.fw.Close()
}

// advertised makes kfake advertise another address than it listens on.
type advertised struct {
	net.Listener
	addr net.Addr
}

func (l advertised) Addr() net.Addr { return l.addr }

func startClusters() (*clusters, error) {
	fw, err := kafkatest.NewForwarder("")
	if err != nil {
		return nil, err
	}
	adv, err := net.ResolveTCPAddr("tcp", fw.Addr())
	if err != nil {
		fw.Close()
		return nil, err
	}
	c := &clusters{fw: fw}
	c.a, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("cluster-a"), kfake.SeedTopics(1, topic),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			c.realA = ln.Addr().String()
			return advertised{ln, adv}, nil
		}))
	if err != nil {
		fw.Close()
		return nil, err
	}
	c.b, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("cluster-b"), kfake.SeedTopics(1, topic))
	if err != nil {
		c.a.Close()
		fw.Close()
		return nil, err
	}
	c.realB = c.b.ListenAddrs()[0]
	fw.SetTarget(c.realA)
	return c, nil
}

// eventLog keeps the factory's events for printing between steps.
type eventLog struct {
	mu     sync.Mutex
	events []factory.Event
	shown  int
}

func (l *eventLog) OnEvent(ev factory.Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

// flush prints the events since the last flush, the first few in full,
// and returns how many of them say a misroute was noticed (a misroute, a
// rebootstrap, a cluster change, a store reset). Events reach the observer
// on the factory's event goroutine, so one of an earlier step (the
// emulation turned off on kfake, say) may come in a later flush: only
// these kinds count.
func (l *eventLog) flush(out io.Writer) int {
	l.mu.Lock()
	evs := l.events[l.shown:]
	l.shown = len(l.events)
	l.mu.Unlock()
	for i, ev := range evs {
		if i == 2 {
			fmt.Fprintf(out, "      ... and %d more events of the same kinds\n", len(evs)-2)
			break
		}
		fmt.Fprintf(out, "      event %s: %s\n", ev.Kind, describe(ev))
	}
	noticed := 0
	for _, ev := range evs {
		switch ev.Kind {
		case factory.EventMisroute, factory.EventRebootstrap, factory.EventClusterChanged, factory.EventStoreReset:
			noticed++
		}
	}
	return noticed
}

func describe(ev factory.Event) string {
	switch ev.Kind {
	case factory.EventRebootstrap:
		return fmt.Sprintf("a broker answered REBOOTSTRAP_REQUIRED; the client rediscovered the cluster from bootstrap.servers (before %s, after %s)", ev.From, ev.To)
	case factory.EventClusterChanged, factory.EventStoreReset:
		return fmt.Sprintf("from %s to %s", ev.From, ev.To)
	case factory.EventMisroute:
		return fmt.Sprintf("%s answered for %s, expected %s", ev.Addr, ev.To, ev.From)
	}
	return ev.Token.String()
}

func count(ctx context.Context, addr string) (int64, error) {
	return kafkatest.CountRecords(ctx, topic, kgo.SeedBrokers(addr))
}

func scenario(ctx context.Context, out io.Writer, check bool) error {
	c, err := startClusters()
	if err != nil {
		return err
	}
	defer c.close()
	if check {
		fmt.Fprintln(out, "== metadata.cluster.check.enable=true (the default): KIP-1242 on")
	} else {
		fmt.Fprintln(out, "== metadata.cluster.check.enable=false: factory.ClusterCheck(false)")
	}
	fmt.Fprintf(out, "   cluster-a listens on %s and advertises its broker at %s; cluster-b is at %s.\n", c.realA, c.fw.Addr(), c.realB)
	fmt.Fprintf(out, "   Both have a topic %q. The clients bootstrap from cluster-a (%s).\n", topic, c.realA)

	events := &eventLog{}
	f, err := factory.New(factory.BootstrapServers(c.realA), factory.ClusterCheck(check),
		factory.RetryBackoff(50*time.Millisecond), factory.WithObserver(events))
	if err != nil {
		return err
	}
	p, err := factory.NewProducer(f, producer.String(), producer.String())
	if err != nil {
		return err
	}
	defer p.Close(context.Background())
	adm, err := f.Admin()
	if err != nil {
		return err
	}
	defer adm.Close(context.Background())

	for i := range 5 {
		if _, err := p.Produce(ctx, producer.Record[string, string]{Topic: topic, Value: fmt.Sprint("before-", i)}); err != nil {
			return fmt.Errorf("step 1: %w", err)
		}
	}
	nA, err := count(ctx, c.realA)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "1. produce 5 records: ok, cluster-a holds %d\n", nA)
	events.flush(out)

	c.fw.SetTarget(c.realB)
	fmt.Fprintf(out, "2. %s now reaches cluster-b (open connections are cut, as when an IP address moves)\n", c.fw.Addr())

	fmt.Fprintln(out, "3. produce 5 more records and read the end offset of the topic through the admin client")
	done := make(chan error, 5)
	for i := range 5 {
		if err := p.ProduceAsync(ctx, producer.Record[string, string]{Topic: topic, Value: fmt.Sprint("after-", i)},
			func(_ producer.Result, err error) { done <- err }); err != nil {
			return err
		}
	}
	readCtx, cancel := context.WithTimeout(ctx, time.Second)
	offs, readErr := adm.ListEndOffsets(readCtx, topic)
	cancel()
	var readOffset int64 = -1
	if readErr == nil {
		o, _ := offs.Lookup(topic, 0)
		readErr, readOffset = o.Err, o.Offset
	}

	if !check {
		if readErr != nil {
			return fmt.Errorf("step 3: the read should have been served by cluster-b: %w", readErr)
		}
		fmt.Fprintf(out, "   read: end offset %d — served by cluster-b (cluster-a holds %d): a wrong answer, silently\n", readOffset, nA)
		failed := 0
		for range 5 {
			if err := <-done; errors.Is(err, kerr.UnknownTopicID) {
				failed++
			} else {
				return fmt.Errorf("step 3: a record should fail with UNKNOWN_TOPIC_ID, got %v", err)
			}
		}
		fmt.Fprintf(out, "   produce: %d records failed with UNKNOWN_TOPIC_ID: only produce's topic ids kept them out of cluster-b\n", failed)
		n := events.flush(out)
		st := f.Stats()
		fmt.Fprintf(out, "   misroute events: %d, rebootstraps: %d: nothing noticed the misroute\n", n, st.Rebootstraps)
		if readOffset != 0 || st.Rebootstraps != 0 || n != 0 {
			return fmt.Errorf("the misroute was noticed (read %d, %d rebootstraps, %d events)", readOffset, st.Rebootstraps, n)
		}
		fmt.Fprintln(out)
		return nil
	}

	if readErr == nil {
		return fmt.Errorf("step 3: a read was answered during the misroute (end offset %d)", readOffset)
	}
	fmt.Fprintln(out, "   read: an error, never an answer from cluster-b:")
	fmt.Fprintf(out, "      %v\n", readErr)
	if err := waitFor(ctx, func() bool { return f.Stats().Rebootstraps > 0 }); err != nil {
		return fmt.Errorf("step 3: no rebootstrap: %w", err)
	}
	events.flush(out)
	nB, err := count(ctx, c.realB)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "   cluster-b holds %d records: nothing was written to the wrong cluster; the 5 records wait\n", nB)

	c.fw.SetTarget(c.realA)
	fmt.Fprintf(out, "4. %s reaches cluster-a again\n", c.fw.Addr())
	for range 5 {
		if err := <-done; err != nil {
			return fmt.Errorf("step 4: %w", err)
		}
	}
	offs, err = adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return err
	}
	o, _ := offs.Lookup(topic, 0)
	if o.Err != nil {
		return o.Err
	}
	if nA, err = count(ctx, c.realA); err != nil {
		return err
	}
	if nB, err = count(ctx, c.realB); err != nil {
		return err
	}
	fmt.Fprintf(out, "   the 5 records are delivered: cluster-a holds %d, cluster-b %d; the admin read says end offset %d\n", nA, nB, o.Offset)
	events.flush(out)
	fmt.Fprintf(out, "   rebootstraps in all: %d\n\n", f.Stats().Rebootstraps)
	if nA != 10 || nB != 0 || o.Offset != 10 {
		return fmt.Errorf("records went astray: cluster-a %d, cluster-b %d, end offset %d", nA, nB, o.Offset)
	}
	return nil
}

func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}
