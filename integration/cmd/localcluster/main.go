// Command localcluster runs a local KIP-1243 Kafka cluster (see package
// integration/localcluster) until interrupted, for clients in any language:
//
//	go run ./integration/cmd/localcluster -brokers 3 -lag 500ms
//
// It prints the bootstrap address (the gateways, comma separated) and the
// cluster id. With -dump it prints every metadata record as it is committed.
// With -native=false the brokers send no KIP-1243 header tokens and skip
// those of requests, like Apache Kafka 4.4; they still report how far they
// have applied the metadata log (ApiVersions' FinalizedFeaturesEpoch) and the
// log's high watermark (DescribeQuorum), as Kafka 4.4 does.
//
// With -second it also runs cluster B, so a user can reproduce a misrouted
// connection (KIP-1242) without writing Go: the line "switch" on stdin, or
// SIGUSR1, hands the address of cluster A's node -switch-node to B's node of
// the same id, and the next one hands it back ("switch NODE" picks another
// node). A client of A that checks (ApiVersions v5 with A's cluster id, as
// kgo and the Java client 4.4 send) is answered REBOOTSTRAP_REQUIRED by B.
// Run with -help for every flag.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/kconsist/kconsist/integration/localcluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switches := make(chan os.Signal, 1)
	signal.Notify(switches, syscall.SIGUSR1)
	if err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, switches); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(2)
	}
}

const usageIntro = `Usage: localcluster [flags]

Runs a local Kafka cluster (kfake brokers behind KIP-1243 gateways) until
interrupted, and prints its bootstrap address and cluster id:

  bootstrap: 127.0.0.1:PORT,...
  cluster-id: ID

Any Kafka client can use the address. With -second a second cluster B runs
too (bootstrap-b:, cluster-id-b:); the line "switch" on stdin, or SIGUSR1,
hands the address of cluster A's node -switch-node to B's node of the same
id (a misrouted connection, KIP-1242), and the next "switch" hands it back.
"switch NODE" does the same for another node. Each switch prints a
"switched:" line; a switch back says how often B answered
REBOOTSTRAP_REQUIRED meanwhile (-v logs each answer).

Flags:
`

