// Command tokenhandoff shows read-your-writes across two services:
//
//	go run ./examples/tokenhandoff
//
// Service A creates a topic with its admin client and tells service B about
// it over HTTP, passing its consistency token in a request header
// (Kafka-Consistency-Token: f.Token().Encode()). B parses the token
// (consistency.ParseToken), checks it with the cluster and confines it to
// the request it came with (Factory.WithToken), and describes and consumes
// the topic at once, although every broker of the embedded local cluster
// applies metadata changes late. Asked without the token a moment earlier,
// B does not find the topic. A token from the future or of another cluster
// is refused with 400 or 409, and never reaches B's other requests.
//
// The two services run in one process here, each with its own factory; the
// token is the only thing they share. It exits non-zero if B does not see
// what A wrote.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/consumer"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/localcluster"
	"github.com/kconsist/kconsist/producer"
)

// TokenHeader carries a consistency token between services.
const TokenHeader = "Kafka-Consistency-Token"

const topic = "orders"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "tokenhandoff:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tokenhandoff", flag.ContinueOnError)
	fs.SetOutput(stderr)
	lag := fs.Duration("lag", time.Second, "how late every broker applies metadata changes")
	timeout := fs.Duration("timeout", time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h: the usage is all that was asked for
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *lag <= 0 {
		return fmt.Errorf("-lag %v: want a positive lag", *lag)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()

	// Writes answered at commit: the lag is felt by B's reads, not A's create.
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Lag(*lag), localcluster.WriteAnswers(localcluster.WritesAtCommit))
	if err != nil {
		return err
	}
	defer lc.Close()
	fmt.Fprintf(stdout, "Local cluster (KIP-1243): 3 brokers, each applies metadata changes %v late.\n", *lag)

	b, err := newServiceB(lc.Addrs())
	if err != nil {
		return err
	}
	srv := httptest.NewServer(b.routes())
	defer srv.Close()
	defer b.close()

	// Service A.
	fA, err := factory.New(factory.BootstrapServers(lc.Addrs()...), factory.ClientID("service-a"))
	if err != nil {
		return err
	}
	adm, err := fA.Admin()
	if err != nil {
		return err
	}
	defer adm.Close(context.Background())
	created, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil {
		return fmt.Errorf("service A: create %s: %w", topic, err)
	}
	token := fA.Token().Encode()
	fmt.Fprintf(stdout, "A: created topic %q (3 partitions); its token is %s (%s)\n", topic, token, fA.Token())

	// The same question without the token, for contrast.
	answer, _, err := call(ctx, http.MethodGet, srv.URL+"/topics/"+topic, "")
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "A → B  GET /topics/%s without a token\n       B: %s\n", topic, answer)

	start := time.Now()
	answer, status, err := call(ctx, http.MethodPost, srv.URL+"/subscriptions/"+topic, token)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("service B answered %d: %s", status, answer)
	}
	fmt.Fprintf(stdout, "A → B  POST /subscriptions/%s with %s: %s\n       B: %s\n", topic, TokenHeader, token, answer)
	fmt.Fprintf(stdout, "       (%v: a broker held B's requests until it had applied A's create)\n", time.Since(start).Round(10*time.Millisecond))
	fmt.Fprintf(stdout, "B's token now: %s\n", b.f.Token())
	if !strings.HasPrefix(answer, topic+": 3 partitions") {
		return fmt.Errorf("with A's token, B should see %s with 3 partitions; it saw: %s", topic, answer)
	}

	p, err := factory.NewProducer(fA, producer.String(), producer.String())
	if err != nil {
		return err
	}
	defer p.Close(context.Background())
	for i := range 3 {
		if _, err := p.Produce(ctx, producer.Record[string, string]{Topic: topic, Key: fmt.Sprint(i), Value: fmt.Sprint("order-", i)}); err != nil {
			return fmt.Errorf("service A: produce: %w", err)
		}
	}
	fmt.Fprintf(stdout, "A: produced 3 records to %q\n", topic)

	got, err := b.waitRecords(ctx, 3, 10*time.Second)
	sort.Strings(got) // three partitions: arrival order varies
	fmt.Fprintf(stdout, "B: consumed %d records: %s\n", len(got), strings.Join(got, " "))
	if err != nil {
		return fmt.Errorf("service B: %w", err)
	}
	fmt.Fprintln(stdout, "OK: B read what A wrote, carried by the token alone.")
	return nil
}

// call sends a request to service B with token in TokenHeader (none if
// empty) and returns the answer's body and status.
func call(ctx context.Context, method, url, token string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return "", 0, err
	}
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(body)), resp.StatusCode, err
}

