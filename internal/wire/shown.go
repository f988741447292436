package wire

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
)

// Tokens without DESCRIBE on CLUSTER.
//
// DescribeQuorum, the one question that names the committed metadata
// offset, needs DESCRIBE on CLUSTER, which an application principal often
// lacks. ApiVersions needs no ACL, so what a broker applied is still known
// and reads stay monotonic (learnApplied, waitFor). What is lost is a
// write's offset; it is found from the write's effect instead: a broker
// that shows the write (lists the created topic, no longer lists the
// deleted one, has the new partition count or config value) has applied
// it, and its applied offset, asked after it showed it, covers the write.
// The Emulator asks every broker in turn until one shows it (askShown),
// within the answer's hold, and owes it afterwards like a write whose
// committed offset was not learnt in time (owe).
//
// Which writes have an effect a broker's answer shows (shownBy): topic
// creations, deletions, partition additions and topic config changes.
// Other metadata writes (ACLs, quotas, SCRAM credentials, features,
// reassignments, leader elections, broker configs) are not covered; the
// Emulator says so once per kind.

// BrokerAsker is an [Oracle] that also puts any request to one broker of
// the cluster. Only with one does an Emulator keep tokens where
// DescribeQuorum is refused (CLUSTER_AUTHORIZATION_FAILED); without, it
// turns the tokens off.
type BrokerAsker interface {
	// Brokers returns the cluster's id and its brokers' node ids.
	Brokers(ctx context.Context) (cluster string, nodes []int32, err error)
	// AskBroker sends req to the broker node and returns its answer.
	AskBroker(ctx context.Context, node int32, req kmsg.Request) (kmsg.Response, error)
}

// shown is how a broker's answer shows that it applied a metadata write.
type shown struct {
	ask   kmsg.Request               // the question to put to a broker
	shows func(r kmsg.Response) bool // whether its answer shows the write
	// floor: the broker must also have applied the store's token at the
	// write's answer. A broker that never applied a topic's creation
	// does not list it either, as one that applied its deletion does not.
	floor bool
}

// shownBy returns how a broker shows the write req, answered resp. It
// returns nil and true when the write changed nothing a broker could
// show (validate only, every item failed), and false when no broker's
// answer shows a write of its kind.
func shownBy(req kmsg.Request, resp kmsg.Response) (*shown, bool) {
	switch q := req.(type) {
	case *kmsg.CreateTopicsRequest:
		return answeredBy(q, resp, createdShown)
	case *kmsg.DeleteTopicsRequest:
		return answeredBy(q, resp, deletedShown)
	case *kmsg.CreatePartitionsRequest:
		return answeredBy(q, resp, partitionsShown)
	case *kmsg.IncrementalAlterConfigsRequest:
		return answeredBy(q, resp, incrementalShown)
	case *kmsg.AlterConfigsRequest:
		return answeredBy(q, resp, alteredShown)
	}
	return nil, false
}

// answeredBy calls fn with q and resp as the answer type R it expects;
// false when resp is not one.
func answeredBy[Q any, R kmsg.Response](q Q, resp kmsg.Response, fn func(Q, R) (*shown, bool)) (*shown, bool) {
	r, ok := resp.(R)
	if !ok {
		return nil, false
	}
	return fn(q, r)
}

// topicsQuestion is a Metadata request for the topics names, which never
// creates one.
func topicsQuestion(names []string) *kmsg.MetadataRequest {
	m := kmsg.NewPtrMetadataRequest()
	m.AllowAutoTopicCreation = false
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		m.Topics = append(m.Topics, t)
	}
	return m
}

// listed returns the topic name of m, or nil.
func listed(m *kmsg.MetadataResponse, name string) *kmsg.MetadataResponseTopic {
	for i := range m.Topics {
		if t := &m.Topics[i]; t.Topic != nil && *t.Topic == name {
			return t
		}
	}
	return nil
}

// topicsShown asks a broker's Metadata for the topics keyed in topics
// and shows the write when every one passes ok (its entry, nil when the
// answer does not list it).
func topicsShown[V any](topics map[string]V, floor bool, ok func(name string, t *kmsg.MetadataResponseTopic) bool) *shown {
	names := sortedKeys(topics)
	return &shown{ask: topicsQuestion(names), floor: floor, shows: func(resp kmsg.Response) bool {
		m, isMeta := resp.(*kmsg.MetadataResponse)
		if !isMeta {
			return false
		}
		for _, n := range names {
			if !ok(n, listed(m, n)) {
				return false
			}
		}
		return true
	}}
}

