package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// drConfig sizes the DR address switch (issue 38): two single-node Kafka
// clusters behind one address, which switches between them while every
// client produces at Rate records per second.
type drConfig struct {
	Switches int           // address switches, A→B, B→A, ... (each one measured for every client)
	Every    time.Duration // time between two switches
	Warm     time.Duration // producing before the first switch
	Rate     int           // records per second per client
	Java     bool
}

// drClient is one producer of the DR switch: send hands a record over
// without waiting; done gets its outcome.
type drClient struct {
	name, topic string
	send        func(done func(error))
	close       func()
}

// drRecord is one record: when it was handed over and when its outcome came.
type drRecord struct {
	sent, done time.Time
	err        error
}

// drResult is what every client's records did around every switch.
type drResult struct {
	Clients  []string
	Switches []time.Time
	Records  [][]*drRecord // per client, in send order
	InA, InB []int64       // records in each cluster's topic of the client, at the end
	Trace    string
}

// drNames are the clients in column order; drIDs their client.id.
var (
	drNames = []string{"factory", "plain kgo", "Java 4.4 producer"}
	drIDs   = []string{"kconsist", "kgo", "java"}
)

func drTopic(c int) string { return "dr-" + drIDs[c] }

// drEnv is clusters A and B, both advertising node 1 at the forwarder's
// address, which is also every client's bootstrap server: the one address
// a DR switch moves from A to B.
type drEnv struct {
	a, b         *kafkatest.Cluster
	realA, realB string
	fw           *kafkatest.Forwarder
}

func newDREnv(ctx context.Context, topics []string, logf func(string, ...any)) (*drEnv, error) {
	e := &drEnv{}
	ok := false
	defer func() {
		if !ok {
			e.close()
		}
	}()
	var err error
	if e.fw, err = kafkatest.NewForwarder(""); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if e.a, err = kafkatest.StartCluster(ctx, kafkatest.AdvertisedAddr(1, e.fw.Addr())); err != nil {
		return nil, fmt.Errorf("drswitch: cluster A: %w", err)
	}
	if e.b, err = kafkatest.StartCluster(ctx, kafkatest.AdvertisedAddr(1, e.fw.Addr())); err != nil {
		return nil, fmt.Errorf("drswitch: cluster B: %w", err)
	}
	if e.realA, err = e.a.ListenerAddr(1); err != nil {
		return nil, err
	}
	if e.realB, err = e.b.ListenerAddr(1); err != nil {
		return nil, err
	}
	logf("drswitch: Kafka clusters A (%s) and B (%s) ready in %v", e.a.ClusterID(), e.b.ClusterID(), time.Since(t0).Round(time.Millisecond))
	for _, c := range []*kafkatest.Cluster{e.a, e.b} {
		if err := drCreate(ctx, c, topics); err != nil {
			return nil, err
		}
	}
	e.fw.SetTarget(e.realA)
	ok = true
	return e, nil
}

// drCreate makes topics (1 partition) on c, through its own listener.
func drCreate(ctx context.Context, c *kafkatest.Cluster, topics []string) error {
	addr, err := c.ListenerAddr(1)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), c.DirectDial())
	if err != nil {
		return err
	}
	defer cl.Close()
	resps, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, nil, topics...)
	if err == nil {
		err = resps.Error()
	}
	if err != nil {
		return fmt.Errorf("drswitch: create topics on %s: %w", addr, err)
	}
	return nil
}

func (e *drEnv) close() {
	if e.fw != nil {
		_ = e.fw.Close()
	}
	for _, c := range []*kafkatest.Cluster{e.a, e.b} {
		if c != nil {
			_ = c.Close()
		}
	}
}

// drTracer writes every frame of the factory's connections with its time
// since the last switch (KCONSIST_DR_TRACE names the file).
type drTracer struct {
	mu    sync.Mutex
	t0    time.Time
	conns map[uint64]string
	b     strings.Builder
}

func (t *drTracer) mark(at time.Time, what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.t0 = at
	fmt.Fprintf(&t.b, "%s at %s\n", what, at.Format("15:04:05.000"))
}

func (t *drTracer) frame(fr kafkatest.Frame) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if fr.Request && fr.ClientID != "" {
		if _, ok := t.conns[fr.Conn]; !ok {
			t.conns[fr.Conn] = fr.ClientID
		}
	}
	id := t.conns[fr.Conn]
	if id == "kgo" || id == "java" || t.t0.IsZero() {
		return
	}
	dir, extra := "->", ""
	if !fr.Request {
		dir = "<-"
		if fr.Key == 18 {
			if resp, err := fr.ApiVersionsResponse(); err == nil && resp.ErrorCode != 0 {
				extra = " " + kerr.ErrorForCode(resp.ErrorCode).Error()
			}
		}
	}
	fmt.Fprintf(&t.b, "  %8.1fms conn%d %s to %s %s key %d v%d%s\n", ms(now.Sub(t.t0)), fr.Conn, id, fr.Target, dir, fr.Key, fr.Version, extra)
}

