package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
)

// maxLine bounds a line read from stdin.
const maxLine = 16 << 20

func (a *app) produceCommand() *cobra.Command {
	var (
		keySep      string
		tokenHeader string
		tokenArg    string
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of stdin",
		Long: `Produce one record per line of stdin to TOPIC, and wait until every
record is acknowledged.

With --token-header NAME, every record carries a consistency token in
the record header NAME: --token if given (checked against the cluster),
else the cluster's committed token when the command starts. A consumer
that waits for it (kconsist consume --wait-token-header NAME, or the SDK's
WaitApplied) then sees, on every broker, every change made before the
record was produced.`,
		Example: `  echo '{"id":1}' | kconsist -b localhost:9092 produce orders
  printf 'k1:v1\nk2:v2\n' | kconsist -b localhost:9092 produce orders --key-separator :
  kconsist -b localhost:9092 produce events --token-header kconsist-token < events.txt`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			var tok consistency.Token
			if tokenArg != "" {
				if tokenHeader == "" {
					return usagef("produce: --token needs --token-header")
				}
				var err error
				if tok, err = parseToken(tokenArg); err != nil {
					return err
				}
			}
			a.begin()
			ctx := cmd.Context()
			cctx, cancel := a.timed(ctx)
			defer cancel()
			f, err := a.connect(cctx)
			if err != nil {
				return err
			}
			defer f.Close(context.Background())
			var header []byte
			if tokenHeader != "" {
				if tok.IsUnknown() {
					if tok, err = f.CommittedToken(cctx); err != nil {
						return err
					}
				} else if err := f.CheckToken(cctx, tok); err != nil {
					return err
				}
				header = []byte(tok.Encode())
			}
			cl, err := f.KgoClient()
			if err != nil {
				return err
			}
			defer cl.Close()
			sc := bufio.NewScanner(a.stdin)
			sc.Buffer(make([]byte, 64<<10), maxLine)
			var (
				sent    int
				results = make(chan error, 1024)
				errs    []error
				acked   int
			)
			collect := func(block bool) {
				for {
					if block {
						errs = appendErr(errs, <-results)
						acked++
						return
					}
					select {
					case err := <-results:
						errs = appendErr(errs, err)
						acked++
					default:
						return
					}
				}
			}
			for sc.Scan() {
				line := sc.Text()
				r := &kgo.Record{Topic: topic, Value: []byte(line)}
				if keySep != "" {
					if k, v, ok := strings.Cut(line, keySep); ok {
						r.Key, r.Value = []byte(k), []byte(v)
					}
				}
				if header != nil {
					r.Headers = []kgo.RecordHeader{{Key: tokenHeader, Value: header}}
				}
				for sent-acked >= cap(results) {
					collect(true)
				}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) { results <- err })
				sent++
				collect(false)
			}
			if err := sc.Err(); err != nil {
				errs = append(errs, fmt.Errorf("reading stdin: %w", err))
			}
			for acked < sent {
				collect(true)
			}
			if err := errors.Join(errs...); err != nil {
				return fmt.Errorf("producing to %s: %d of %d records failed: %w", topic, len(errs), sent, err)
			}
			if a.json {
				out := map[string]any{"topic": topic, "records": sent}
				if header != nil {
					out["token"] = tok.Encode()
				}
				a.emit(out)
				return nil
			}
			a.note("produced %d records to %s", sent, topic)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&keySep, "key-separator", "K", "", "split each line at the first SEP into key and value")
	fl.StringVar(&tokenHeader, "token-header", "", "put a consistency token in this record header")
	fl.StringVar(&tokenArg, "token", "", "the token to put in --token-header (default: the cluster's committed token)")
	return cmd
}

// appendErr keeps the first few distinct record errors.
func appendErr(errs []error, err error) []error {
	if err == nil || len(errs) >= 5 {
		return errs
	}
	return append(errs, err)
}