func createdShown(q *kmsg.CreateTopicsRequest, r *kmsg.CreateTopicsResponse) (*shown, bool) {
	if q.ValidateOnly {
		return nil, true
	}
	ids := map[string][16]byte{}
	for _, t := range r.Topics {
		if t.ErrorCode == 0 {
			ids[t.Topic] = t.TopicID // zero before v7
		}
	}
	if len(ids) == 0 {
		return nil, true
	}
	return topicsShown(ids, false, func(n string, t *kmsg.MetadataResponseTopic) bool {
		return t != nil && t.ErrorCode == 0 && len(t.Partitions) > 0 && (ids[n] == [16]byte{} || t.TopicID == ids[n])
	}), true
}

func deletedShown(_ *kmsg.DeleteTopicsRequest, r *kmsg.DeleteTopicsResponse) (*shown, bool) {
	ids := map[string][16]byte{}
	for _, t := range r.Topics {
		if t.ErrorCode != 0 {
			continue
		}
		if t.Topic == nil {
			return nil, false // deleted by id, and the answer names none
		}
		ids[*t.Topic] = t.TopicID
	}
	if len(ids) == 0 {
		return nil, true
	}
	return topicsShown(ids, true, func(n string, t *kmsg.MetadataResponseTopic) bool {
		switch {
		case t == nil, t.ErrorCode == kerr.UnknownTopicOrPartition.Code:
			return true
		case t.ErrorCode == 0 && ids[n] != [16]byte{} && t.TopicID != ids[n]:
			return true // created again since
		}
		return false
	}), true
}

func partitionsShown(q *kmsg.CreatePartitionsRequest, r *kmsg.CreatePartitionsResponse) (*shown, bool) {
	if q.ValidateOnly {
		return nil, true
	}
	counts := map[string]int{}
	for _, t := range r.Topics {
		if t.ErrorCode != 0 {
			continue
		}
		for _, w := range q.Topics {
			if w.Topic == t.Topic {
				counts[t.Topic] = int(w.Count)
			}
		}
	}
	if len(counts) == 0 {
		return nil, true
	}
	return topicsShown(counts, false, func(n string, t *kmsg.MetadataResponseTopic) bool {
		return t != nil && t.ErrorCode == 0 && len(t.Partitions) >= counts[n]
	}), true
}

// configWant is a topic config value a broker must show: equal to value
// (set), not set on the topic (unset), or a list holding (or not) items.
type configWant struct {
	name  string
	value string
	op    kmsg.IncrementalAlterConfigOp
}

func (w configWant) shownIn(c *kmsg.DescribeConfigsResponseResourceConfig) bool {
	val := ""
	if c.Value != nil {
		val = *c.Value
	}
	switch w.op {
	case kmsg.IncrementalAlterConfigOpSet:
		return c.Value != nil && val == w.value
	case kmsg.IncrementalAlterConfigOpDelete:
		return c.Source != kmsg.ConfigSourceDynamicTopicConfig
	case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
		have := strings.Split(val, ",")
		for _, item := range strings.Split(w.value, ",") {
			if slices.Contains(have, item) != (w.op == kmsg.IncrementalAlterConfigOpAppend) {
				return false
			}
		}
		return true
	}
	return false
}

// configsShown returns how a broker shows the topic configs want: nil
// and true for none; false when a changed resource is not a topic.
func configsShown(want map[string][]configWant) *shown {
	if len(want) == 0 {
		return nil
	}
	ask := kmsg.NewPtrDescribeConfigsRequest()
	for _, topic := range sortedKeys(want) {
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		for _, w := range want[topic] {
			res.ConfigNames = append(res.ConfigNames, w.name)
		}
		ask.Resources = append(ask.Resources, res)
	}
	return &shown{ask: ask, shows: func(resp kmsg.Response) bool {
		d, ok := resp.(*kmsg.DescribeConfigsResponse)
		if !ok {
			return false
		}
		found := 0
		for _, res := range d.Resources {
			ws, ok := want[res.ResourceName]
			if !ok || res.ErrorCode != 0 {
				return false
			}
			for _, w := range ws {
				i := slices.IndexFunc(res.Configs, func(c kmsg.DescribeConfigsResponseResourceConfig) bool { return c.Name == w.name })
				if i < 0 || !w.shownIn(&res.Configs[i]) {
					return false
				}
			}
			found++
		}
		return found == len(want)
	}}
}

// answered is one resource of a config write's answer.
type answered struct {
	typ  kmsg.ConfigResourceType
	name string
	code int16
}

