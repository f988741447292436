// Command localcluster runs a local KIP-1243 Kafka cluster (see package
// integration/localcluster) until interrupted:
//
//	go run ./integration/cmd/localcluster -brokers 3 -lag 500ms
//
// It prints the bootstrap address (the gateways, comma separated) and the
// cluster id. With -dump it prints every metadata record as it is committed.
// With -native=false the brokers send no KIP-1243 header tokens and skip
// those of requests, like Apache Kafka 4.4; they still report how far they
// have applied the metadata log (ApiVersions' FinalizedFeaturesEpoch) and the
// log's high watermark (DescribeQuorum), as Kafka 4.4 does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/kconsist/kconsist/integration/localcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(2)
	}
}

// run parses args, starts the cluster, prints its address and serves until
// ctx ends.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("localcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		brokers   = fs.Int("brokers", 3, "number of brokers")
		lag       = fs.Duration("lag", 0, "how long brokers wait before applying a metadata commit")
		clusterID = fs.String("cluster-id", "", "cluster id (default: random)")
		waitMax   = fs.Duration("wait-max", localcluster.DefaultWaitMax, "how long a broker holds a request whose token it has not applied")
		errorMode = fs.Bool("error-mode", false, "answer INCONSISTENT_METADATA at once instead of waiting")
		native    = fs.Bool("native", true, "brokers implement KIP-1243 header tokens; -native=false behaves like Apache Kafka 4.4:\nno header tokens, but ApiVersions' FinalizedFeaturesEpoch (applied offset) and DescribeQuorum (high watermark) still report offsets")
		code      = fs.Int("inconsistent-code", int(localcluster.DefaultInconsistentMetadataCode), "error code of INCONSISTENT_METADATA")
		dump      = fs.Bool("dump", false, "print metadata records as they are committed")
		verbose   = fs.Bool("v", false, "log gateway events to stderr")
		topics    = fs.String("topics", "", "comma-separated topics to create at start")
		parts     = fs.Int("partitions", 3, "partitions of each -topics topic")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *code < 0 || *code > 1<<15-1 {
		return fmt.Errorf("-inconsistent-code %d: not an int16", *code)
	}
	opts := []localcluster.Opt{
		localcluster.Brokers(*brokers),
		localcluster.Lag(*lag),
		localcluster.WaitMax(*waitMax),
		localcluster.ErrorMode(*errorMode),
		localcluster.Native(*native),
		localcluster.InconsistentMetadataCode(int16(*code)),
	}
	if *clusterID != "" {
		opts = append(opts, localcluster.ClusterID(*clusterID))
	}
	if *topics != "" {
		opts = append(opts, localcluster.SeedTopics(int32(*parts), strings.Split(*topics, ",")...))
	}
	if *verbose {
		opts = append(opts, localcluster.Logger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	c, err := localcluster.New(opts...)
	if err != nil {
		return err
	}
	defer c.Close()

	fmt.Fprintf(stdout, "bootstrap: %s\n", strings.Join(c.Addrs(), ","))
	fmt.Fprintf(stdout, "cluster-id: %s\n", c.ClusterID())
	if !*dump {
		<-ctx.Done()
		return nil
	}
	err = c.Follow(ctx, 0, func(r localcluster.Record) {
		_ = localcluster.DumpRecords(stdout, []localcluster.Record{r})
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}
