package localcluster_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A topic created through one broker is invisible on a paused broker until
// it applies the commit: the stale read KIP-1243 tokens remove.
func ExampleNew() {
	c, err := localcluster.New(localcluster.Brokers(2), localcluster.ClusterID("example"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		panic(err)
	}
	defer cl.Close()
	_ = c.PauseApply(0)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		panic(err)
	}
	applied, _ := c.AppliedOffset(0)
	fmt.Println("log end", c.LogEnd(), "broker 0 applied", applied)
	_ = c.ResumeApply(0)
	_ = c.WaitApplied(ctx, 0, c.LogEnd())
	applied, _ = c.AppliedOffset(0)
	fmt.Println("broker 0 applied", applied)
	// Output:
	// log end 2 broker 0 applied 0
	// broker 0 applied 2
}
