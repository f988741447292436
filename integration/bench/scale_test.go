package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/integration/localcluster"
)

// TestKeyCounter: the hook counts requests by key and their bytes, and
// take starts again.
func TestKeyCounter(t *testing.T) {
	k := newKeyCounter()
	k.OnBrokerWrite(kgo.BrokerMetadata{}, int16(kmsg.Metadata), 40, 0, 0, nil)
	k.OnBrokerWrite(kgo.BrokerMetadata{}, int16(kmsg.Metadata), 60, 0, 0, errors.New("written with an error"))
	k.OnBrokerWrite(kgo.BrokerMetadata{}, int16(kmsg.ApiVersions), 10, 0, 0, nil)
	keys, b := k.take()
	require.Equal(t, map[int16]int64{int16(kmsg.Metadata): 2, int16(kmsg.ApiVersions): 1}, keys)
	require.Equal(t, int64(110), b)
	keys, b = k.take()
	require.Empty(t, keys)
	require.Zero(t, b)
}

// TestPhaseCountInternal: what the gateways saw less what the user-facing
// client wrote is the factory's own; ApiVersions split the same way.
func TestPhaseCountInternal(t *testing.T) {
	p := phaseCount{Total: 13, APIVersions: 7, Client: map[int16]int64{int16(kmsg.CreateTopics): 1, int16(kmsg.Metadata): 3, int16(kmsg.ApiVersions): 1}}
	require.Equal(t, int64(8), p.internal())
	require.Equal(t, int64(6), p.internalAPIVersions())
	require.Equal(t, int64(0), phaseCount{}.internal())
}

func metaTopic(name string, code int16, leaders ...int32) kmsg.MetadataResponseTopic {
	t := kmsg.NewMetadataResponseTopic()
	t.Topic = kmsg.StringPtr(name)
	t.ErrorCode = code
	for i, l := range leaders {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition = int32(i)
		p.Leader = l
		t.Partitions = append(t.Partitions, p)
	}
	return t
}

// TestServesTopic: a topic is served when the answer lists it without an
// error, with every partition, each with a leader.
func TestServesTopic(t *testing.T) {
	withPartitionError := metaTopic("a", 0, 0, 1)
	withPartitionError.Partitions[1].ErrorCode = 5 // LEADER_NOT_AVAILABLE
	for _, tc := range []struct {
		name   string
		topics []kmsg.MetadataResponseTopic
		want   bool
	}{
		{"served", []kmsg.MetadataResponseTopic{metaTopic("b", 0, 1, 1), metaTopic("a", 0, 0, 1)}, true},
		{"missing", []kmsg.MetadataResponseTopic{metaTopic("b", 0, 1, 1)}, false},
		{"unknown topic", []kmsg.MetadataResponseTopic{metaTopic("a", 3)}, false},
		{"a partition short", []kmsg.MetadataResponseTopic{metaTopic("a", 0, 0)}, false},
		{"no leader", []kmsg.MetadataResponseTopic{metaTopic("a", 0, 0, -1)}, false},
		{"partition error", []kmsg.MetadataResponseTopic{withPartitionError}, false},
		{"null name", []kmsg.MetadataResponseTopic{{Partitions: metaTopic("a", 0, 0, 1).Partitions}}, false},
	} {
		resp := kmsg.NewPtrMetadataResponse()
		resp.Topics = tc.topics
		require.Equal(t, tc.want, servesTopic(resp, "a", 2), tc.name)
	}
	resp := kmsg.NewPtrMetadataResponse()
	resp.Topics = []kmsg.MetadataResponseTopic{metaTopic("a", 0, 0, 1), metaTopic("b", 0, 1, -1)}
	require.True(t, allLed(resp, []string{"a"}, 2))
	require.False(t, allLed(resp, []string{"a", "b"}, 2))
	require.True(t, allLed(resp, nil, 2))
}

// TestKeysText names keys by their API name, largest count first, and
// leaves out what rounds to nothing.
func TestKeysText(t *testing.T) {
	require.Equal(t, "ApiVersions 6.0, Metadata 3.0, CreateTopics 1.0",
		keysText(map[int16]float64{int16(kmsg.Metadata): 3, int16(kmsg.ApiVersions): 6, int16(kmsg.CreateTopics): 1, int16(kmsg.Produce): 0.01}))
	require.Equal(t, "none", keysText(nil))
}

