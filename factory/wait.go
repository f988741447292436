package factory

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/session"
)

// Waiting for every broker.
//
// A factory's own clients never see a broker that is behind their token:
// each request waits for its broker. Another process does not share the
// factory's store: a shell script that creates a topic and then starts a
// service, a client in another language, a test suite. For those the
// factory can wait until every broker of the cluster has applied a token,
// and only then let the other process go (WaitApplied; the kconsist
// command's --wait).
//
// A broker's applied offset is asked directly of each broker, with
// ApiVersions: every KRaft broker (Apache Kafka 3.x and 4.x, and a
// KIP-1243 broker, whose header tokens are the same offsets) answers its
// FinalizedFeaturesEpoch, the offset of the last metadata record it has
// applied, and no broker holds an ApiVersions request for a token. A
// broker that answers no such offset cannot be waited for
// (ErrWaitUnsupported). Once a broker's offset is at or past the token,
// the topics of WaitTopics are asked of it with a Metadata request that
// needs no token: a broker's applied offset only grows, so its answer
// shows the token's changes. Every question goes through one client for
// the whole wait, whose requests no broker holds and whose answers no
// emulation reads (see waiter for what one wait costs).

// ErrBrokersBehind is matched (errors.Is) by the *WaitError that
// WaitApplied returns when its context ends before every broker has
// applied the token.
var ErrBrokersBehind = errors.New("factory: brokers still behind the consistency token")

// ErrWaitUnsupported is returned by WaitApplied when a broker reports no
// applied metadata offset (no ApiVersions FinalizedFeaturesEpoch, which
// every KRaft broker reports): nothing tells when it has applied a
// change.
var ErrWaitUnsupported = errors.New("factory: a broker does not report its applied metadata offset (ApiVersions FinalizedFeaturesEpoch)")

// WaitOpt is an option of WaitApplied.
type WaitOpt interface{ applyWait(*waitConfig) }

type waitConfig struct {
	topics   []string
	progress func(BrokerProgress)
	poll     time.Duration
	ask      time.Duration
}

type waitOpt func(*waitConfig)

func (o waitOpt) applyWait(c *waitConfig) { o(c) }

// WaitTopics also waits until every broker's Metadata answer lists every
// partition of topics with a leader: what a produce to a topic just
// created needs, on whichever broker the producer asks. A topic a broker
// does not know, or a partition without a leader, keeps the wait going.
func WaitTopics(topics ...string) WaitOpt {
	return waitOpt(func(c *waitConfig) { c.topics = append(c.topics, topics...) })
}

// WaitProgress calls fn whenever a broker's progress changes: a new
// applied offset, an error, done. Calls are never concurrent and come
// from the goroutine that called WaitApplied; fn must not block for long.
func WaitProgress(fn func(BrokerProgress)) WaitOpt {
	return waitOpt(func(c *waitConfig) { c.progress = fn })
}

// WaitPoll sets the longest pause between two questions to a broker that
// is behind (default 200ms; the first pauses are shorter, from 20ms
// doubling, and once another broker has applied the token a broker still
// behind is asked at once and then every 25ms at most). A KRaft broker
// applies a no-op record every 500ms even when idle, so asking more often
// than that only shows offsets that no write needs.
func WaitPoll(d time.Duration) WaitOpt {
	return waitOpt(func(c *waitConfig) {
		if d > 0 {
			c.poll = d
		}
	})
}

// CommittedToken asks the cluster behind the bootstrap servers for its
// committed token: its cluster id and the offset of the last committed
// record of its metadata log (DescribeQuorum's high watermark less one).
// Every write the cluster has answered is at or before it, so waiting for
// it (WaitApplied) waits for every change made so far, by anyone. It
// needs DESCRIBE on CLUSTER, as DescribeQuorum does. Every bootstrap
// server is asked at once and the first answer counts, so that a broker
// holding the factory's requests until it catches up delays nothing.
func (f *Factory) CommittedToken(ctx context.Context) (consistency.Token, error) {
	return firstSeed(ctx, f, committedToken)
}

