package localcluster

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Rule of DescribeConfigs: topic configs are shown as the broker's image has
// them. A key set after the broker's offset shows its default, when kfake has
// ever reported that default, and is left out otherwise; a key removed after
// it still shows the old value. Synonyms are Kafka's (see setSynonyms).
// Broker resources pass through.

func init() { handlers[32] = handleDescribeConfigs }

func handleDescribeConfigs(cn *conn, x *exchange, frame []byte) ([]byte, error) {
	r, err := x.request()
	if err != nil {
		return nil, err
	}
	req := r.(*kmsg.DescribeConfigsRequest)
	x.post = func(r kmsg.Response) int64 {
		resp := r.(*kmsg.DescribeConfigsResponse)
		var token int64
		cn.b.view(func(im *image) {
			token = im.offset
			for i := range resp.Resources {
				res := &resp.Resources[i]
				if res.ResourceType != kmsg.ConfigResourceTypeTopic {
					continue
				}
				var names []string
				for _, rr := range req.Resources {
					if rr.ResourceType == res.ResourceType && rr.ResourceName == res.ResourceName {
						names = rr.ConfigNames
					}
				}
				if cn.renderTopicConfigs(im, res, names) {
					cn.b.c.stats.stale.Add(1)
				}
				if res.ErrorCode == 0 {
					cn.b.c.setSynonyms(res, req.IncludeSynonyms)
				}
			}
		})
		return token
	}
	return frame, nil
}

// renderTopicConfigs rewrites one topic resource from the image and reports
// whether the answer differs from kfake's.
func (cn *conn) renderTopicConfigs(im *image, res *kmsg.DescribeConfigsResponseResource, names []string) bool {
	c := cn.b.c
	if res.ErrorCode == 0 {
		c.learnDefaults(res.Configs)
	}
	switch res.ErrorCode {
	case 0, kerr.UnknownTopicOrPartition.Code:
	default:
		return false
	}
	wanted := func(k string) bool {
		if names == nil {
			return true
		}
		for _, n := range names {
			if n == k {
				return true
			}
		}
		return false
	}
	t := im.byName[res.ResourceName]
	if t == nil {
		if res.ErrorCode == 0 {
			res.ErrorCode = kerr.UnknownTopicOrPartition.Code
			res.Configs = nil
			return true
		}
		return false
	}
	changed := res.ErrorCode != 0
	res.ErrorCode = 0
	res.ErrorMessage = nil
	seen := make(map[string]bool, len(res.Configs))
	keep := res.Configs[:0]
	for _, e := range res.Configs {
		seen[e.Name] = true
		if v, ok := t.configs[e.Name]; ok {
			if e.Source != kmsg.ConfigSourceDynamicTopicConfig || e.Value == nil || *e.Value != v {
				changed = true
				e = dynamicEntry(e, v)
			}
			keep = append(keep, e)
			continue
		}
		if e.Source == kmsg.ConfigSourceDynamicTopicConfig {
			changed = true // set after this broker's offset
			def, ok := c.topicDefault(e.Name)
			if !ok {
				continue
			}
			e.Value = kmsg.StringPtr(def)
			e.Source = kmsg.ConfigSourceDefaultConfig
			e.IsDefault = true
			e.ConfigSynonyms = nil
		}
		keep = append(keep, e)
	}
	res.Configs = keep
	for _, k := range sortedKeys(t.configs) {
		if !seen[k] && wanted(k) {
			changed = true
			e := kmsg.NewDescribeConfigsResponseResourceConfig()
			e.Name = k
			res.Configs = append(res.Configs, dynamicEntry(e, t.configs[k]))
		}
	}
	return changed
}

func dynamicEntry(e kmsg.DescribeConfigsResponseResourceConfig, v string) kmsg.DescribeConfigsResponseResourceConfig {
	e.Value = kmsg.StringPtr(v)
	e.Source = kmsg.ConfigSourceDynamicTopicConfig
	e.IsDefault = false
	e.ReadOnly = false
	e.ConfigSynonyms = nil
	return e
}

// setSynonyms gives a topic's configs the synonyms Kafka sends: none unless
// the request asks for them (v1+), and then the entry itself first,
// followed by the default a topic value overrides. kfake sends the
// overridden values whether asked or not, and never the entry itself.
func (c *Cluster) setSynonyms(res *kmsg.DescribeConfigsResponseResource, include bool) {
	for i := range res.Configs {
		e := &res.Configs[i]
		e.ConfigSynonyms = nil
		if !include {
			continue
		}
		self := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		self.Name, self.Value, self.Source = e.Name, e.Value, e.Source
		e.ConfigSynonyms = append(e.ConfigSynonyms, self)
		if e.Source != kmsg.ConfigSourceDynamicTopicConfig {
			continue
		}
		if def, ok := c.topicDefault(e.Name); ok {
			syn := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			syn.Name, syn.Value, syn.Source = e.Name, kmsg.StringPtr(def), kmsg.ConfigSourceDefaultConfig
			e.ConfigSynonyms = append(e.ConfigSynonyms, syn)
		}
	}
}

// learnDefaults learns the topic config defaults kfake reports, which are
// the same for every topic: the values of keys the topic does not set, and
// the synonyms of those it does.
func (c *Cluster) learnDefaults(configs []kmsg.DescribeConfigsResponseResourceConfig) {
	for _, e := range configs {
		if e.Source != kmsg.ConfigSourceDynamicTopicConfig && e.Value != nil {
			c.learnDefault(e.Name, *e.Value)
		}
		for _, syn := range e.ConfigSynonyms {
			if syn.Source == kmsg.ConfigSourceDefaultConfig && syn.Name == e.Name && syn.Value != nil {
				c.learnDefault(syn.Name, *syn.Value)
			}
		}
	}
}
