package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

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
		input       string
	)
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce one record per line of stdin",
		Long: `Produce one record per line of stdin to TOPIC, and wait until every
record is acknowledged.

With --input-format json, each line is a record in the JSON form that
consume -o json prints: key, value and headers each with an encoding
(utf8 or base64; absent means utf8), headers a list kept in order with
repeated keys, and partition and timestamp (milliseconds) used when given.
Its topic, offset and token_applied are ignored, so consume -o json |
produce --input-format json copies records byte for byte. A line that is
not such a record stops the command (exit 2) once the records before it
are acknowledged; blank lines are skipped.

With --token-header NAME, every record carries a consistency token in
the record header NAME (after the record's own headers): --token if
given (checked against the cluster), else the cluster's committed token
when the command starts. A consumer that waits for it (kconsist consume
--wait-token-header NAME, or the SDK's WaitApplied) then sees, on every
broker, every change made before the record was produced.`,
		Example: `  echo '{"id":1}' | kconsist -b localhost:9092 produce orders
  printf 'k1:v1\nk2:v2\n' | kconsist -b localhost:9092 produce orders --key-separator :
  kconsist -b localhost:9092 consume orders -o json -n 100 | kconsist -b localhost:9092 produce orders-copy --input-format json
  kconsist -b localhost:9092 produce events --token-header kconsist-token < events.txt`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic := args[0]
			var tok consistency.Token
			switch input {
			case "lines":
			case "json":
				if keySep != "" {
					return usagef("produce: --key-separator is for --input-format lines; JSON records carry their key")
				}
			default:
				return usagef("produce: --input-format %q: want lines or json", input)
			}
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
			var (
				opts     []factory.KgoClientOpt
				delivery time.Duration
			)
			if input == "json" {
				// franz-go times a record out from its timestamp: one given
				// in the input (a day old, say) is timed from its produce
				// instead, as the Java client does.
				if delivery, err = a.deliveryTimeout(); err != nil {
					return err
				}
				opts = append(opts, factory.KgoOpts(kgo.RecordPartitioner(newGivenPartitioner()), kgo.RecordDeliveryTimeout(0)))
			}
			cl, err := f.KgoClient(opts...)
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
				lineNo  int
				bad     error
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
				lineNo++
				line := sc.Bytes()
				var r *kgo.Record
				if input == "json" {
					if len(bytes.TrimSpace(line)) == 0 {
						continue
					}
					if r, err = parseRecordJSON(ctx, line, topic); err != nil {
						bad = usagef("produce: stdin line %d: %w", lineNo, err)
						break
					}
				} else {
					r = &kgo.Record{Topic: topic, Value: bytes.Clone(line)}
					if keySep != "" {
						if k, v, ok := bytes.Cut(r.Value, []byte(keySep)); ok {
							r.Key, r.Value = k, v
						}
					}
				}
				if header != nil {
					r.Headers = append(r.Headers, kgo.RecordHeader{Key: tokenHeader, Value: header})
				}
				for sent-acked >= cap(results) {
					collect(true)
				}
				done := func() {}
				if delivery > 0 {
					if r.Context == nil {
						r.Context = ctx
					}
					r.Context, done = context.WithTimeout(r.Context, delivery)
				}
				cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
					done()
					results <- err
				})
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
			if bad != nil {
				return fmt.Errorf("%w (the %d records before it were produced)", bad, sent)
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
	fl.StringVar(&input, "input-format", "lines", "stdin format: lines (one value per line) or json (consume -o json's records)")
	return cmd
}