// committedToken asks one broker for the cluster id and DescribeQuorum.
func committedToken(ctx context.Context, b *kgo.Broker) (consistency.Token, error) {
	meta := kmsg.NewPtrMetadataRequest()
	meta.Topics = []kmsg.MetadataRequestTopic{}
	mresp, err := b.RetriableRequest(ctx, meta)
	if err != nil {
		return consistency.Token{}, fmt.Errorf("factory: asking the cluster id: %w", err)
	}
	id := mresp.(*kmsg.MetadataResponse).ClusterID
	if id == nil || *id == "" {
		return consistency.Token{}, fmt.Errorf("factory: the cluster did not say its id")
	}
	hwm, err := session.QuorumHighWatermark(ctx, b)
	if err != nil {
		return consistency.Token{}, fmt.Errorf("factory: %w", err)
	}
	return consistency.Of(*id, hwm-1)
}

// firstSeed asks every bootstrap server at once with ask, through a client
// of f's whose requests carry no token (a broker behind the factory's
// token answers them at once), and returns the first answer without
// error, or else the last error.
func firstSeed[T any](ctx context.Context, f *Factory, ask func(context.Context, *kgo.Broker) (T, error)) (T, error) {
	cl, release, err := f.s.UnstampedClient()
	if err != nil {
		var zero T
		return zero, err
	}
	defer release()
	return askSeeds(ctx, cl, ask)
}

// askSeeds asks every bootstrap server of cl at once with ask and returns
// the first answer without error, or else the last error.
func askSeeds[T any](ctx context.Context, cl *kgo.Client, ask func(context.Context, *kgo.Broker) (T, error)) (T, error) {
	var zero T
	// Questions still under way end (cancel) before they are waited for.
	var wg sync.WaitGroup
	defer wg.Wait()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	seeds := cl.SeedBrokers()
	answers := make(chan answer, len(seeds))
	for _, b := range seeds {
		wg.Go(func() {
			v, err := ask(sctx, b)
			answers <- answer{v, err}
		})
	}
	last := errors.New("no bootstrap servers")
	for range seeds {
		a := <-answers
		if a.err == nil {
			return a.v, nil
		}
		last = a.err
	}
	return zero, last
}

// hedgeAfter is how long listBrokers lets a bootstrap server take before
// it asks the next one as well.
const hedgeAfter = 200 * time.Millisecond