// serviceB is a service with its own factory. It describes topics and
// consumes them on request, after checking the caller's token, if any, and
// confining it to that request (WithToken): its store is not raised.
type serviceB struct {
	f *factory.Factory

	mu        sync.Mutex
	consumers []*consumer.Consumer[string, string]
	records   []string
	wg        sync.WaitGroup
	stop      context.CancelFunc
	ctx       context.Context
}

func newServiceB(seeds []string) (*serviceB, error) {
	f, err := factory.New(factory.BootstrapServers(seeds...), factory.ClientID("service-b"))
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &serviceB{f: f, ctx: ctx, stop: stop}, nil
}

func (b *serviceB) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /topics/{topic}", b.withToken(func(w http.ResponseWriter, r *http.Request, f *factory.Factory) {
		fmt.Fprintln(w, b.describe(r.Context(), f, r.PathValue("topic")))
	}))
	mux.HandleFunc("POST /subscriptions/{topic}", b.withToken(func(w http.ResponseWriter, r *http.Request, f *factory.Factory) {
		t := r.PathValue("topic")
		desc := b.describe(r.Context(), f, t)
		if err := b.subscribe(f, t); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		fmt.Fprintf(w, "%s; consuming it\n", desc)
	}))
	return mux
}

// withToken runs h with the factory for the request: with the caller's
// token, a session of B's factory that waits for it, so no broker answers
// with metadata older than the caller's writes. The token is checked with
// the cluster first, and it stays with this request: B's other requests
// neither wait for it nor inherit a bad one.
func (b *serviceB) withToken(h func(http.ResponseWriter, *http.Request, *factory.Factory)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		text := r.Header.Get(TokenHeader)
		if text == "" {
			h(w, r, b.f)
			return
		}
		tok, err := consistency.ParseToken(text)
		if err != nil {
			http.Error(w, fmt.Sprintf("%s: %v", TokenHeader, err), http.StatusBadRequest)
			return
		}
		sess, err := b.f.WithToken(r.Context(), tok)
		switch {
		case errors.Is(err, consistency.ErrClusterMismatch):
			http.Error(w, fmt.Sprintf("%s: %v", TokenHeader, err), http.StatusConflict)
			return
		case errors.Is(err, consistency.ErrFutureToken):
			http.Error(w, fmt.Sprintf("%s: %v", TokenHeader, err), http.StatusBadRequest)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		defer sess.Close(context.Background())
		h(w, r, sess)
	}
}

// describe answers what B's admin client sees of topic.
func (b *serviceB) describe(ctx context.Context, f *factory.Factory, t string) string {
	adm, err := f.Admin()
	if err != nil {
		return err.Error()
	}
	defer adm.Close(context.Background())
	topics, err := adm.ListTopics(ctx, t)
	switch {
	case err != nil:
		return fmt.Sprintf("%s: %v", t, err)
	case !topics.Has(t):
		return t + ": not found"
	case topics[t].Err != nil:
		return fmt.Sprintf("%s: %v", t, topics[t].Err)
	}
	ends, err := adm.ListEndOffsets(ctx, t)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Sprintf("%s: %d partitions, end offsets: %v", t, len(topics[t].Partitions), err)
	}
	var offs []string
	for p := range int32(len(topics[t].Partitions)) {
		o, _ := ends.Lookup(t, p)
		offs = append(offs, fmt.Sprint(o.Offset))
	}
	return fmt.Sprintf("%s: %d partitions, end offsets %s", t, len(topics[t].Partitions), strings.Join(offs, " "))
}

// subscribe starts a consumer of t from its first offset, in the
// background. Made from the request's session, it waits for the caller's
// token for as long as it runs.
func (b *serviceB) subscribe(f *factory.Factory, t string) error {
	c, err := factory.NewConsumer(f, consumer.String(), consumer.String(), factory.ConsumeTopics(t), factory.AutoOffsetReset(factory.ResetEarliest))
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.consumers = append(b.consumers, c)
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for b.ctx.Err() == nil {
			recs, _ := c.Poll(b.ctx, 0)
			b.mu.Lock()
			for _, r := range recs {
				b.records = append(b.records, r.Value)
			}
			b.mu.Unlock()
		}
	}()
	return nil
}

// waitRecords waits until B has consumed n records, at most wait.
func (b *serviceB) waitRecords(ctx context.Context, n int, wait time.Duration) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	for {
		b.mu.Lock()
		got := append([]string(nil), b.records...)
		b.mu.Unlock()
		if len(got) >= n {
			return got, nil
		}
		select {
		case <-ctx.Done():
			return got, errors.New("the records did not arrive in time")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *serviceB) close() {
	b.stop()
	b.wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.consumers {
		c.Close(context.Background())
	}
}
