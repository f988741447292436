package localcluster

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rule of metadata mutations: a mutation that kfake carries out is committed
// to the metadata log as the records KRaft writes for it, and it is answered
// once the answering broker has applied it, with that broker's applied
// offset in the header (see awaitOwnWrite): at or above the commit offset,
// so the client that made the change can ask every broker to have seen it,
// and never below an earlier answer of the same broker. Mutations are serialized through the
// cluster's mutation lock from forwarding to commit, so the log orders them
// as kfake applied them.

func init() {
	handlers[19] = handleMutation(recordCreateTopics, completeCreatedTopics)
	handlers[20] = handleMutation(recordDeleteTopics, nil)
	handlers[37] = handleMutation(recordCreatePartitions, nil)
	handlers[33] = handleMutation(recordAlterConfigs, nil)
	handlers[44] = handleMutation(recordIncrementalAlterConfigs, nil)
}

// recorder turns a mutation's response into its records, reading what kfake
// did where the response does not say.
type recorder func(ctx context.Context, c *Cluster, req kmsg.Request, resp kmsg.Response) ([]MetadataRecord, error)

// completer fills in what kfake's answer lacks and Kafka's has, after the
// recorder ran (validate-only answers too).
type completer func(c *Cluster, resp kmsg.Response)

// mutationReadTimeout bounds the reads of kfake state after a mutation.
const mutationReadTimeout = 10 * time.Second

func handleMutation(rec recorder, complete completer) handler {
	return func(cn *conn, x *exchange, frame []byte) ([]byte, error) {
		req, err := x.request()
		if err != nil {
			return nil, err
		}
		c := cn.b.c
		if validateOnly(req) {
			if complete != nil {
				x.post = func(resp kmsg.Response) int64 {
					complete(c, resp)
					return -1
				}
			}
			return frame, nil
		}
		if !c.lockMutation(cn.done) {
			return nil, net.ErrClosed
		}
		x.release = c.unlockMutation
		x.post = func(resp kmsg.Response) int64 {
			token := c.commitMutation(x.key, req, resp, rec)
			if complete != nil {
				complete(c, resp)
			}
			x.done() // the write is in the log: the next mutation may go
			if token < 0 {
				return -1
			}
			if c.readsTokens() && c.cfg.writesOwnBelow {
				if cn.b.appliedOffset() < token {
					c.stats.writesBelow.Add(1)
				}
				return -1 // the broker's own applied offset, maybe below the write
			}
			if !c.readsTokens() || c.cfg.writesAtCommit {
				// Kafka 4.4 answers once the controller committed
				// (its header carries no token); WritesAtCommit too,
				// with the commit offset.
				return token
			}
			cn.awaitOwnWrite(x, resp, token)
			return -1 // the broker's applied offset, at or above the write
		}
		return frame, nil
	}
}

// awaitOwnWrite holds the answer to a committed write until the answering
// broker has applied it (offset token), so the answer's header carries
// that broker's own latest offset, at or above the write: KIP-1243, "After
// handling a request, Kafka servers will include their latest cluster
// metadata offset in the ResponseHeader". The controller's commit offset
// would be above what this broker applied, and its next answer's token
// would be lower. The wait is bounded by WaitMax and the request's own
// timeout; when the bound ends first, each resource the write succeeded on
// is answered REQUEST_TIMED_OUT, the API's own timeout error, never success
// with a token below the write.
func (cn *conn) awaitOwnWrite(x *exchange, resp kmsg.Response, token int64) {
	ctx, cancel := context.WithTimeout(context.Background(), cn.holdBound(x))
	ok := cn.b.waitApplied(ctx, token, cn.done)
	cancel()
	if ok {
		return
	}
	cn.b.c.stats.writeTimeouts.Add(1)
	cn.b.c.cfg.logger.Warn("localcluster: write committed but not applied by the answering broker in time; answering REQUEST_TIMED_OUT",
		"node", cn.b.node, "request", kmsg.NameForKey(x.key), "offset", token, "applied", cn.b.appliedOffset())
	markTimedOut(resp)
}