// runDRSwitch starts the clusters and the clients, produces at cfg.Rate
// per client, switches the address cfg.Switches times, and counts the
// records in both clusters at the end. newFactory makes the factory's
// producer on the bootstrap address.
func runDRSwitch(ctx context.Context, cfg drConfig, logf func(string, ...any),
	newFactory func(seed, topic string) (send func(func(error)), closeFn func(), err error)) (*drResult, error) {
	n := 2
	if cfg.Java {
		n = 3
	}
	topics := make([]string, n)
	for c := range n {
		topics[c] = drTopic(c)
	}
	env, err := newDREnv(ctx, topics, logf)
	if err != nil {
		return nil, err
	}
	defer env.close()
	var tr *drTracer
	if os.Getenv("KCONSIST_DR_TRACE") != "" {
		tr = &drTracer{conns: map[uint64]string{}}
		env.fw.Observe(tr.frame)
	}
	seed := env.fw.Addr()
	clients, err := startDRClients(ctx, seed, cfg, newFactory)
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	if err != nil {
		return nil, err
	}
	res := &drResult{Clients: drNames[:n], Records: make([][]*drRecord, n), InA: make([]int64, n), InB: make([]int64, n)}
	var mu sync.Mutex // guards res.Records and every record's done, err
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second / time.Duration(cfg.Rate))
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				r := &drRecord{sent: time.Now()}
				mu.Lock()
				res.Records[c] = append(res.Records[c], r)
				mu.Unlock()
				clients[c].send(func(err error) {
					now := time.Now()
					mu.Lock()
					r.done, r.err = now, err
					mu.Unlock()
				})
			}
		}()
	}
	sleep := func(d time.Duration) error {
		select {
		case <-time.After(d):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err = sleep(cfg.Warm)
	for i := 0; err == nil && i < cfg.Switches; i++ {
		to, name := env.realB, "switch A→B"
		if i%2 == 1 {
			to, name = env.realA, "switch B→A"
		}
		at := time.Now()
		if tr != nil {
			tr.mark(at, fmt.Sprintf("%d %s", i+1, name))
		}
		env.fw.SetTarget(to)
		res.Switches = append(res.Switches, at)
		logf("drswitch: %d/%d %s", i+1, cfg.Switches, name)
		err = sleep(cfg.Every)
	}
	close(stop)
	wg.Wait()
	if err != nil {
		return nil, err
	}
	// Every outcome, within a bound: the Java client's delivery timeout
	// is 2 minutes, a record still open after 30 s counts as not acknowledged.
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		open := 0
		for _, rs := range res.Records {
			for _, r := range rs {
				if r.done.IsZero() {
					open++
				}
			}
		}
		mu.Unlock()
		if open == 0 {
			break
		}
		if err := sleep(100 * time.Millisecond); err != nil {
			return nil, err
		}
	}
	for _, c := range clients {
		c.close()
	}
	clients = nil
	mu.Lock()
	defer mu.Unlock()
	for c := range n {
		if res.InA[c], err = env.a.CountRecords(ctx, drTopic(c)); err != nil {
			return nil, fmt.Errorf("drswitch: count A: %w", err)
		}
		if res.InB[c], err = env.b.CountRecords(ctx, drTopic(c)); err != nil {
			return nil, fmt.Errorf("drswitch: count B: %w", err)
		}
		s := res.summary(c)
		for _, x := range res.Records[c] {
			if x.err != nil {
				logf("drswitch %s: first failure: %v", drNames[c], x.err)
				break
			}
		}
		logf("drswitch %s: first ack after a switch p50 %.0fms [%.0f–%.0f], sent-after p50 %.0fms; %d sent, %d acknowledged, %d failed, A %d + B %d",
			drNames[c], s.P50, s.Min, s.Max, s.SentAfterP50, s.Sent, s.Acked, s.Failed, res.InA[c], res.InB[c])
	}
	if tr != nil {
		tr.mu.Lock()
		res.Trace = tr.b.String()
		tr.mu.Unlock()
		if err := os.WriteFile(os.Getenv("KCONSIST_DR_TRACE"), []byte(res.Trace), 0o644); err != nil {
			logf("drswitch: trace: %v", err)
		}
	}
	return res, nil
}

// startDRClients makes the factory's producer, a plain kgo client and,
// with cfg.Java, the Java producer, each with its defaults.
func startDRClients(ctx context.Context, seed string, cfg drConfig,
	newFactory func(seed, topic string) (func(func(error)), func(), error)) ([]drClient, error) {
	var clients []drClient
	send, closeFn, err := newFactory(seed, drTopic(0))
	if err != nil {
		return nil, err
	}
	clients = append(clients, drClient{name: drNames[0], topic: drTopic(0), send: send, close: closeFn})
	cl, err := kgo.NewClient(kgo.SeedBrokers(seed), kgo.ClientID(drIDs[1]))
	if err != nil {
		return clients, err
	}
	value := []byte("r")
	clients = append(clients, drClient{name: drNames[1], topic: drTopic(1), close: cl.Close,
		send: func(done func(error)) {
			cl.Produce(context.Background(), &kgo.Record{Topic: drTopic(1), Value: value}, func(_ *kgo.Record, err error) { done(err) })
		}})
	if !cfg.Java {
		return clients, nil
	}
	j, err := startJavaProducer(ctx, seed, drTopic(2))
	if err != nil {
		return clients, err
	}
	clients = append(clients, drClient{name: drNames[2], topic: drTopic(2), send: j.send, close: j.close})
	return clients, nil
}

