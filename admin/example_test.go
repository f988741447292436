package admin_test

import (
	"context"
	"fmt"
	"time"

	"github.com/kconsist/kconsist/admin"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
)

// An admin client of a factory reads its own writes on a cluster whose
// brokers apply metadata changes 300ms late: the topic it creates is listed
// at once, with its partitions and end offsets, and the topic it deletes is
// gone at once. Plain kadm on the same cluster would answer from a lagging
// broker and miss both (see examples/readyourwrites).
func ExampleClient() {
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
	var adm *admin.Client
	adm, err = f.Admin()
	if err != nil {
		panic(err)
	}
	defer adm.Close(ctx)

	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "invoices"); err != nil {
		panic(err)
	}
	topics, err := adm.ListTopics(ctx, "invoices")
	if err != nil {
		panic(err)
	}
	fmt.Println("listed:", topics.Has("invoices"), "partitions:", len(topics["invoices"].Partitions))
	ends, err := adm.ListEndOffsets(ctx, "invoices")
	if err != nil {
		panic(err)
	}
	fmt.Println("end offsets error:", ends.Error())

	if _, err := adm.DeleteTopic(ctx, "invoices"); err != nil {
		panic(err)
	}
	all, err := adm.ListTopics(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("listed after delete:", all.Has("invoices"))
	// Output:
	// listed: true partitions: 3
	// end offsets error: <nil>
	// listed after delete: false
}