// configWrite returns how a broker shows a config write: for each
// resource of its answer that succeeded, the configs its request changed
// (wants). Nil and true when it changed nothing (validate only, every
// resource failed); false when a changed resource is not a topic, whose
// configs no broker's answer is asked for here.
func configWrite(validateOnly bool, resources []answered, wants func(answered) []configWant) (*shown, bool) {
	if validateOnly {
		return nil, true
	}
	want := map[string][]configWant{}
	for _, res := range resources {
		if res.code != 0 {
			continue
		}
		if res.typ != kmsg.ConfigResourceTypeTopic {
			return nil, false
		}
		want[res.name] = append(want[res.name], wants(res)...)
	}
	return configsShown(want), true
}

func incrementalShown(q *kmsg.IncrementalAlterConfigsRequest, r *kmsg.IncrementalAlterConfigsResponse) (*shown, bool) {
	var resources []answered
	for _, res := range r.Resources {
		resources = append(resources, answered{res.ResourceType, res.ResourceName, res.ErrorCode})
	}
	return configWrite(q.ValidateOnly, resources, func(a answered) (ws []configWant) {
		for _, w := range q.Resources {
			for _, c := range w.Configs {
				if w.ResourceType == a.typ && w.ResourceName == a.name {
					ws = append(ws, configWant{name: c.Name, value: deref(c.Value), op: c.Op})
				}
			}
		}
		return ws
	})
}