// markTimedOut sets REQUEST_TIMED_OUT on every entry of the response's
// top-level lists (topics, resources) that has no error.
func markTimedOut(resp kmsg.Response) {
	v := reflect.ValueOf(resp).Elem()
	msg := "the answering broker had not applied the write within the request's timeout"
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		for k := 0; k < f.Len(); k++ {
			e := f.Index(k)
			code := e.FieldByName("ErrorCode")
			if !code.IsValid() || code.Kind() != reflect.Int16 || code.Int() != 0 {
				continue
			}
			code.SetInt(int64(kerr.RequestTimedOut.Code))
			if m := e.FieldByName("ErrorMessage"); m.IsValid() && m.Type() == reflect.TypeOf((*string)(nil)) {
				m.Set(reflect.ValueOf(&msg))
			}
		}
	}
}

// commitMutation commits the records of a mutation kfake answered and
// returns the commit offset, or -1 when nothing was committed.
func (c *Cluster) commitMutation(key int16, req kmsg.Request, resp kmsg.Response, rec recorder) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), mutationReadTimeout)
	defer cancel()
	rs, err := rec(ctx, c, req, resp)
	if err == nil && len(rs) > 0 {
		err = c.commit(rs...)
	}
	if err != nil {
		c.cfg.logger.Error("localcluster: mutation done by kfake but not committed to the metadata log", "request", kmsg.NameForKey(key), "err", err)
		return -1
	}
	if len(rs) == 0 {
		return -1
	}
	return c.log.end()
}

func validateOnly(req kmsg.Request) bool {
	switch r := req.(type) {
	case *kmsg.CreateTopicsRequest:
		return r.ValidateOnly
	case *kmsg.CreatePartitionsRequest:
		return r.ValidateOnly
	case *kmsg.AlterConfigsRequest:
		return r.ValidateOnly
	case *kmsg.IncrementalAlterConfigsRequest:
		return r.ValidateOnly
	}
	return false
}

func recordCreateTopics(ctx context.Context, c *Cluster, _ kmsg.Request, r kmsg.Response) ([]MetadataRecord, error) {
	var names []string
	for _, t := range r.(*kmsg.CreateTopicsResponse).Topics {
		if t.ErrorCode == 0 {
			names = append(names, t.Topic)
		}
	}
	return c.topicCreationRecords(ctx, names)
}

// completeCreatedTopics answers a created topic (v5+) as Kafka does: with
// every config of the topic, each with its source. kfake lists only the
// keys the request set, with no source (-1), and no list at all (null) for
// a topic created without configs; the Java client's Admin fails on both.
func completeCreatedTopics(c *Cluster, r kmsg.Response) {
	resp := r.(*kmsg.CreateTopicsResponse)
	if resp.Version < 5 {
		return
	}
	defaults := c.topicDefaults()
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.ErrorCode != 0 {
			continue
		}
		set := make(map[string]bool, len(t.Configs))
		configs := make([]kmsg.CreateTopicsResponseTopicConfig, 0, len(t.Configs)+len(defaults))
		for _, e := range t.Configs {
			set[e.Name] = true
			e.Source = int8(kmsg.ConfigSourceDynamicTopicConfig)
			configs = append(configs, e)
		}
		for k, v := range defaults {
			if !set[k] {
				e := kmsg.NewCreateTopicsResponseTopicConfig()
				e.Name, e.Value, e.Source = k, kmsg.StringPtr(v), int8(kmsg.ConfigSourceDefaultConfig)
				configs = append(configs, e)
			}
		}
		sort.Slice(configs, func(i, j int) bool { return configs[i].Name < configs[j].Name })
		t.Configs = configs
	}
}

func recordDeleteTopics(_ context.Context, c *Cluster, _ kmsg.Request, r kmsg.Response) ([]MetadataRecord, error) {
	var rs []MetadataRecord
	for _, t := range r.(*kmsg.DeleteTopicsResponse).Topics {
		if t.ErrorCode != 0 {
			continue
		}
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		}
		if ti := c.ctrl.topic(name, t.TopicID); ti != nil {
			rs = append(rs, &RemoveTopicRecord{V: 1, TopicID: ti.id})
		}
	}
	return rs, nil
}