// drSummary is one client's figures over every switch.
type drSummary struct {
	// FirstAck: per switch, from the switch to the first acknowledgement
	// that came after it (of any record, in flight at the switch or later).
	FirstAck []float64
	// SentAfter: per switch, from the switch to the acknowledgement of the
	// first record sent after it.
	SentAfter                   []float64
	P50, Min, Max, SentAfterP50 float64
	Missing                     int // switches with no acknowledgement before the next one
	Sent, Acked, Failed         int
}

func (r *drResult) summary(c int) drSummary {
	var s drSummary
	recs := r.Records[c]
	s.Sent = len(recs)
	for _, x := range recs {
		switch {
		case x.done.IsZero():
		case x.err != nil:
			s.Failed++
		default:
			s.Acked++
		}
	}
	for i, at := range r.Switches {
		end := time.Time{}
		if i+1 < len(r.Switches) {
			end = r.Switches[i+1]
		}
		var first time.Time
		var after *drRecord
		for _, x := range recs {
			if x.err != nil || x.done.IsZero() || !x.done.After(at) || (!end.IsZero() && !x.done.Before(end)) {
				continue
			}
			if first.IsZero() || x.done.Before(first) {
				first = x.done
			}
			if x.sent.After(at) && (after == nil || x.sent.Before(after.sent)) {
				after = x
			}
		}
		if first.IsZero() {
			s.Missing++
			continue
		}
		s.FirstAck = append(s.FirstAck, ms(first.Sub(at)))
		if after != nil {
			s.SentAfter = append(s.SentAfter, ms(after.done.Sub(at)))
		}
	}
	s.P50, s.Min, s.Max = quantile(s.FirstAck, 0.5), quantile(s.FirstAck, 0), quantile(s.FirstAck, 1)
	s.SentAfterP50 = quantile(s.SentAfter, 0.5)
	return s
}

// drLost is how many acknowledged records neither cluster holds (a record
// stored on both sides counts twice, so duplicates can hide a loss; the
// table shows both counts).
func (r *drResult) drLost(c int) int64 {
	return max(0, int64(r.summary(c).Acked)-r.InA[c]-r.InB[c])
}

func drMarkdown(w *bytes.Buffer, r *drResult, cfg drConfig) {
	fmt.Fprintf(w, "Where: two single-node Apache Kafka 4.4 clusters A and B (combined broker+controller JVMs started by "+
		"`integration/kafkatest`), both advertising node 1 at one `kafkatest.Forwarder` address, which is also every client's "+
		"bootstrap server: the one address a DR switch moves. Each client produces one record every %v (%d records/s, "+
		"acks=all, its defaults) to a topic of its own (1 partition, in both clusters) without waiting for outcomes. "+
		"After %v the address switches to the other cluster (closing its connections) every %v, %d times (A→B, B→A, ...); "+
		"all clients are producing at every switch. *First ack*: from the switch to the first acknowledgement after it; "+
		"*sent after*: to the acknowledgement of the first record sent after it. At the end every record's outcome is "+
		"awaited (up to 30 s) and each topic is counted in both clusters; *lost* is acknowledged minus stored "+
		"(duplicates across the clusters can hide a loss).\n\n", time.Second/time.Duration(cfg.Rate), cfg.Rate, cfg.Warm, cfg.Every, cfg.Switches)
	fmt.Fprintf(w, "| client | switches | first ack p50 ms | min ms | max ms | sent after p50 ms | switches without an ack | sent | acknowledged | failed | in A + B | lost | factory / client, p50 | target |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	f := r.summary(0)
	for c := range r.Clients {
		s := r.summary(c)
		ratio, target := "–", "–"
		if c > 0 && s.P50 > 0 {
			ratio = fmt.Sprintf("%.2f", f.P50/s.P50)
		}
		if c == 0 && len(r.Clients) > 2 {
			j := r.summary(2)
			target = yesNo(s.Missing == 0 && r.drLost(0) == 0 && s.P50 <= j.P50) + " (p50 ≤ Java's, 0 lost)"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %d | %d | %d | %d | %d + %d | %d | %s | %s |\n", r.Clients[c], len(r.Switches),
			f0(s.P50), f0(s.Min), f0(s.Max), f0(s.SentAfterP50), s.Missing, s.Sent, s.Acked, s.Failed, r.InA[c], r.InB[c], r.drLost(c), ratio, target)
	}
	w.WriteString("\nFirst ack per switch, ms (in order):\n\n")
	for c := range r.Clients {
		s := r.summary(c)
		parts := make([]string, len(s.FirstAck))
		for i, x := range s.FirstAck {
			parts[i] = fmt.Sprintf("%.0f", x)
		}
		fmt.Fprintf(w, "- %s: %s\n", r.Clients[c], strings.Join(parts, ", "))
	}
	w.WriteString("\n")
}
