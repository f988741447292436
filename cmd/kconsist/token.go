package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
)

func (a *app) tokenCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "token",
		Short: "Print the cluster's committed consistency token",
		Long: `Print the cluster's committed consistency token: the cluster id and the
offset of the last committed record of its metadata log, as cluster@offset
and in the encoded form that kconsist wait and the SDK's ParseToken read.
Every change the cluster has answered is at or before it. Needs DESCRIBE
on CLUSTER (DescribeQuorum).`,
		Example: `  kconsist -b localhost:9092 token
  TOKEN=$(kconsist -b localhost:9092 token -o json | jq -r .token)`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.begin()
			ctx, cancel := a.timed(cmd.Context())
			defer cancel()
			f, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer f.Close(context.Background())
			tok, err := f.CommittedToken(ctx)
			if err != nil {
				return err
			}
			if a.json {
				a.emit(tokenJSON(tok))
				return nil
			}
			a.say("%s\n%s", tok, tok.Encode())
			return nil
		},
	}
}

func tokenJSON(tok consistency.Token) map[string]any {
	return map[string]any{"cluster": tok.ClusterID(), "offset": tok.Offset(), "token": tok.Encode()}
}

func (a *app) waitCommand() *cobra.Command {
	var topics []string
	cmd := &cobra.Command{
		Use:   "wait [TOKEN]",
		Short: "Wait until every broker has applied a token",
		Long: `Wait until every broker of the cluster has applied TOKEN (encoded, as
kconsist token prints it, or cluster@offset); without TOKEN, the cluster's
committed token, i.e. every change made so far. A token of another cluster
(exit 5) or beyond the cluster's committed offset (exit 6) is refused at
once. With --topic, also wait until every broker lists every partition of
the topics with a leader. Exits 3, naming the brokers still behind, when
--timeout runs out.`,
		Example: `  kconsist -b localhost:9092 wait "$TOKEN" --timeout 30s
  kconsist -b localhost:9092 wait --topic orders`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			var tok consistency.Token
			if len(args) == 1 {
				var err error
				if tok, err = parseToken(args[0]); err != nil {
					return err
				}
			}
			a.begin()
			ctx, cancel := a.timed(cmd.Context())
			defer cancel()
			f, err := a.connect(ctx)
			if err != nil {
				return err
			}
			defer f.Close(context.Background())
			if tok.IsUnknown() {
				if tok, err = f.CommittedToken(ctx); err != nil {
					return err
				}
			}
			start := time.Now()
			progress, err := a.wait(ctx, f, tok, topics)
			if err != nil {
				return err
			}
			if a.json {
				out := tokenJSON(tok)
				out["brokers"] = progress
				out["waited_ms"] = time.Since(start).Milliseconds()
				a.emit(out)
				return nil
			}
			a.say("every broker (%d) has applied %s", len(progress), tok)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&topics, "topic", nil, "also wait until every broker serves every partition of these topics with a leader")
	return cmd
}

// parseToken reads a token in its encoded form or as cluster@offset.
func parseToken(s string) (consistency.Token, error) {
	s = strings.TrimSpace(s)
	tok, err := consistency.ParseToken(s)
	if err == nil {
		return tok, nil
	}
	if cluster, off, ok := cutLast(s, "@"); ok {
		n, perr := strconv.ParseInt(off, 10, 64)
		if perr == nil && strconv.FormatInt(n, 10) == off {
			t, oerr := consistency.Of(cluster, n)
			if oerr == nil {
				return t, nil
			}
			return consistency.Token{}, fmt.Errorf("token %q: %w", s, oerr)
		}
	}
	return consistency.Token{}, fmt.Errorf("token %q: want the encoded form kconsist token prints, or cluster@offset: %w", s, err)
}

func cutLast(s, sep string) (before, after string, ok bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// brokerJSON is one broker's progress in JSON output.
type brokerJSON struct {
	Node    int32    `json:"node"`
	Addr    string   `json:"addr"`
	Applied int64    `json:"applied"`
	Done    bool     `json:"done"`
	Pending []string `json:"pending,omitempty"`
	Error   string   `json:"error,omitempty"`
}

func toJSON(p factory.BrokerProgress) brokerJSON {
	b := brokerJSON{Node: p.Node, Addr: p.Addr, Applied: p.Applied, Done: p.Done, Pending: p.Pending}
	if p.Err != nil {
		b.Error = p.Err.Error()
	}
	return b
}

// progressAfter is how long a wait runs before it reports progress on
// stderr.
var progressAfter = time.Second

// wait waits for tok (and topics) on every broker, reporting progress on
// stderr once the wait lasts more than progressAfter, and returns each
// broker's last progress.
func (a *app) wait(ctx context.Context, f *factory.Factory, tok consistency.Token, topics []string) ([]brokerJSON, error) {
	var (
		mu     sync.Mutex
		last   = map[int32]factory.BrokerProgress{}
		order  []int32
		start  = time.Now()
		shown  bool
		dirty  bool
		lastAt time.Time
	)
	show := func(final bool) {
		behind := 0
		var parts []string
		for _, n := range order {
			p := last[n]
			if p.Done {
				continue
			}
			behind++
			s := fmt.Sprintf("broker %d at %d", p.Node, p.Applied)
			if p.Applied < 0 {
				s = fmt.Sprintf("broker %d not answered", p.Node)
			}
			if len(p.Pending) > 0 {
				s += " (not serving " + strings.Join(p.Pending, ", ") + ")"
			}
			parts = append(parts, s)
		}
		if behind == 0 && !final {
			return
		}
		msg := fmt.Sprintf("waiting for %s: %d of %d brokers done", tok, len(order)-behind, len(order))
		if len(parts) > 0 {
			msg += "; " + strings.Join(parts, ", ")
		}
		a.note("%s (%.1fs)", msg, time.Since(start).Seconds())
	}
	opts := []factory.WaitOpt{factory.WaitProgress(func(p factory.BrokerProgress) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := last[p.Node]; !ok {
			order = append(order, p.Node)
		}
		last[p.Node] = p
		dirty = true
		if time.Since(start) >= progressAfter && time.Since(lastAt) >= 500*time.Millisecond {
			show(false)
			shown, dirty, lastAt = true, false, time.Now()
		}
	})}
	if len(topics) > 0 {
		opts = append(opts, factory.WaitTopics(topics...))
	}
	// A wait quiet for long still says where it stands, every few seconds.
	tick := time.NewTicker(progressAfter)
	defer tick.Stop()
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(ctx, tok, opts...) }()
	var err error
loop:
	for {
		select {
		case err = <-done:
			break loop
		case <-tick.C:
			mu.Lock()
			if time.Since(lastAt) >= 3*progressAfter || (dirty && time.Since(lastAt) >= 500*time.Millisecond) {
				show(false)
				shown, dirty, lastAt = true, false, time.Now()
			}
			mu.Unlock()
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if shown && err == nil {
		a.note("every broker has applied %s (%.1fs)", tok, time.Since(start).Seconds())
	}
	out := make([]brokerJSON, 0, len(order))
	for _, n := range order {
		out = append(out, toJSON(last[n]))
	}
	return out, err
}

func brokersJSON(ps []factory.BrokerProgress) []brokerJSON {
	out := make([]brokerJSON, len(ps))
	for i, p := range ps {
		out[i] = toJSON(p)
	}
	return out
}