// TestScaleHelpers: cores busy from CPU per record and throughput, paired
// ratios round by round.
func TestScaleHelpers(t *testing.T) {
	require.InDelta(t, 1.5, coresBusy([]float64{10, 15, 20}, []float64{100000, 100000, 100000}), 1e-9, "15 µs × 100k/s")
	require.Equal(t, []float64{2, 0.5}, pairedRatios([2][]float64{{4, 1, 9}, {2, 2}}))
	require.Equal(t, "1.5 KiB", bytesText(1536))
	require.Equal(t, "2.0 MiB", bytesText(2<<20))
	require.Equal(t, "12 B", bytesText(12))
	require.Equal(t, "3", g1(3))
	require.Equal(t, "2.5", g1(2.5))
}

// TestScalePlan: every curve of both plans has at least two points (a
// curve, not a point), the quick plan's points are among the full plan's,
// and the full plan reaches the sizes the issue asks for.
func TestScalePlan(t *testing.T) {
	full, quick := scalePlan(false), scalePlan(true)
	for _, c := range []struct {
		name        string
		full, quick []int
		reach       int
	}{
		{"brokers", full.Brokers, quick.Brokers, 24},
		{"topics", full.Topics, quick.Topics, 1000},
		{"producers", full.Producers, quick.Producers, 256},
		{"sizes", full.Sizes, quick.Sizes, 10240},
	} {
		require.GreaterOrEqual(t, len(c.quick), 2, c.name)
		require.True(t, slices.IsSorted(c.full), c.name)
		require.Equal(t, c.reach, slices.Max(c.full), c.name)
		for _, x := range c.quick {
			require.Contains(t, c.full, x, c.name)
		}
	}
	require.Equal(t, []int{3, 24}, full.TopicBrokers)
	require.Equal(t, int32(10), full.TopicPartitions)
	require.Equal(t, 100*time.Millisecond, full.PollEvery)
}

// TestPollDescribeAsksEveryTime: the describe-polling workaround sends a
// Metadata request to a broker at every tick. kadm.Metadata would be
// answered from franz-go's metadata cache for MetadataMinAge (5 s) and
// poll nothing; this test's client keeps its cache for an hour, and the
// poll is stopped once the brokers have seen ten more requests, which a
// cached poll never sends.
func TestPollDescribeAsksEveryTime(t *testing.T) {
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Native(false))
	require.NoError(t, err)
	defer lc.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.Addrs()...), kgo.MetadataMinAge(30*time.Minute), kgo.MetadataMaxAge(time.Hour))
	require.NoError(t, err)
	defer cl.Close()
	// The topic is committed but applied by no broker: the poll never ends
	// by itself.
	for node := range int32(3) {
		require.NoError(t, lc.PauseApply(node))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "never", 2, 3
	req.Topics = append(req.Topics, rt)
	_, err = req.RequestWith(ctx, cl)
	require.NoError(t, err)

	before := lc.Stats().Requests
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- pollDescribe(pctx, cl, []string{"never"}, 2, nodeIDs(3), 10*time.Millisecond) }()
	for lc.Stats().Requests < before+10 {
		select {
		case err := <-done:
			t.Fatalf("the poll ended on its own: %v", err)
		case <-ctx.Done():
			t.Fatalf("the brokers saw %d requests of the poll", lc.Stats().Requests-before)
		case <-time.After(5 * time.Millisecond):
		}
	}
	stop()
	require.ErrorIs(t, <-done, context.Canceled)
}

// TestPhaseCountsAgree: for plain kgo, which has no clients of its own
// behind it, what the gateways counted is exactly what its hook counted
// (after a first trial, in which the cluster's own control client also
// connects), so the difference for the factory is the factory's own
// requests. The second reads find every broker showing the topic, and the
// factory reads its own create on every broker.
func TestPhaseCountsAgree(t *testing.T) {
	lc, err := localcluster.New(localcluster.Brokers(3), localcluster.Native(false))
	require.NoError(t, err)
	defer lc.Close()
	av := countAPIVersions(lc)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pk := newKeyCounter()
	cl, err := kgo.NewClient(kgo.SeedBrokers(lc.Addrs()...), kgo.WithHooks(pk))
	require.NoError(t, err)
	pc := scaleClient{name: "plain kgo", kgo: cl, admin: kadm.NewClient(cl), keys: pk, closer: cl.Close}
	defer pc.closer()
	for i, topic := range []string{"warm", "first", "second"} {
		tr, err := createThenRead(ctx, lc, av, pc, topic, 3)
		require.NoError(t, err)
		require.NoError(t, waitAllApplied(ctx, lc, 3))
		require.Equal(t, int64(3), tr.Again.Client[int16(kmsg.Metadata)])
		if i == 0 {
			continue
		}
		for _, p := range []phaseCount{tr.Create, tr.Read, tr.Again} {
			require.Zero(t, p.internal(), "trial %d: %+v", i, p)
		}
		// A create also makes the cluster's own control client connect
		// to kfake (ApiVersions that no gateway sees); reads do not.
		for _, p := range []phaseCount{tr.Read, tr.Again} {
			require.Zero(t, p.internalAPIVersions(), "trial %d: %+v", i, p)
		}
	}

	fc, pc2, err := newScaleClients(lc.Addrs())
	require.NoError(t, err)
	defer fc.closer()
	pc2.closer()
	tr, err := createThenRead(ctx, lc, av, fc, "third", 3)
	require.NoError(t, err)
	require.Zero(t, tr.Stale, "the factory read its own create on every broker")
	require.Equal(t, int64(1), tr.Create.Client[int16(kmsg.CreateTopics)])
}