func recordCreatePartitions(ctx context.Context, c *Cluster, _ kmsg.Request, r kmsg.Response) ([]MetadataRecord, error) {
	var names []string
	for _, t := range r.(*kmsg.CreatePartitionsResponse).Topics {
		if t.ErrorCode == 0 {
			names = append(names, t.Topic)
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	meta, err := c.kfakeMetadata(ctx, names)
	if err != nil {
		return nil, err
	}
	var rs []MetadataRecord
	for _, t := range meta.Topics {
		ti := c.ctrl.byName[*t.Topic]
		if t.ErrorCode != 0 || ti == nil || ti.id != t.TopicID {
			continue
		}
		for _, p := range sortedMetaPartitions(t) {
			if ti.partitions[p.Partition] == nil {
				rs = append(rs, partitionRecord(t.TopicID, p))
			}
		}
	}
	return rs, nil
}

func recordAlterConfigs(ctx context.Context, c *Cluster, _ kmsg.Request, r kmsg.Response) ([]MetadataRecord, error) {
	var res []configResource
	for _, rr := range r.(*kmsg.AlterConfigsResponse).Resources {
		if rr.ErrorCode == 0 {
			res = append(res, configResource{int8(rr.ResourceType), rr.ResourceName})
		}
	}
	return c.configChangeRecords(ctx, res)
}

func recordIncrementalAlterConfigs(ctx context.Context, c *Cluster, _ kmsg.Request, r kmsg.Response) ([]MetadataRecord, error) {
	var res []configResource
	for _, rr := range r.(*kmsg.IncrementalAlterConfigsResponse).Resources {
		if rr.ErrorCode == 0 {
			res = append(res, configResource{int8(rr.ResourceType), rr.ResourceName})
		}
	}
	return c.configChangeRecords(ctx, res)
}

// topicCreationRecords reads new topics from kfake: TopicRecord, one
// PartitionRecord per partition, one ConfigRecord per config set on it.
func (c *Cluster) topicCreationRecords(ctx context.Context, names []string) ([]MetadataRecord, error) {
	if len(names) == 0 {
		return nil, nil
	}
	meta, err := c.kfakeMetadata(ctx, names)
	if err != nil {
		return nil, err
	}
	configs, err := c.kfakeDynamicConfigs(ctx, resourceTopic, names)
	if err != nil {
		return nil, err
	}
	var rs []MetadataRecord
	for _, t := range meta.Topics {
		if t.ErrorCode != 0 || t.Topic == nil {
			return nil, fmt.Errorf("created topic %v unknown to kfake: %w", t.Topic, kerr.ErrorForCode(t.ErrorCode))
		}
		rs = append(rs, &TopicRecord{V: 1, Name: *t.Topic, TopicID: t.TopicID})
		for _, p := range sortedMetaPartitions(t) {
			rs = append(rs, partitionRecord(t.TopicID, p))
		}
		cfg := configs[*t.Topic]
		for _, k := range sortedKeys(cfg) {
			v := cfg[k]
			rs = append(rs, &ConfigRecord{V: 1, ResourceType: resourceTopic, ResourceName: *t.Topic, Name: k, Value: &v})
		}
	}
	return rs, nil
}

// configChangeRecords diffs the dynamic configs kfake now has for each
// resource against the controller image.
func (c *Cluster) configChangeRecords(ctx context.Context, res []configResource) ([]MetadataRecord, error) {
	var rs []MetadataRecord
	for _, r := range res {
		now, err := c.kfakeDynamicConfigs(ctx, r.typ, []string{r.name})
		if err != nil {
			return nil, err
		}
		var before map[string]string
		if r.typ == resourceTopic {
			t := c.ctrl.byName[r.name]
			if t == nil {
				continue
			}
			before = t.configs
		} else {
			before = c.ctrl.configs[r]
		}
		after := now[r.name]
		for _, k := range sortedKeys(after) {
			if old, ok := before[k]; !ok || old != after[k] {
				v := after[k]
				rs = append(rs, &ConfigRecord{V: 1, ResourceType: r.typ, ResourceName: r.name, Name: k, Value: &v})
			}
		}
		for _, k := range sortedKeys(before) {
			if _, ok := after[k]; !ok {
				rs = append(rs, &ConfigRecord{V: 1, ResourceType: r.typ, ResourceName: r.name, Name: k})
			}
		}
	}
	return rs, nil
}

func (c *Cluster) kfakeMetadata(ctx context.Context, names []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range names {
		t := kmsg.NewMetadataRequestTopic()
		t.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, c.direct)
	if err != nil {
		return nil, fmt.Errorf("reading metadata from kfake: %w", err)
	}
	return resp, nil
}

// kfakeDynamicConfigs returns the configs set on the resources (not
// defaults), and learns topic defaults on the way.
func (c *Cluster) kfakeDynamicConfigs(ctx context.Context, typ int8, names []string) (map[string]map[string]string, error) {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, n := range names {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceType(typ)
		r.ResourceName = n
		req.Resources = append(req.Resources, r)
	}
	resp, err := req.RequestWith(ctx, c.direct)
	if err != nil {
		return nil, fmt.Errorf("reading configs from kfake: %w", err)
	}
	out := make(map[string]map[string]string)
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			return nil, fmt.Errorf("reading configs of %q from kfake: %w", r.ResourceName, err)
		}
		if typ == resourceTopic {
			c.learnDefaults(r.Configs)
		}
		m := make(map[string]string)
		for _, e := range r.Configs {
			if e.Value == nil {
				continue
			}
			switch e.Source {
			case kmsg.ConfigSourceDynamicTopicConfig, kmsg.ConfigSourceDynamicBrokerConfig, kmsg.ConfigSourceDynamicDefaultBrokerConfig:
				m[e.Name] = *e.Value
			}
		}
		out[r.ResourceName] = m
	}
	return out, nil
}

