package kafkatest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// A test starts a cluster, talks to it with any Kafka client and lets
// t.Cleanup end it.
func ExampleStart() {
	_ = func(t *testing.T) {
		c := kafkatest.Start(t, kafkatest.Nodes(3), kafkatest.BrokerConfig("num.partitions", "3"))
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.BootstrapAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		if err := c.Kill(2); err != nil { // a crash
			t.Fatal(err)
		}
		if err := c.Restart(2); err != nil { // same ports, same data
			t.Fatal(err)
		}
	}
}

// A broker that advertises a forwarder's address can be swapped for another
// cluster's under a client's feet.
func ExampleNewForwarder() {
	fwd, err := kafkatest.NewForwarder("") // refuses until it has a target
	if err != nil {
		panic(err)
	}
	defer fwd.Close()
	fmt.Printf("target %q\n", fwd.Target())
	_ = kafkatest.AdvertisedAddr(1, fwd.Addr()) // for kafkatest.Start
	fwd.SetTarget("127.0.0.1:9092")             // e.g. c.ListenerAddr(1)
	fmt.Printf("target %q\n", fwd.Target())
	// Output:
	// target ""
	// target "127.0.0.1:9092"
}

// Frames passing a forwarder can be inspected, e.g. the ClusterId a client
// names in ApiVersions v5 (KIP-1242).
func ExampleForwarder_Observe() {
	fwd, err := kafkatest.NewForwarder("")
	if err != nil {
		panic(err)
	}
	defer fwd.Close()
	fwd.Observe(func(fr kafkatest.Frame) {
		if req, err := fr.ApiVersionsRequest(); err == nil && req.ClusterID != nil {
			fmt.Println("client expects cluster", *req.ClusterID, "node", req.NodeID)
		}
	})
}

// Counting where records went tells a misrouted write from a good one.
func ExampleCountRecords() {
	_ = func(t *testing.T, a, b *kafkatest.Cluster) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		inA, err := a.CountRecords(ctx, "orders")
		if err != nil {
			t.Fatal(err)
		}
		inB, err := kafkatest.CountRecords(ctx, "orders", kgo.SeedBrokers(b.BootstrapAddrs()...))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("A has %d, B has %d", inA, inB)
	}
}

// Provision alone gives a classpath, for running Kafka tools by hand.
func ExampleProvision() {
	_ = func(ctx context.Context) error {
		cp, err := kafkatest.Provision(ctx)
		if err != nil {
			return err
		}
		fmt.Println("java -cp", cp, "kafka.Kafka server.properties")
		return nil
	}
}