// alteredShown: AlterConfigs replaces a resource's configs; a config
// given a value shows it, one given none is not set on the topic.
func alteredShown(q *kmsg.AlterConfigsRequest, r *kmsg.AlterConfigsResponse) (*shown, bool) {
	var resources []answered
	for _, res := range r.Resources {
		resources = append(resources, answered{res.ResourceType, res.ResourceName, res.ErrorCode})
	}
	return configWrite(q.ValidateOnly, resources, func(a answered) (ws []configWant) {
		for _, w := range q.Resources {
			for _, c := range w.Configs {
				if w.ResourceType != a.typ || w.ResourceName != a.name {
					continue
				}
				cw := configWant{name: c.Name, op: kmsg.IncrementalAlterConfigOpDelete}
				if c.Value != nil {
					cw.value, cw.op = *c.Value, kmsg.IncrementalAlterConfigOpSet
				}
				ws = append(ws, cw)
			}
		}
		return ws
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// shownMaxWait bounds how long an owed write (see owe) is looked for on
// the brokers before the Emulator gives up on it: a write undone at once
// (a topic deleted again) is never shown.
const shownMaxWait = 30 * time.Second

// askShown asks every broker in turn, again with a growing pause, until
// one shows the write s and has applied floor, then advances the store to
// what that broker applied, asked after it showed the write. It reports
// whether it did before ctx ended.
func (e *Emulator) askShown(ctx context.Context, s *shown, floor int64) bool {
	asker, ok := e.cfg.Oracle.(BrokerAsker)
	if !ok {
		return false
	}
	pause := pauseMin
	for {
		cluster, nodes, err := asker.Brokers(ctx)
		if err == nil {
			for _, id := range nodes {
				resp, err := asker.AskBroker(ctx, id, s.ask)
				if err != nil || !s.shows(resp) {
					continue
				}
				c, applied, err := e.cfg.Oracle.Applied(ctx, "", id)
				if err != nil || c != cluster || applied < 0 || (s.floor && applied < floor) {
					continue
				}
				if tok, err := consistency.Of(cluster, applied); err == nil {
					e.advance(tok)
					return true
				}
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		pause = min(2*pause, pauseMax)
	}
}

// learnShown holds the answer to a metadata write, in limited mode,
// until a broker shows it (askShown), until end; then the write is owed,
// and looked for on a goroutine of its own for at most shownMaxWait.
func (e *Emulator) learnShown(a *answer, end time.Time) {
	s, ok := shownBy(a.req, a.resp)
	if !ok {
		e.noteUncovered(a.key)
		return
	}
	if s == nil {
		return
	}
	floor := int64(-1)
	if cur := e.cfg.Store.Load(); s.floor && !cur.IsUnknown() {
		floor = cur.Offset()
	}
	ctx, cancel := context.WithDeadline(e.ask.ctx, end)
	found := e.askShown(ctx, s, floor)
	cancel()
	if found {
		e.learnt.Add(1)
		return
	}
	e.owe(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, shownMaxWait)
		defer cancel()
		if e.askShown(ctx, s, floor) {
			e.learnt.Add(1)
		} else if ctx.Err() == context.DeadlineExceeded {
			e.log(kgo.LogLevelWarn, "no broker showed a metadata write within its bound; requests no longer wait for it", "key", a.key, "bound", shownMaxWait)
		}
	})
}

// noteUncovered says once per kind of write, in limited mode, that its
// offset is not learnt: no broker's answer shows it.
func (e *Emulator) noteUncovered(key int16) {
	if _, loaded := e.uncovered.LoadOrStore(key, true); loaded {
		return
	}
	e.log(kgo.LogLevelWarn, "without DESCRIBE on CLUSTER the offset of this kind of metadata write is not learnt: a read right after it may not show it",
		"api", kmsg.NameForKey(key), "grant", grantDescribeCluster)
}

// writeNotes holds a connection's metadata write requests until their
// answers are read, for learnShown: a handful, the oldest overwritten
// (admin writes are few, and one that loses its note is only not
// covered).
type writeNotes struct {
	mu   sync.Mutex
	n    [8]writeNote
	next int
}

type writeNote struct {
	corr int32
	req  kmsg.Request
}

// note decodes the body of a metadata write request of key and version
// and keeps it under corr; a body kmsg cannot read is not kept.
func (w *writeNotes) note(corr int32, key, version int16, body []byte) {
	req := kmsg.RequestForKey(key)
	if req == nil {
		return
	}
	req.SetVersion(version)
	if err := req.ReadFrom(body); err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[w.next%len(w.n)] = writeNote{corr: corr, req: req}
	w.next++
}

// take returns the request kept under corr, and forgets it.
func (w *writeNotes) take(corr int32) kmsg.Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.n {
		if w.n[i].req != nil && w.n[i].corr == corr {
			req := w.n[i].req
			w.n[i] = writeNote{}
			return req
		}
	}
	return nil
}

// limit turns the Emulator to the tokens that need no cluster ACL (see
// shown.go), once: DescribeQuorum was refused.
func (e *Emulator) limit(err error) {
	e.limitOnce.Do(func() {
		e.limited.Store(true)
		// A broker that knows DescribeQuorum well enough to refuse it
		// keeps a metadata log: what it applied makes tokens.
		e.verified.Store(true)
		reason := &describeClusterLimited{err: err}
		e.log(kgo.LogLevelWarn, "consistency tokens are limited: the principal lacks DESCRIBE on CLUSTER", "reason", reason.Error())
		if e.cfg.OnLimited != nil {
			e.cfg.OnLimited(reason)
		}
	})
}

// Limited reports whether the Emulator keeps only the tokens that need no
// cluster ACL.
func (e *Emulator) Limited() bool { return e.limited.Load() }

// grantDescribeCluster is the command that grants what limited mode
// lacks.
const grantDescribeCluster = "kafka-acls.sh --add --allow-principal User:<name> --operation Describe --cluster"

// describeClusterLimited is why the Emulator keeps only the tokens that
// need no cluster ACL: what it still does, what it cannot, and the ACL
// that would let it. It matches the broker's error.
type describeClusterLimited struct{ err error }

func (d *describeClusterLimited) Error() string {
	return "the principal lacks DESCRIBE on CLUSTER, which DescribeQuorum needs (" + d.err.Error() + "); " +
		"consistency tokens are kept from what needs no cluster ACL: reads stay monotonic, and the factory's own topic creations, " +
		"deletions, partition additions and topic config changes are read back (each from the first broker that shows it); " +
		"not covered without it: other metadata writes (ACLs, client quotas, SCRAM credentials, features, partition reassignments, " +
		"leader elections, broker configs), WaitApplied, the committed-offset check of CheckToken and Accept, and healing a token " +
		"beyond the committed offset; grant it with: " + grantDescribeCluster
}

func (d *describeClusterLimited) Unwrap() error { return d.err }

// describeClusterDenied is why the emulation turns off when DescribeQuorum
// is refused: not a limit of the cluster, but an ACL the principal lacks,
// named so that whoever reads it can grant it. It matches
// ErrEmulationUnsupported and the broker's error.
type describeClusterDenied struct{ err error }

func (d *describeClusterDenied) Error() string {
	return "consistency tokens are off: the principal lacks DESCRIBE on CLUSTER, which DescribeQuorum needs (" + d.err.Error() +
		"); read-your-writes and monotonic reads across the factory's clients are off until it is granted " +
		"(kafka-acls.sh --add --allow-principal User:<name> --operation Describe --cluster)"
}

func (d *describeClusterDenied) Unwrap() []error { return []error{ErrEmulationUnsupported, d.err} }

// isAuthorization reports whether err says the principal may not describe
// the quorum (CLUSTER_AUTHORIZATION_FAILED), which no retry changes.
func isAuthorization(err error) bool {
	return errors.Is(err, kerr.ClusterAuthorizationFailed)
}