func (a *app) consumeCommand() *cobra.Command {
	var (
		count       int
		group       string
		fromEnd     bool
		waitHeader  string
		keySep      string
		printHeader bool
	)
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print the records of a topic",
		Long: `Print the records of TOPIC, one per line (value, or key SEP value with
--key-separator), from the beginning unless --from-end, until -n records
or until interrupted.

With --wait-token-header NAME, a record that carries a consistency token in
the header NAME is printed only once every broker has applied that token
(each token is waited for once; later records with an older token are
not held). A malformed token or one of another cluster stops the command
with exit status 6 or 5.`,
		Example: `  kconsist -b localhost:9092 consume orders -n 10
  kconsist -b localhost:9092 consume events --wait-token-header kconsist-token -o json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			if count < 0 {
				return usagef("consume: -n %d: want 0 (no limit) or more", count)
			}
			a.begin()
			ctx := cmd.Context()
			cctx, cancel := a.timed(ctx)
			f, err := a.connect(cctx)
			cancel()
			if err != nil {
				return err
			}
			defer f.Close(context.Background())
			opts := []factory.KgoClientOpt{factory.ConsumeTopics(topic)}
			if !fromEnd {
				opts = append(opts, factory.AutoOffsetReset(factory.ResetEarliest))
			}
			if group != "" {
				opts = append(opts, factory.GroupID(group))
			}
			cl, err := f.KgoClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			var waited consistency.Token
			printed := 0
			out := bufio.NewWriter(a.stdout)
			defer out.Flush()
			for count == 0 || printed < count {
				fetches := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return nil // interrupted
				}
				var ferr error
				fetches.EachError(func(t string, p int32, err error) {
					if ferr == nil {
						ferr = fmt.Errorf("consuming %s/%d: %w", t, p, err)
					}
				})
				if ferr != nil {
					return ferr
				}
				for _, r := range fetches.Records() {
					if count > 0 && printed >= count {
						break
					}
					tok, err := a.recordToken(ctx, f, r, waitHeader, &waited, out)
					if err != nil {
						return err
					}
					a.printRecord(out, r, keySep, printHeader, tok)
					printed++
				}
				if err := out.Flush(); err != nil {
					return err
				}
			}
			if group != "" {
				cctx, cancel := a.timed(context.WithoutCancel(ctx))
				defer cancel()
				if err := cl.CommitUncommittedOffsets(cctx); err != nil {
					return fmt.Errorf("committing offsets of group %s: %w", group, err)
				}
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&count, "count", "n", 0, "stop after this many records (0: no limit)")
	fl.StringVarP(&group, "group", "g", "", "consume in this consumer group (group.id) and commit what was printed")
	fl.BoolVar(&fromEnd, "from-end", false, "start after the last record instead of at the first")
	fl.StringVar(&waitHeader, "wait-token-header", "", "before printing a record with a token in this header, wait until every broker has applied it")
	fl.StringVarP(&keySep, "key-separator", "K", "", "print key SEP value")
	fl.BoolVar(&printHeader, "headers", false, "print headers too (human output: after the value, tab-separated)")
	return cmd
}

// recordToken returns the token of r's header, once every broker has
// applied it; Unknown when there is no such header.
func (a *app) recordToken(ctx context.Context, f *factory.Factory, r *kgo.Record, header string, waited *consistency.Token, out *bufio.Writer) (consistency.Token, error) {
	if header == "" {
		return consistency.Token{}, nil
	}
	var raw []byte
	found := false
	for _, h := range r.Headers {
		if h.Key == header {
			raw, found = h.Value, true
		}
	}
	if !found {
		return consistency.Token{}, nil
	}
	tok, err := parseToken(string(raw))
	if err != nil {
		return consistency.Token{}, fmt.Errorf("record %s/%d@%d, header %s: %w", r.Topic, r.Partition, r.Offset, header, err)
	}
	if !waited.IsUnknown() && waited.ClusterID() == tok.ClusterID() && tok.Offset() <= waited.Offset() {
		return tok, nil
	}
	// Print what is ready before a wait.
	if err := out.Flush(); err != nil {
		return tok, err
	}
	wctx, cancel := a.timed(ctx)
	defer cancel()
	if _, err := a.wait(wctx, f, tok, nil); err != nil {
		return tok, fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	*waited = tok
	return tok, nil
}

func (a *app) printRecord(out *bufio.Writer, r *kgo.Record, keySep string, headers bool, tok consistency.Token) {
	if a.json {
		rec := map[string]any{"topic": r.Topic, "partition": r.Partition, "offset": r.Offset, "value": string(r.Value)}
		if r.Key != nil {
			rec["key"] = string(r.Key)
		}
		if len(r.Headers) > 0 {
			hs := make(map[string]string, len(r.Headers))
			for _, h := range r.Headers {
				hs[h.Key] = string(h.Value)
			}
			rec["headers"] = hs
		}
		if !tok.IsUnknown() {
			rec["token_applied"] = tok.Encode()
		}
		enc := jsonEncoder(out)
		_ = enc.Encode(rec)
		return
	}
	if keySep != "" {
		out.Write(r.Key)
		out.WriteString(keySep)
	}
	out.Write(r.Value)
	if headers {
		for _, h := range r.Headers {
			fmt.Fprintf(out, "\t%s=%s", h.Key, h.Value)
		}
	}
	out.WriteByte('\n')
}