// deliveryTimeout is how long a record may take to be acknowledged:
// delivery.timeout.ms, or the factory's default.
func (a *app) deliveryTimeout() (time.Duration, error) {
	props, err := a.properties()
	if err != nil {
		return 0, err
	}
	v, ok := props["delivery.timeout.ms"]
	if !ok {
		return factory.DefaultDeliveryTimeout, nil
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || ms <= 0 {
		return 0, usagef("delivery.timeout.ms %q: want a positive number of milliseconds", v)
	}
	return time.Duration(ms) * time.Millisecond, nil
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
--key-separator), from the beginning unless --from-end, until -n records,
until interrupted, or until stdout is closed (as by | head; exit 0).

With -o json each record is one JSON object: topic, partition, offset,
timestamp (milliseconds), key and value each with key_encoding and
value_encoding (utf8 when the bytes are valid UTF-8, else base64; a null
key or value is null), and headers as a list of {key, key_encoding,
value, value_encoding} in the record's order, repeated keys kept. produce
--input-format json reads it back byte for byte.

With --group, the group's committed offsets never pass a record that was
not written to stdout: offsets are committed (never automatically) for
the records written, when the command stops in any of these ways, and
when the group takes partitions away. A record fetched but not written
is read again by the group's next consumer.

With --wait-token-header NAME, a record that carries a consistency token in
the header NAME is printed only once every broker has applied that token
(each token is waited for once; later records with an older token are
not held). A malformed token or one of another cluster stops the command
with exit status 6 or 5.`,
		Example: `  kconsist -b localhost:9092 consume orders -n 10
  kconsist -b localhost:9092 consume orders --group billing -n 1 -o json
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
			p := &printer{w: a.stdout, written: map[string]map[int32]kgo.EpochOffset{}, committed: map[string]map[int32]int64{}}
			opts := []factory.KgoClientOpt{factory.ConsumeTopics(topic)}
			if !fromEnd {
				opts = append(opts, factory.AutoOffsetReset(factory.ResetEarliest))
			}
			if group != "" {
				opts = append(opts, factory.GroupID(group), factory.KgoOpts(
					kgo.DisableAutoCommit(),
					// Partitions are taken away only between two polls,
					// once what was written of them is committed.
					kgo.BlockRebalanceOnPoll(),
					kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
						p.commit(ctx, cl, revoked)
					}),
					kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
						p.forget(lost)
					}),
				))
			}
			cl, err := f.KgoClient(opts...)
			if err != nil {
				return err
			}
			defer cl.Close()
			err = a.consume(ctx, f, cl, p, count, consumeFormat{keySep, printHeader, waitHeader})
			if errors.Is(err, syscall.EPIPE) {
				err = nil // the reader of stdout is gone: a normal end
			}
			if group != "" {
				cctx, cancel := a.timed(context.WithoutCancel(ctx))
				defer cancel()
				p.commit(cctx, cl, nil)
				if cerr := p.commitErr(); cerr != nil {
					err = errors.Join(err, fmt.Errorf("committing offsets of group %s: %w", group, cerr))
				}
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.IntVarP(&count, "count", "n", 0, "stop after this many records (0: no limit)")
	fl.StringVarP(&group, "group", "g", "", "consume in this consumer group (group.id) and commit only what was written to stdout")
	fl.BoolVar(&fromEnd, "from-end", false, "start after the last record instead of at the first")
	fl.StringVar(&waitHeader, "wait-token-header", "", "before printing a record with a token in this header, wait until every broker has applied it")
	fl.StringVarP(&keySep, "key-separator", "K", "", "print key SEP value")
	fl.BoolVar(&printHeader, "headers", false, "print headers too (human output: after the value, tab-separated)")
	return cmd
}

// consumeFormat is how consume prints.
type consumeFormat struct {
	keySep     string
	headers    bool
	waitHeader string
}

// consume prints records of cl until count (0: no limit), ctx's end
// (nil: an interrupt is a normal end) or an error, such as stdout's.
func (a *app) consume(ctx context.Context, f *factory.Factory, cl *kgo.Client, p *printer, count int, format consumeFormat) error {
	var waited consistency.Token
	printed := 0
	for count == 0 || printed < count {
		fetches := cl.PollFetches(ctx)
		err := func() error {
			defer cl.AllowRebalance()
			if ctx.Err() != nil {
				return nil
			}
			var ferr error
			fetches.EachError(func(t string, part int32, err error) {
				if ferr == nil {
					ferr = fmt.Errorf("consuming %s/%d: %w", t, part, err)
				}
			})
			if ferr != nil {
				return ferr
			}
			for _, r := range fetches.Records() {
				if count > 0 && printed >= count {
					break
				}
				tok, err := a.recordToken(ctx, f, r, format.waitHeader, &waited, p)
				if err != nil {
					if ctx.Err() != nil {
						return nil // interrupted while waiting
					}
					return err
				}
				if err := p.add(r, a.formatRecord(r, format, tok)); err != nil {
					return err
				}
				printed++
			}
			return p.flush()
		}()
		if err != nil || ctx.Err() != nil {
			return err
		}
	}
	return nil
}

