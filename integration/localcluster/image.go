package localcluster

import (
	"fmt"
	"sort"
)

// Config resource types of ConfigRecord, the DescribeConfigs codes.
const (
	resourceTopic  int8 = 2
	resourceBroker int8 = 4
)

// image is the metadata state a log prefix describes: what a broker that has
// applied the log up to offset knows. The controller keeps one at the log
// end; each broker keeps its own, behind by its lag.
type image struct {
	offset    int64
	clusterID string
	byID      map[[16]byte]*topicImage
	byName    map[string]*topicImage
	// configs of non-topic resources, keyed by type and name.
	configs map[configResource]map[string]string
}

type configResource struct {
	typ  int8
	name string
}

type topicImage struct {
	name       string
	id         [16]byte
	partitions map[int32]*partitionImage
	configs    map[string]string
}

type partitionImage struct {
	leader         int32
	leaderEpoch    int32
	partitionEpoch int32
	replicas       []int32
	isr            []int32
}

func newImage() *image {
	return &image{
		offset:  -1,
		byID:    make(map[[16]byte]*topicImage),
		byName:  make(map[string]*topicImage),
		configs: make(map[configResource]map[string]string),
	}
}

// apply applies one record at offset. The records of the log were made from
// successful mutations, so a record that does not fit the image is a bug of
// the local cluster; it is reported, never panicked on.
func (im *image) apply(offset int64, r MetadataRecord) error {
	im.offset = offset
	switch r := r.(type) {
	case *ClusterIDRecord:
		im.clusterID = r.ClusterID
	case *TopicRecord:
		if old := im.byName[r.Name]; old != nil {
			delete(im.byID, old.id)
		}
		t := &topicImage{name: r.Name, id: r.TopicID, partitions: make(map[int32]*partitionImage), configs: make(map[string]string)}
		im.byID[r.TopicID] = t
		im.byName[r.Name] = t
	case *PartitionRecord:
		t := im.byID[r.TopicID]
		if t == nil {
			return fmt.Errorf("offset %d: partition %d of unknown topic %s", offset, r.PartitionID, uuidString(r.TopicID))
		}
		t.partitions[r.PartitionID] = &partitionImage{
			leader:         r.Leader,
			leaderEpoch:    r.LeaderEpoch,
			partitionEpoch: r.PartitionEpoch,
			replicas:       append([]int32(nil), r.Replicas...),
			isr:            append([]int32(nil), r.ISR...),
		}
	case *PartitionChangeRecord:
		t := im.byID[r.TopicID]
		if t == nil || t.partitions[r.PartitionID] == nil {
			return fmt.Errorf("offset %d: change of unknown partition %s/%d", offset, uuidString(r.TopicID), r.PartitionID)
		}
		p := t.partitions[r.PartitionID]
		if r.Leader != NoLeaderChange {
			p.leader = r.Leader
			p.leaderEpoch++ // Kafka bumps the leader epoch on every leader change
		}
		if r.ISR != nil {
			p.isr = append([]int32(nil), r.ISR...)
		}
		if r.Replicas != nil {
			p.replicas = append([]int32(nil), r.Replicas...)
		}
		p.partitionEpoch++
	case *RemoveTopicRecord:
		t := im.byID[r.TopicID]
		if t == nil {
			return fmt.Errorf("offset %d: removal of unknown topic %s", offset, uuidString(r.TopicID))
		}
		delete(im.byID, t.id)
		if im.byName[t.name] == t {
			delete(im.byName, t.name)
		}
	case *ConfigRecord:
		var m map[string]string
		if r.ResourceType == resourceTopic {
			t := im.byName[r.ResourceName]
			if t == nil {
				return fmt.Errorf("offset %d: config of unknown topic %q", offset, r.ResourceName)
			}
			m = t.configs
		} else {
			key := configResource{r.ResourceType, r.ResourceName}
			if im.configs[key] == nil {
				im.configs[key] = make(map[string]string)
			}
			m = im.configs[key]
		}
		if r.Value == nil {
			delete(m, r.Name)
		} else {
			m[r.Name] = *r.Value
		}
	default:
		return fmt.Errorf("offset %d: unhandled record %T", offset, r)
	}
	return nil
}

// topic looks a topic up by id when id is set, else by name.
func (im *image) topic(name string, id [16]byte) *topicImage {
	if id != ([16]byte{}) {
		return im.byID[id]
	}
	return im.byName[name]
}

// hasPartition reports whether the image knows partition p of the topic.
func (im *image) hasPartition(name string, id [16]byte, p int32) bool {
	t := im.topic(name, id)
	return t != nil && t.partitions[p] != nil
}

func (t *topicImage) sortedPartitions() []int32 {
	ps := make([]int32, 0, len(t.partitions))
	for p := range t.partitions {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

func (im *image) sortedTopics() []*topicImage {
	ts := make([]*topicImage, 0, len(im.byName))
	for _, t := range im.byName {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].name < ts[j].name })
	return ts
}