// run parses args, starts the cluster (or clusters), prints the addresses
// and serves until ctx ends. A "switch" line on stdin or a value on switches
// toggles the misroute of -second.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, switches <-chan os.Signal) error {
	fs := flag.NewFlagSet("localcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageIntro)
		fs.PrintDefaults()
	}
	var (
		brokers    = fs.Int("brokers", 3, "number of brokers, 1 to 64; node ids are 0..n-1")
		lag        = fs.Duration("lag", 0, "how long each broker waits before applying a metadata commit; until then it serves\nstale metadata, as a lagging Kafka broker does (e.g. 500ms)")
		clusterID  = fs.String("cluster-id", "", "cluster id of cluster A (default: random); cluster B gets this id with \"-b\" appended")
		waitMax    = fs.Duration("wait-max", localcluster.DefaultWaitMax, "how long a broker holds a request whose KIP-1243 token it has not applied,\nbefore answering INCONSISTENT_METADATA")
		errorMode  = fs.Bool("error-mode", false, "answer INCONSISTENT_METADATA at once instead of holding the request")
		native     = fs.Bool("native", true, "brokers implement KIP-1243 header tokens; -native=false behaves like Apache Kafka 4.4:\nno header tokens, but ApiVersions' FinalizedFeaturesEpoch (applied offset) and DescribeQuorum (high watermark) still report offsets")
		code       = fs.Int("inconsistent-code", int(localcluster.DefaultInconsistentMetadataCode), "error code of INCONSISTENT_METADATA (KIP-1243 has none upstream yet)")
		dump       = fs.Bool("dump", false, "print cluster A's metadata records as they are committed")
		verbose    = fs.Bool("v", false, "log gateway events (closed connections, refused requests) to stderr")
		topics     = fs.String("topics", "", "comma-separated topics to create at start, in every cluster")
		parts      = fs.Int("partitions", 3, "partitions of each -topics topic")
		second     = fs.Bool("second", false, "also run cluster B, with the same flags, for -switch-node and \"switch\"")
		switchNode = fs.Int("switch-node", 0, "with -second: the node of cluster A whose address \"switch\" (stdin) or SIGUSR1\nhands to cluster B's node of the same id, and back")
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
	if *brokers >= 1 && (*switchNode < 0 || *switchNode >= *brokers) { // a bad -brokers is New's to report
		return fmt.Errorf("-switch-node %d: want a node of 0..%d", *switchNode, *brokers-1)
	}
	opts := []localcluster.Opt{
		localcluster.Brokers(*brokers),
		localcluster.Lag(*lag),
		localcluster.WaitMax(*waitMax),
		localcluster.ErrorMode(*errorMode),
		localcluster.Native(*native),
		localcluster.InconsistentMetadataCode(int16(*code)),
	}
	if *topics != "" {
		opts = append(opts, localcluster.SeedTopics(int32(*parts), strings.Split(*topics, ",")...))
	}
	if *verbose {
		opts = append(opts, localcluster.Logger(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	}
	a, err := localcluster.New(withID(opts, *clusterID, "")...)
	if err != nil {
		return err
	}
	defer a.Close()
	fmt.Fprintf(stdout, "bootstrap: %s\n", strings.Join(a.Addrs(), ","))
	fmt.Fprintf(stdout, "cluster-id: %s\n", a.ClusterID())
	if *second {
		b, err := localcluster.New(withID(opts, *clusterID, "-b")...)
		if err != nil {
			return fmt.Errorf("cluster B: %w", err)
		}
		defer b.Close()
		fmt.Fprintf(stdout, "bootstrap-b: %s\n", strings.Join(b.Addrs(), ","))
		fmt.Fprintf(stdout, "cluster-id-b: %s\n", b.ClusterID())
		sw := &switcher{a: a, b: b, node: int32(*switchNode), out: stdout, switched: map[int32]int64{}}
		swCtx, cancel := context.WithCancel(ctx)
		served := make(chan struct{})
		go func() { defer close(served); sw.serve(swCtx, stdin, switches) }()
		// No switch may run into the clusters' Close.
		defer func() { cancel(); <-served }()
	}
	if !*dump {
		<-ctx.Done()
		return nil
	}
	err = a.Follow(ctx, 0, func(r localcluster.Record) {
		_ = localcluster.DumpRecords(stdout, []localcluster.Record{r})
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// withID adds the cluster id option, when one is given.
func withID(opts []localcluster.Opt, id, suffix string) []localcluster.Opt {
	if id == "" {
		return opts
	}
	return append(opts[:len(opts):len(opts)], localcluster.ClusterID(id+suffix))
}

// switcher moves node addresses of cluster A to cluster B and back.
type switcher struct {
	a, b *localcluster.Cluster
	node int32 // the node of "switch" without a number, and of signals
	out  io.Writer

	mu       sync.Mutex
	switched map[int32]int64 // switched nodes: B's REBOOTSTRAP_REQUIRED count then
}

// serve toggles on each "switch [NODE]" line and each signal until ctx
// ends. Other lines are answered with a hint; a closed stdin leaves signals
// working.
func (s *switcher) serve(ctx context.Context, stdin io.Reader, signals <-chan os.Signal) {
	lines := make(chan string)
	if stdin != nil {
		go func() {
			sc := bufio.NewScanner(stdin)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-signals:
			s.toggle(s.node)
		case l := <-lines:
			f := strings.Fields(l)
			switch {
			case len(f) == 0:
			case f[0] == "switch" && len(f) == 1:
				s.toggle(s.node)
			case f[0] == "switch" && len(f) == 2:
				n, err := strconv.ParseInt(f[1], 10, 32)
				if err != nil {
					fmt.Fprintf(s.out, "switch %q: not a node id\n", f[1])
					continue
				}
				s.toggle(int32(n))
			default:
				fmt.Fprintf(s.out, "unknown command %q: the only command is \"switch [NODE]\"\n", l)
			}
		}
	}
}

func (s *switcher) toggle(node int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if node < 0 || int(node) >= len(s.a.Addrs()) {
		fmt.Fprintf(s.out, "switch %d: no such node (have 0..%d)\n", node, len(s.a.Addrs())-1)
		return
	}
	addr := s.a.Addrs()[node]
	before, switched := s.switched[node]
	if !switched {
		if err := s.a.Repoint(node, s.b, node); err != nil {
			fmt.Fprintf(s.out, "switch %d failed: %v\n", node, err)
			return
		}
		s.switched[node] = s.b.Stats().RebootstrapRequired
		fmt.Fprintf(s.out, "switched: %s (cluster %s node %d) now serves cluster %s node %d\n", addr, s.a.ClusterID(), node, s.b.ClusterID(), node)
		return
	}
	if err := s.a.Repoint(node, s.a, node); err != nil {
		fmt.Fprintf(s.out, "switch %d failed: %v\n", node, err)
		return
	}
	delete(s.switched, node)
	// The count is B's, so with several nodes switched it is shared.
	fmt.Fprintf(s.out, "switched: %s serves cluster %s node %d again; REBOOTSTRAP_REQUIRED answered %d times meanwhile\n",
		addr, s.a.ClusterID(), node, s.b.Stats().RebootstrapRequired-before)
}