// printer writes records to stdout and remembers, per partition, the
// offset after the last record written whole: what a group may commit.
type printer struct {
	w       io.Writer
	buf     []byte
	pending []pendingRecord // records in buf, in order

	mu        sync.Mutex
	written   map[string]map[int32]kgo.EpochOffset // next offset to read, after what was written
	committed map[string]map[int32]int64
	err       error // the first failed commit
}

type pendingRecord struct {
	r   *kgo.Record
	end int // in buf, after the record's newline
}

// add buffers one record's line, writing the buffer out when it is large.
func (p *printer) add(r *kgo.Record, line []byte) error {
	p.buf = append(p.buf, line...)
	p.pending = append(p.pending, pendingRecord{r, len(p.buf)})
	if len(p.buf) >= 64<<10 {
		return p.flush()
	}
	return nil
}

// flush writes the buffer; each record whose line was written whole
// counts as written, even when the write failed after it.
func (p *printer) flush() error {
	if len(p.buf) == 0 {
		return nil
	}
	n, err := p.w.Write(p.buf)
	if err == nil && n < len(p.buf) {
		err = io.ErrShortWrite
	}
	p.mu.Lock()
	for _, pr := range p.pending {
		if pr.end > n {
			break
		}
		ps := p.written[pr.r.Topic]
		if ps == nil {
			ps = map[int32]kgo.EpochOffset{}
			p.written[pr.r.Topic] = ps
		}
		ps[pr.r.Partition] = kgo.EpochOffset{Epoch: pr.r.LeaderEpoch, Offset: pr.r.Offset + 1}
	}
	p.mu.Unlock()
	p.buf, p.pending = p.buf[:0], p.pending[:0]
	if err != nil {
		return fmt.Errorf("writing to stdout: %w", err)
	}
	return nil
}

// commit commits what was written of the partitions (nil: all) and not
// committed yet. p.mu is not held during the commit, which may wait for
// a rebalance whose revoke callback calls commit too.
func (p *printer) commit(ctx context.Context, cl *kgo.Client, only map[string][]int32) {
	p.mu.Lock()
	todo := map[string]map[int32]kgo.EpochOffset{}
	for t, ps := range p.written {
		for part, eo := range ps {
			if only != nil && !slices.Contains(only[t], part) {
				continue
			}
			if c, ok := p.committed[t][part]; ok && c == eo.Offset {
				continue
			}
			if todo[t] == nil {
				todo[t] = map[int32]kgo.EpochOffset{}
			}
			todo[t][part] = eo
		}
	}
	p.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	cl.CommitOffsetsSync(ctx, todo, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if err != nil {
			p.fail(err)
			return
		}
		for _, t := range resp.Topics {
			for _, part := range t.Partitions {
				if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
					p.fail(fmt.Errorf("%s/%d: %w", t.Topic, part.Partition, err))
					continue
				}
				if p.committed[t.Topic] == nil {
					p.committed[t.Topic] = map[int32]int64{}
				}
				p.committed[t.Topic][part.Partition] = todo[t.Topic][part.Partition].Offset
			}
		}
	})
}

// fail keeps the first commit error; p.mu is held.
func (p *printer) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// forget drops what was written of partitions the group took away
// without a revoke: committing them is bound to fail.
func (p *printer) forget(lost map[string][]int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for t, parts := range lost {
		for _, part := range parts {
			delete(p.written[t], part)
			delete(p.committed[t], part)
		}
	}
}

func (p *printer) commitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// recordToken returns the token of r's header, once every broker has
// applied it; Unknown when there is no such header.
func (a *app) recordToken(ctx context.Context, f *factory.Factory, r *kgo.Record, header string, waited *consistency.Token, p *printer) (consistency.Token, error) {
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
	if err := p.flush(); err != nil {
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

// formatRecord returns r's line of output.
func (a *app) formatRecord(r *kgo.Record, format consumeFormat, tok consistency.Token) []byte {
	var out bytes.Buffer
	if a.json {
		applied := ""
		if !tok.IsUnknown() {
			applied = tok.Encode()
		}
		_ = jsonEncoder(&out).Encode(toRecordJSON(r, applied)) // ends with a newline
		return out.Bytes()
	}
	if format.keySep != "" {
		out.Write(r.Key)
		out.WriteString(format.keySep)
	}
	out.Write(r.Value)
	if format.headers {
		for _, h := range r.Headers {
			fmt.Fprintf(&out, "\t%s=%s", h.Key, h.Value)
		}
	}
	out.WriteByte('\n')
	return out.Bytes()
}