func sortedMetaPartitions(t kmsg.MetadataResponseTopic) []kmsg.MetadataResponseTopicPartition {
	ps := append([]kmsg.MetadataResponseTopicPartition(nil), t.Partitions...)
	sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
	return ps
}

func partitionRecord(id [16]byte, p kmsg.MetadataResponseTopicPartition) *PartitionRecord {
	return &PartitionRecord{
		V:              1,
		PartitionID:    p.Partition,
		TopicID:        id,
		Replicas:       append([]int32{}, p.Replicas...),
		ISR:            append([]int32{}, p.ISR...),
		Leader:         p.Leader,
		LeaderEpoch:    p.LeaderEpoch,
		PartitionEpoch: p.LeaderEpoch,
	}
}

// MovePartition moves the leadership of a partition to node in kfake and
// commits the PartitionChangeRecord, so brokers learn the new leader as they
// apply it. It returns the commit offset.
func (c *Cluster) MovePartition(ctx context.Context, topic string, partition, node int32) (int64, error) {
	if _, err := c.broker(node); err != nil {
		return -1, err
	}
	if !c.lockMutation(ctx.Done()) {
		return -1, fmt.Errorf("localcluster: MovePartition: %w", context.Cause(ctx))
	}
	defer c.unlockMutation()
	t := c.ctrl.byName[topic]
	if t == nil || t.partitions[partition] == nil {
		return -1, fmt.Errorf("localcluster: MovePartition: %w: %s/%d", kerr.UnknownTopicOrPartition, topic, partition)
	}
	if err := c.kf.MoveTopicPartition(topic, partition, node); err != nil {
		return -1, fmt.Errorf("localcluster: MovePartition %s/%d to %d: %w", topic, partition, node, err)
	}
	rec := &PartitionChangeRecord{PartitionID: partition, TopicID: t.id, Leader: node}
	if err := c.commit(rec); err != nil {
		return -1, err
	}
	return c.log.end(), nil
}
