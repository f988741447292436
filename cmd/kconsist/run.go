package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/factory"
)

// run runs the command line args (without the program name) and returns
// the exit status. Tests call it in-process.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdin, stdout, stderr)
}

func runContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil && !a.started {
		// cobra's own refusals: unknown command or flag, bad arguments.
		var u usageError
		if !errors.As(err, &u) {
			err = usageError{err}
		}
	}
	code := exitCode(err)
	// Flags are parsed before arguments are checked: -o json holds for
	// errors of either.
	a.json = a.output == "json"
	if err != nil {
		fmt.Fprintf(stderr, "kconsist: %v\n", err)
		if code == exitUsage && !a.started {
			fmt.Fprintln(stderr, "Run 'kconsist --help' for usage.")
		}
		if a.json {
			out := map[string]any{"error": err.Error(), "status": exitNames[code], "exit": code}
			var werr *factory.WaitError
			if errors.As(err, &werr) {
				out["behind"] = brokersJSON(werr.Behind)
				out["behind_token"] = brokersJSON(werr.Unapplied())
				out["topics_pending"] = brokersJSON(werr.Unserved())
				if !werr.Token.IsUnknown() {
					out["token"] = werr.Token.Encode()
				}
			}
			var rerr resultError
			if errors.As(err, &rerr) {
				for k, v := range rerr.out {
					if _, ok := out[k]; !ok {
						out[k] = v
					}
				}
			}
			a.emit(out)
		}
	}
	return code
}

// app holds the global flags and the streams of one run.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer

	bootstrap  string
	props      []string
	configFile string
	output     string
	timeout    time.Duration
	quiet      bool

	json    bool
	started bool // a command's RunE began: errors are no longer usage
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kconsist",
		Short: "Kafka topic and config changes that every broker has applied when the command returns",
		Long: `kconsist changes topics and configs of a Kafka cluster and, with --wait,
returns only once every broker has applied the change: the next process,
in any language, then finds the topic on whichever broker it asks.

It also prints the cluster's consistency token (kconsist token), waits for
a token handed over by another process (kconsist wait), and produces and
consumes records that carry a token in a header.

Connection settings use the Kafka client's property names, from a
client.properties file (--config), -X key=value, and -b.

Exit status: 0 success, 1 operation failed, 2 bad usage, 3 timeout,
4 cluster unreachable, 5 wrong cluster, 6 bad token, 7 authentication failed.`,
		Example: `  kconsist -b localhost:9092 topic create orders --partitions 6 --replication-factor 3 --wait
  kconsist --config client.properties token
  kconsist wait "$TOKEN" --timeout 30s`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch a.output {
			case "human", "":
			case "json":
				a.json = true
			default:
				return usagef("-o %q: want human or json", a.output)
			}
			if a.timeout <= 0 {
				return usagef("--timeout %v: want a positive duration", a.timeout)
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&a.bootstrap, "bootstrap-servers", "b", "", "comma-separated host:port list (bootstrap.servers)")
	pf.StringArrayVarP(&a.props, "property", "X", nil, "client property key=value, the Kafka client's names (repeatable)")
	pf.StringVar(&a.configFile, "config", "", "client.properties file (Java properties format)")
	pf.StringVarP(&a.output, "output", "o", "human", "output format: human or json")
	pf.DurationVar(&a.timeout, "timeout", 60*time.Second, "how long to wait for the cluster: each request, each --wait")
	pf.BoolVarP(&a.quiet, "quiet", "q", false, "no progress on stderr")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(a.tokenCommand(), a.waitCommand(), a.topicCommand(), a.configCommand(), a.produceCommand(), a.consumeCommand())
	return root
}

// args wraps cobra's argument checks as usage errors.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// properties returns the client properties: the --config file, then -X,
// then -b, each overriding the one before.
func (a *app) properties() (map[string]string, error) {
	props := map[string]string{}
	if a.configFile != "" {
		f, err := os.Open(a.configFile)
		if err != nil {
			return nil, usagef("--config: %w", err)
		}
		defer f.Close()
		fromFile, err := factory.ParseProperties(f)
		if err != nil {
			return nil, usagef("--config %s: %w", a.configFile, err)
		}
		maps.Copy(props, fromFile)
	}
	for _, kv := range a.props {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usagef("-X %q: want key=value", kv)
		}
		props[k] = v
	}
	if a.bootstrap != "" {
		props["bootstrap.servers"] = a.bootstrap
	}
	if strings.TrimSpace(props["bootstrap.servers"]) == "" {
		return nil, usagef("no bootstrap servers: give -b host:port, -X bootstrap.servers=... or --config with bootstrap.servers")
	}
	return props, nil
}

// connect returns a factory for the settings, once a broker has answered.
// The caller closes it.
func (a *app) connect(ctx context.Context) (*factory.Factory, error) {
	props, err := a.properties()
	if err != nil {
		return nil, err
	}
	opts, err := factory.FromProperties(props)
	if err != nil {
		return nil, usageError{err}
	}
	auth := &authWatch{}
	f, err := factory.New(append(opts, factory.WithObserver(auth))...)
	if err != nil {
		return nil, usageError{err}
	}
	if err := ping(ctx, f, auth); err != nil {
		f.Close(context.Background())
		return nil, err
	}
	return f, nil
}

// authWatch hears the factory report that the cluster refuses its
// credentials or TLS settings: franz-go itself retries such a connection
// as it would a broker that is down, until the caller's deadline.
type authWatch struct {
	mu     sync.Mutex
	err    error
	notify func()
}

func (w *authWatch) OnEvent(ev factory.Event) {
	if ev.Kind != factory.EventAuthFailed {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = ev.Err
		if w.notify != nil {
			w.notify()
		}
	}
}

func (w *authWatch) failed(notify func()) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notify = notify
	return w.err
}

// ping asks the cluster for its brokers, so that an unreachable cluster
// or refused credentials are told apart from what the command does next.
func ping(ctx context.Context, f *factory.Factory, auth *authWatch) error {
	cl, err := f.KgoClient()
	if err != nil {
		return usageError{err}
	}
	defer cl.Close()
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := auth.failed(cancel); err != nil {
		return &kconsist.AuthError{Err: err}
	}
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	if _, err := req.RequestWith(pctx, cl); err != nil {
		if aerr := auth.failed(nil); aerr != nil {
			return &kconsist.AuthError{Err: aerr}
		}
		if isAuth(err) {
			return err
		}
		return unreachableError{err}
	}
	return nil
}

// timed returns a context bounded by --timeout.
func (a *app) timed(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.timeout)
}

// begin marks the command as started: from here on errors are the
// operation's, not usage.
func (a *app) begin() { a.started = true }

// emit writes v as one line of JSON to stdout.
func (a *app) emit(v any) { _ = jsonEncoder(a.stdout).Encode(v) }

func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// say writes a line of human output to stdout (nothing with -o json).
func (a *app) say(format string, args ...any) {
	if !a.json {
		fmt.Fprintf(a.stdout, format+"\n", args...)
	}
}

// note writes a line to stderr unless --quiet.
func (a *app) note(format string, args ...any) {
	if !a.quiet {
		fmt.Fprintf(a.stderr, format+"\n", args...)
	}
}

// parseKV parses repeated k=v flags into a map.
func parseKV(flag string, kvs []string) (map[string]string, error) {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usagef("%s %q: want key=value", flag, kv)
		}
		out[strings.TrimSpace(k)] = v
	}
	return out, nil
}

// sortedKeys returns m's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