// hedgeSeeds asks the bootstrap servers of cl with ask, one at first, the
// next one as well whenever the last one asked failed or has not answered
// for after, and returns the first answer without error, or else the last
// error.
func hedgeSeeds[T any](ctx context.Context, cl *kgo.Client, after time.Duration, ask func(context.Context, *kgo.Broker) (T, error)) (T, error) {
	var zero T
	var wg sync.WaitGroup
	defer wg.Wait()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v   T
		err error
	}
	seeds := cl.SeedBrokers()
	answers := make(chan answer, len(seeds))
	last := errors.New("no bootstrap servers")
	next, out := 0, 0 // the next seed to ask, questions under way
	for next < len(seeds) || out > 0 {
		if next < len(seeds) {
			b := seeds[next]
			next++
			out++
			wg.Go(func() {
				v, err := ask(sctx, b)
				answers <- answer{v, err}
			})
		}
		var timeout <-chan time.Time
		if next < len(seeds) {
			t := time.NewTimer(after)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case a := <-answers:
			out--
			if a.err == nil {
				return a.v, nil
			}
			last = a.err
		case <-timeout:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
	return zero, last
}

// WaitApplied returns once every broker of the cluster has applied tok,
// the factory's own token (Token) when tok is Unknown: from then on any
// client, of any process, sees on every broker what tok's holder wrote.
// A token the factory does not hold already (of another cluster, or
// beyond its own) is first checked: one of another cluster or beyond the
// cluster's committed metadata offset is refused at once with a
// *TokenError (see CheckToken). So is the factory's own token when it
// names another cluster than the bootstrap servers' (a store shared
// across clusters, or a foreign token not healed yet). With
// an Unknown tok and no token of its own the factory has nothing to wait
// for, except the topics of WaitTopics.
//
// When ctx ends first it returns a *WaitError naming the brokers still
// behind and how far each has applied (errors.Is ErrBrokersBehind);
// other errors say the cluster could not be asked at all. The brokers are
// those the cluster lists when the wait starts.
func (f *Factory) WaitApplied(ctx context.Context, tok consistency.Token, opts ...WaitOpt) error {
	cfg := waitConfig{poll: 200 * time.Millisecond, ask: 5 * time.Second}
	for _, o := range opts {
		if o == nil {
			return fmt.Errorf("%w: WaitApplied: a nil option", ErrConfig)
		}
		o.applyWait(&cfg)
	}
	for _, t := range cfg.topics {
		if t == "" {
			return fmt.Errorf("%w: WaitTopics: an empty topic name", ErrConfig)
		}
	}
	if tok.IsUnknown() {
		tok = f.Token()
	}
	// A token of another cluster than the bootstrap servers' is refused,
	// as CheckToken refuses it, whether given or the store's: no broker of
	// theirs will ever apply it.
	if !tok.IsUnknown() && f.s.Watcher().Cluster() != tok.ClusterID() {
		cluster, err := f.s.AskCluster(ctx)
		if err != nil {
			return fmt.Errorf("factory: checking token %v: %w", tok, err)
		}
		if cluster != tok.ClusterID() {
			return &TokenError{Token: tok, Cluster: cluster, Committed: -1}
		}
	}
	// A token the factory does not hold already is checked first, as
	// WithToken checks it: one beyond the committed offset is refused.
	if cur := f.Token(); !tok.IsUnknown() && (cur.ClusterID() != tok.ClusterID() || cur.Offset() < tok.Offset()) {
		if err := f.CheckToken(ctx, tok); err != nil {
			return err
		}
	}
	// Every question goes through one client of the factory whose
	// requests carry no token and whose answers no emulation reads: no
	// broker holds them, and an answer costs its decoding by franz-go
	// only. That a broker has applied tok is proven by its own applied
	// offset (ApiVersions), not by a stamped request's answer.
	cl, release, err := f.s.UnstampedClient()
	if err != nil {
		return err
	}
	defer release()
	brokers, err := listBrokers(ctx, cl)
	if err != nil {
		return fmt.Errorf("factory: listing the cluster's brokers: %w", err)
	}
	w := &waiter{cfg: cfg, tok: tok, cl: cl, served: map[int64]*servedAt{}, first: make(chan struct{})}
	return w.run(ctx, brokers)
}

// listBrokers returns the cluster's brokers by node id, as the first
// bootstrap server of cl to answer lists them. The bootstrap servers are
// asked one after another (each a connection and its handshake): the next
// once the one before failed or has not answered for hedgeAfter.
func listBrokers(ctx context.Context, cl *kgo.Client) ([]BrokerProgress, error) {
	return hedgeSeeds(ctx, cl, hedgeAfter, func(ctx context.Context, b *kgo.Broker) ([]BrokerProgress, error) {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		resp, err := b.RetriableRequest(ctx, req)
		if err != nil {
			return nil, err
		}
		brokers := resp.(*kmsg.MetadataResponse).Brokers
		if len(brokers) == 0 {
			return nil, errors.New("the cluster lists no brokers")
		}
		out := make([]BrokerProgress, 0, len(brokers))
		for _, b := range brokers {
			out = append(out, BrokerProgress{Node: b.NodeID, Addr: net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), Applied: -1})
		}
		slices.SortFunc(out, func(a, b BrokerProgress) int { return int(a.Node) - int(b.Node) })
		return out, nil
	})
}

// A waiter asks every broker through one client (cl). Per broker and
// wait, the questions are: ApiVersions until the broker has applied the
// token (the first question at once, then after pauses that double from
// firstPause up to WaitPoll), then one Metadata of the topics, and again
// only of those it did not serve yet; but a broker at an applied offset
// where another broker served every topic is not asked (servedAt), and the
// broker that served them is asked one ApiVersions more to pin its answer
// to that offset. So with brokers that apply the token alike, one Metadata
// of the topics per wait, not per broker. Nothing else: no client per
// broker (each would cost a connection and its handshake), no stamped
// request (which an emulating reader would hold, decode and follow with a
// question of its own).
type waiter struct {
	cfg waitConfig
	tok consistency.Token
	cl  *kgo.Client // carries no token

	mu     sync.Mutex
	served map[int64]*servedAt // by applied offset

	// first closes when the first broker answers an offset at or past
	// the token: the others are then asked again at once, and every
	// catchUp at most (see follow).
	first     chan struct{}
	firstOnce sync.Once
}

// servedAt is what one broker's answer showed of the topics at one applied
// offset: a broker's metadata at an offset is the metadata log up to it,
// the same on every broker, so a broker at an offset where another one
// served every partition of the topics serves them too, and is not asked.
// The first broker at an offset asks; the others at it wait for its
// answer (done closes), and ask themselves only if it did not show every
// partition served, or could not be pinned to that offset.
type servedAt struct {
	done chan struct{}
	ok   bool // set before done closes
}

