package rebootstrap_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/rebootstrap"
)

// A factory takes metadata.recovery.strategy as parsed here (or as the
// "metadata.recovery.strategy" property). Pinned to a cluster, its clients
// never follow the bootstrap servers to another one: a record that could not
// be delivered because of a move fails with an error that matches
// ErrClusterChanged and names both clusters.
func Example() {
	strategy, err := rebootstrap.ParseStrategy("Rebootstrap")
	if err != nil {
		fmt.Println(err)
		return
	}
	f, err := factory.New(factory.BootstrapServers("127.0.0.1:9092"),
		factory.RecoveryStrategy(strategy),
		factory.PinCluster("prod-a"),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer f.Close(context.Background())

	// What a pinned producer's Produce returns once the bootstrap servers
	// answer for another cluster:
	err = fmt.Errorf("producer: record to orders not delivered: %w", &rebootstrap.ClusterChangedError{From: "prod-a", To: "dr-b"})

	if errors.Is(err, rebootstrap.ErrClusterChanged) {
		var changed *rebootstrap.ClusterChangedError
		errors.As(err, &changed)
		fmt.Printf("strategy %s: not delivered, the cluster moved from %s to %s\n", strategy, changed.From, changed.To)
	}
	// Output: strategy rebootstrap: not delivered, the cluster moved from prod-a to dr-b
}

// ExampleParseStrategy parses the values the Java client accepts, in any
// case; anything else is an error naming the property.
func ExampleParseStrategy() {
	for _, v := range []string{"none", "REBOOTSTRAP", "sometimes"} {
		s, err := rebootstrap.ParseStrategy(v)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s)
	}
	// Output:
	// none
	// rebootstrap
	// metadata.recovery.strategy: "sometimes" is not one of rebootstrap, none
}