// requireScaleSection checks the scale step's section of a -quick report:
// every curve has its rows, numbers parse, the factory never reads stale
// and its wait never ends before the last broker applied the create, and
// the charts exist.
func requireScaleSection(t *testing.T, doc, dir string) {
	t.Helper()
	i, j := strings.Index(doc, beginMarker(scaleSection)), strings.Index(doc, endMarker(scaleSection))
	require.True(t, i >= 0 && j > i, "no scale section")
	sec := doc[i:j]
	require.Contains(t, sec, "Machine load (`/proc/loadavg`")
	for _, b := range scalePlan(true).Brokers {
		for _, mode := range []string{"emulated", "native"} {
			row := cells(t, sec, "| "+itoa(b)+" | "+mode+" |")
			require.Greater(t, leading(t, row[2]), 0.0, "requests per create")
			require.Greater(t, leading(t, row[5]), 0.0, "requests for the reads")
			require.True(t, strings.HasPrefix(row[10], "0 / "), "the factory read stale: %q", row[10])
		}
	}
	prod := sec[strings.Index(sec, "### Brokers: producer"):]
	for _, b := range scalePlan(true).Brokers {
		row := cells(t, prod, "| "+itoa(b)+" | ")
		require.Greater(t, leading(t, row[1]), 0.0, "throughput")
		require.Equal(t, "0", row[7], "failed records")
	}
	for _, n := range scalePlan(true).Topics {
		for v, name := range waiterNames {
			row := cells(t, sec, "| 3 | "+itoa(n)+" | "+name+" |")
			require.Equal(t, "1", row[3])
			require.Greater(t, leading(t, row[8]), 0.0, "requests during the wait")
			if v == waitFactory {
				require.Equal(t, "0 of 1", row[12], "WaitApplied ended before the last broker applied the create")
			}
		}
	}
	for m, name := range usableNames {
		row := cells(t, sec, "| "+name+" |")
		require.Equal(t, "1", row[1])
		require.Greater(t, leading(t, row[2]), 0.0, "time to usable")
		if m == usableWait {
			require.Equal(t, "0 (0)", row[7], "the application saw failures after WaitApplied")
		}
	}
	producers := sec[strings.Index(sec, "### Producers per factory"):]
	for _, n := range scalePlan(true).Producers {
		row := cells(t, producers, "| "+itoa(n)+" | ")
		require.Greater(t, leading(t, row[1]), 0.0, "throughput")
		require.Greater(t, leading(t, row[3]), 0.0, "p99")
		require.Equal(t, "0 / 0", row[10], "failed records")
	}
	// A difference of live heaps: on a loaded machine one round can read
	// below zero (memory freed meanwhile), so only its form is checked.
	require.Regexp(t, `\*Heap per 1,000 partitions\*: .* factory -?\d[^,]*, plain kgo -?\d`, producers)
	sizes := sec[strings.Index(sec, "### Record size"):]
	for _, s := range []string{"100 B", "10.0 KiB"} {
		row := cells(t, sizes, "| "+s+" | ")
		for _, c := range row[2:7] {
			require.Greater(t, leading(t, c), 0.0, "%s: %q", s, c)
		}
	}
	for _, png := range []string{"scale_brokers_requests.png", "scale_brokers_producer.png", "scale_topics_wait.png",
		"scale_topics_requests.png", "scale_producers.png", "scale_sizes.png"} {
		st, err := os.Stat(filepath.Join(dir, png))
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(1000), png)
		require.Contains(t, sec, "]("+png+")")
	}
}

func itoa(n int) string { return strings.TrimSpace(g1(float64(n))) }