// update is one broker's new progress, or the fatal error of its wait.
type update struct {
	i     int
	p     BrokerProgress
	fatal error
}

func (w *waiter) run(ctx context.Context, brokers []BrokerProgress) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	updates := make(chan update)
	for i, b := range brokers {
		wg.Go(func() { w.follow(wctx, i, b, updates) })
	}
	for _, p := range brokers {
		w.report(p)
	}
	left := len(brokers)
	for left > 0 {
		select {
		case u := <-updates:
			if u.fatal != nil {
				return u.fatal
			}
			brokers[u.i] = u.p
			w.report(u.p)
			if u.p.Done {
				left--
			}
		case <-ctx.Done():
			werr := &WaitError{Token: w.tok, Brokers: len(brokers), Err: ctx.Err()}
			for _, p := range brokers {
				if !p.Done {
					werr.Behind = append(werr.Behind, p)
				}
			}
			return werr
		}
	}
	return nil
}

func (w *waiter) report(p BrokerProgress) {
	if w.cfg.progress != nil {
		w.cfg.progress(p)
	}
}

// follow asks one broker until it is done, sending every change of its
// progress; it returns when done or when ctx ends.
func (w *waiter) follow(ctx context.Context, i int, p BrokerProgress, updates chan<- update) {
	send := func(u update) bool {
		select {
		case updates <- u:
			return true
		case <-ctx.Done():
			return false
		}
	}
	b := w.cl.Broker(int(p.Node))
	ask := w.cfg.topics // what the next Metadata asks: the topics not served yet
	pause := firstPause
	target := w.tok.Offset() // -1 when Unknown
	for {
		next, err := w.ask(ctx, b, p, &ask)
		if err != nil {
			send(update{i: i, fatal: err})
			return
		}
		if target >= 0 && next.Applied >= target {
			w.firstOnce.Do(func() { close(w.first) })
		}
		if changed(p, next) {
			if !send(update{i: i, p: next}) {
				return
			}
		}
		p = next
		if p.Done {
			return
		}
		// Once another broker has applied the token, one still behind
		// it is likely about to: it is asked at once, and often.
		var nudge <-chan struct{}
		behind := target >= 0 && p.Applied < target
		if behind {
			select {
			case <-w.first:
				pause = min(pause, catchUp)
			default:
				nudge = w.first
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-nudge:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return
		}
		pause = min(2*pause, w.cfg.poll)
	}
}

// firstPause is the first pause between two questions to a broker; each
// next one doubles, up to WaitPoll. A broker applies a record tens of
// milliseconds after its commit: asking sooner than that only costs
// requests (with 5 ms, two more per broker for a 50 ms lag).
const firstPause = 20 * time.Millisecond

// catchUp is the longest pause between two questions to a broker once
// another broker has applied the token: brokers apply a commit at about
// the same time, so the rest are near. It bounds how long after its
// applying a broker is seen done (it was WaitPoll: 200 ms by default,
// which put the end of a wait for 1,000 topics on 24 brokers 78 ms after
// the last broker applied, p50).
const catchUp = 25 * time.Millisecond

func changed(a, b BrokerProgress) bool {
	return a.Applied != b.Applied || a.Done != b.Done || !slices.Equal(a.Pending, b.Pending) ||
		(a.Err == nil) != (b.Err == nil) || (a.Err != nil && a.Err.Error() != b.Err.Error())
}

// ask asks broker b of p once how far it is, and returns its new progress;
// an error is fatal to the whole wait (ErrWaitUnsupported). *topics are
// the topics to ask Metadata of; ask narrows them to those still pending.
func (w *waiter) ask(ctx context.Context, b *kgo.Broker, p BrokerProgress, topics *[]string) (BrokerProgress, error) {
	actx, cancel := context.WithTimeout(ctx, w.cfg.ask)
	defer cancel()
	target := w.tok.Offset() // -1 when Unknown: nothing to wait for
	if target < 0 || p.Applied < target {
		applied, err := appliedOffset(actx, b)
		if err != nil {
			p.Err = err
			return p, nil
		}
		p.Err = nil
		p.Applied = max(p.Applied, applied)
		if applied >= 0 && applied < target {
			return p, nil
		}
		if applied < 0 && target >= 0 {
			// Nothing tells when this broker applies tok. That a stamped
			// request is answered proves it only on a KIP-1243 broker, and
			// which brokers are is not known here: the store may hold tok
			// from the cluster's quorum, not from this broker's headers.
			return p, fmt.Errorf("%w: broker %d (%s)", ErrWaitUnsupported, p.Node, p.Addr)
		}
	}
	// The broker has applied tok (its applied offset, asked before, is
	// at or past it; a broker's offset only grows), so what it answers
	// now shows tok's changes: the Metadata needs no token.
	if len(*topics) == 0 {
		p.Done = true
		return p, nil
	}
	// Another broker at this very offset may have shown every topic
	// served already: then so does this one. Only an answer to the whole
	// list can show it (a broker asked for a part of it does not record).
	var mine *servedAt
	if p.Applied >= 0 {
		at, first := w.servedAt(p.Applied, len(*topics) == len(w.cfg.topics))
		switch {
		case first:
			mine = at
		case at != nil:
			select {
			case <-at.done:
			case <-actx.Done():
				return p, nil // the wait's end, or the next ask
			}
			if at.ok {
				p.Err, p.Pending, p.Done = nil, nil, true
				return p, nil
			}
		}
	}
	ok := false
	if mine != nil {
		defer func() {
			mine.ok = ok
			close(mine.done)
		}()
	}
	resp, err := metadata(actx, b, *topics...)
	if err != nil {
		p.Err = err
		return p, nil
	}
	p.Err = nil
	if id := resp.ClusterID; !w.tok.IsUnknown() && id != nil && *id != w.tok.ClusterID() {
		p.Err = fmt.Errorf("factory: broker %d (%s) answers for cluster %q, not %q", p.Node, p.Addr, *id, w.tok.ClusterID())
		return p, nil
	}
	p.Pending = pending(resp, *topics)
	if len(p.Pending) > 0 {
		*topics = pendingTopics(p.Pending)
		return p, nil
	}
	p.Done = true
	if mine != nil {
		// The answer shows the metadata at p.Applied only if the broker
		// is still there: its offset was p.Applied before the question
		// and is at least the answer's after it. One more ApiVersions
		// pins it, for the brokers waiting at that offset.
		if after, err := appliedOffset(actx, b); err == nil && after == p.Applied {
			ok = true
		}
	}
	return p, nil
}

// servedAt returns the record of what was served at applied offset at
// (nil if none), and whether the caller is the first, which it can be
// only with record: then it is to ask, set ok and close done.
func (w *waiter) servedAt(at int64, record bool) (*servedAt, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.served[at]; ok || !record {
		return s, false
	}
	s := &servedAt{done: make(chan struct{})}
	w.served[at] = s
	return s, true
}

// pendingTopics returns the topics that pending names (a topic, or
// "topic/partition": a topic name has no slash), once each, sorted.
func pendingTopics(pending []string) []string {
	out := make([]string, 0, len(pending))
	for _, s := range pending {
		if i := strings.IndexByte(s, '/'); i >= 0 {
			s = s[:i]
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// appliedOffset returns the ApiVersions FinalizedFeaturesEpoch of broker
// b, or -1 when it has none.
func appliedOffset(ctx context.Context, b *kgo.Broker) (int64, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "kconsist"
	req.ClientSoftwareVersion = "wait"
	resp, err := b.Request(ctx, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.ApiVersionsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return -1, err
	}
	if r.Version < 3 || r.FinalizedFeaturesEpoch < 0 {
		return -1, nil
	}
	return r.FinalizedFeaturesEpoch, nil
}

// metadata asks broker b for topics.
func metadata(ctx context.Context, b *kgo.Broker, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = make([]kmsg.MetadataRequestTopic, 0, len(topics))
	for _, t := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := b.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}

// pending returns what a Metadata answer does not serve of topics yet:
// topics it does not know, partitions without a leader. Linear in the
// answer and in topics.
func pending(r *kmsg.MetadataResponse, topics []string) []string {
	var out []string
	seen := make(map[string]bool, len(topics)) // asked: false; answered: true
	for _, t := range topics {
		seen[t] = false
	}
	for _, t := range r.Topics {
		if t.Topic == nil {
			continue
		}
		name := *t.Topic
		if _, asked := seen[name]; !asked {
			continue
		}
		seen[name] = true
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil || len(t.Partitions) == 0 {
			out = append(out, name)
			continue
		}
		for _, part := range t.Partitions {
			if part.Leader < 0 || part.ErrorCode != 0 {
				out = append(out, name+"/"+strconv.Itoa(int(part.Partition)))
			}
		}
	}
	for _, t := range topics {
		if !seen[t] {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
