package localcluster

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/kconsist/kconsist/internal/testkit"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// brokerMetadata asks one broker, by node id, through a plain kgo client.
func brokerMetadata(t *testing.T, cl *kgo.Client, node int32, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, tp := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(tp)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := cl.Broker(int(node)).Request(testkit.Ctx(t), req)
	require.NoError(t, err)
	return resp.(*kmsg.MetadataResponse)
}

// Plain clients (no token) work unchanged through the gateways: admin,
// produce, and consume in a group.
func TestPlainClientsAreServed(t *testing.T) {
	c := newCluster(t, Brokers(3))
	ctx := testkit.Ctx(t)
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	_, err := adm.CreateTopic(ctx, 3, 1, nil, "plain")
	require.NoError(t, err)
	// Gateways advertise only themselves.
	md, err := adm.BrokerMetadata(ctx)
	require.NoError(t, err)
	for _, b := range md.Brokers {
		require.Equal(t, c.Addrs()[b.NodeID], fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	for node := range int32(3) {
		require.NoError(t, c.WaitApplied(ctx, node, c.LogEnd()))
	}

	prod := newClient(t, c.Addrs(), kgo.DefaultProduceTopic("plain"))
	for i := range 30 {
		require.NoError(t, prod.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr())
	}
	cons := newClient(t, c.Addrs(), kgo.ConsumeTopics("plain"), kgo.ConsumerGroup("g"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := 0
	for seen < 30 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		seen += fs.NumRecords()
	}
	require.Equal(t, 30, seen)
	require.NoError(t, cons.CommitUncommittedOffsets(ctx))
	offs, err := adm.FetchOffsets(ctx, "g")
	require.NoError(t, err)
	total := int64(0)
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	require.Equal(t, int64(30), total)
	require.Zero(t, c.Stats().ClosedMalformed)
}

// Plain kgo/kadm clients hit stale reads on a lagging broker, exactly the
// anomaly KIP-1243 removes: a created topic is missing, produce to it fails,
// a deleted topic lingers, old partition counts and config values show.
func TestPlainClientsSeeStaleReads(t *testing.T) {
	c := newCluster(t, Brokers(3))
	ctx := testkit.Ctx(t)
	const lagging = 0
	cl := newClient(t, c.Addrs())
	adm := kadm.NewClient(cl)
	_, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": kmsg.StringPtr("1000")}, "old")
	require.NoError(t, err)
	require.NoError(t, c.WaitApplied(ctx, lagging, c.LogEnd()))

	require.NoError(t, c.PauseApply(lagging))
	_, err = adm.CreateTopic(ctx, 2, 1, nil, "fresh")
	require.NoError(t, err)
	// The writes' own answers are checked: plain kadm looks the topic up
	// first, and a rare stale lookup fails the write (it is retried, as a
	// plain client's user must).
	for start := time.Now(); ; {
		grown, err := adm.CreatePartitions(ctx, 2, "old")
		require.NoError(t, err)
		if err = grown.Error(); err == nil || time.Since(start) > 5*time.Second {
			require.NoError(t, err, "CreatePartitions")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Sent to an up-to-date broker: a write is answered once the
	// answering broker applied it, which the lagging one never does here.
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iacr := kmsg.NewIncrementalAlterConfigsRequestResource()
	iacr.ResourceType, iacr.ResourceName = kmsg.ConfigResourceTypeTopic, "old"
	iacc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	iacc.Name, iacc.Value = "retention.ms", kmsg.StringPtr("2000")
	iacr.Configs = append(iacr.Configs, iacc)
	iac.Resources = append(iac.Resources, iacr)
	altered, err := cl.Broker(1).Request(ctx, iac)
	require.NoError(t, err)
	require.Zero(t, altered.(*kmsg.IncrementalAlterConfigsResponse).Resources[0].ErrorCode, "AlterConfigs")
	for _, node := range []int32{1, 2} {
		require.NoError(t, c.WaitApplied(ctx, node, c.LogEnd()))
	}

	// Metadata: the up-to-date broker knows "fresh" and 3 partitions of
	// "old"; the lagging one does not.
	require.Equal(t, map[string]int{"fresh": 2, "old": 3}, topicNames(brokerMetadata(t, cl, 1)))
	require.Equal(t, map[string]int{"old": 1}, topicNames(brokerMetadata(t, cl, lagging)))
	stale := brokerMetadata(t, cl, lagging, "fresh")
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, stale.Topics[0].ErrorCode)

	// DescribeConfigs on the lagging broker shows the old value.
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dcr := kmsg.NewDescribeConfigsRequestResource()
	dcr.ResourceType, dcr.ResourceName, dcr.ConfigNames = kmsg.ConfigResourceTypeTopic, "old", []string{"retention.ms"}
	dc.Resources = append(dc.Resources, dcr)
	for node, want := range map[int32]string{lagging: "1000", 1: "2000"} {
		resp, err := cl.Broker(int(node)).Request(ctx, dc)
		require.NoError(t, err)
		cfgs := resp.(*kmsg.DescribeConfigsResponse).Resources[0].Configs
		require.Len(t, cfgs, 1)
		require.Equal(t, want, *cfgs[0].Value, "node %d", node)
	}

	// Produce to the lagging broker: UNKNOWN_TOPIC_OR_PARTITION.
	leader := brokerMetadata(t, cl, 1, "fresh").Topics[0].Partitions[0].Leader
	pr := kmsg.NewPtrProduceRequest()
	pr.Acks, pr.TimeoutMillis = -1, 5000
	prt := kmsg.NewProduceRequestTopic()
	prt.Topic = "fresh"
	prt.Partitions = append(prt.Partitions, kmsg.NewProduceRequestTopicPartition())
	pr.Topics = append(pr.Topics, prt)
	resp, err := cl.Broker(lagging).Request(ctx, pr)
	require.NoError(t, err)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode)
	_ = leader

	// Deleted topics linger on the lagging broker until it applies.
	require.NoError(t, c.ResumeApply(lagging))
	require.NoError(t, c.WaitApplied(ctx, lagging, c.LogEnd()))
	require.NoError(t, c.PauseApply(lagging))
	_, err = adm.DeleteTopic(ctx, "old")
	require.NoError(t, err)
	require.NoError(t, c.WaitApplied(ctx, 1, c.LogEnd()))
	require.Equal(t, map[string]int{"fresh": 2}, topicNames(brokerMetadata(t, cl, 1)))
	require.Equal(t, map[string]int{"fresh": 2, "old": 3}, topicNames(brokerMetadata(t, cl, lagging)))
	require.NoError(t, c.ResumeApply(lagging))
	require.NoError(t, c.WaitApplied(ctx, lagging, c.LogEnd()))
	require.Equal(t, map[string]int{"fresh": 2}, topicNames(brokerMetadata(t, cl, lagging)))
	require.Positive(t, c.Stats().StaleAnswers)
}

// A producer whose partition leader lags sees its records fail until the
// leader applies the topic, and succeed after.
func TestPlainProducerFailsOnLaggingLeader(t *testing.T) {
	c := newCluster(t, Brokers(1), WaitMax(200*time.Millisecond))
	ctx := testkit.Ctx(t)
	require.NoError(t, c.PauseApply(0))
	adm := kadm.NewClient(newClient(t, c.Addrs()))
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "p")
	// Committed, but the only broker (which answers) has not applied it.
	require.ErrorIs(t, err, kerr.RequestTimedOut)
	require.Equal(t, int64(1), c.Stats().WriteTimeouts)

	prod := newClient(t, c.Addrs(), kgo.DefaultProduceTopic("p"), kgo.RecordDeliveryTimeout(time.Second),
		kgo.MetadataMinAge(10*time.Millisecond), kgo.RecordRetries(2))
	err = prod.ProduceSync(ctx, kgo.StringRecord("x")).FirstErr()
	require.Error(t, err, "the only broker has not applied the topic")
	require.NoError(t, c.ResumeApply(0))
	require.NoError(t, c.WaitApplied(ctx, 0, c.LogEnd()))
	prod2 := newClient(t, c.Addrs(), kgo.DefaultProduceTopic("p"))
	require.NoError(t, prod2.ProduceSync(ctx, kgo.StringRecord("y")).FirstErr())
}

// Pause and resume are exact: a paused broker stays at its offset however
// many commits follow, and resumes to the end.
func TestPauseResumeAndLag(t *testing.T) {
	c := newCluster(t, Brokers(3), BrokerLag(2, time.Hour))
	ctx := testkit.Ctx(t)
	require.NoError(t, c.PauseApply(1))
	r := dialRaw(t, c.Addrs()[2])
	for i := range 5 {
		r.do(createTopicsReq(1, nil, fmt.Sprintf("t%d", i)), nil)
	}
	end := c.LogEnd()
	require.NoError(t, c.WaitApplied(ctx, 0, end))
	for node, want := range map[int32]int64{1: 0, 2: 0} {
		got, err := c.AppliedOffset(node)
		require.NoError(t, err)
		require.Equal(t, want, got, "node %d", node)
	}
	require.NoError(t, c.ResumeApply(1))
	require.NoError(t, c.WaitApplied(ctx, 1, end))
	require.NoError(t, c.SetLag(2, 0))
	require.NoError(t, c.WaitApplied(ctx, 2, end))

	// Lag applies from commit time: with 50ms lag, the broker has not
	// applied at once, and has after waiting.
	require.NoError(t, c.SetLag(0, 50*time.Millisecond))
	start := time.Now()
	r.do(createTopicsReq(1, nil, "late"), nil)
	require.NoError(t, c.WaitApplied(ctx, 0, c.LogEnd()))
	require.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)

	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	require.NoError(t, c.PauseApply(0))
	r.do(createTopicsReq(1, nil, "later"), nil)
	require.ErrorIs(t, c.WaitApplied(wctx, 0, c.LogEnd()), context.DeadlineExceeded)

	_, err := c.AppliedOffset(7)
	require.ErrorIs(t, err, ErrNoSuchBroker)
	require.ErrorIs(t, c.PauseApply(-1), ErrNoSuchBroker)
	require.Error(t, c.SetLag(0, -time.Second))
}

// A gateway repointed to another cluster's broker makes kfake's KIP-1242
// ApiVersions check answer REBOOTSTRAP_REQUIRED to a kgo client.
func TestRepointMisroutes(t *testing.T) {
	a := newCluster(t, Brokers(2), ClusterID("cluster-a"))
	b := newCluster(t, Brokers(2), ClusterID("cluster-b"))
	ctx := testkit.Ctx(t)
	rebootstrapped := make(chan struct{}, 1)
	cl := newClient(t, []string{a.Addrs()[0]}, kgo.OnRebootstrapRequired(func() ([]string, error) {
		select {
		case rebootstrapped <- struct{}{}:
		default:
		}
		return []string{a.Addrs()[0]}, nil
	}))
	require.NoError(t, cl.Ping(ctx))
	brokerMetadata(t, cl, 0) // learn the cluster and its brokers

	require.NoError(t, a.Repoint(1, b, 0))
	_, err := cl.Broker(1).Request(ctx, kmsg.NewPtrMetadataRequest())
	require.Error(t, err, "the misrouted connection is refused")
	select {
	case <-rebootstrapped:
	case <-ctx.Done():
		t.Fatal("no REBOOTSTRAP_REQUIRED")
	}
	require.Positive(t, b.Stats().RebootstrapRequired, "counted by the cluster that answered")
	require.Zero(t, a.Stats().RebootstrapRequired)

	// Pointed back, node 1 serves again.
	require.NoError(t, a.Repoint(1, a, 1))
	eventually(t, "node 1 to serve again", func() bool {
		_, err := cl.Broker(1).Request(ctx, kmsg.NewPtrMetadataRequest())
		return err == nil
	})
	require.ErrorIs(t, a.Repoint(5, b, 0), ErrNoSuchBroker)
	require.ErrorIs(t, a.Repoint(0, b, 5), ErrNoSuchBroker)
}

// Many concurrent clients through the gateways: no deadlock, no leak.
func TestManyClientsNoLeak(t *testing.T) {
	base := runtime.NumGoroutine()
	c, err := New(Brokers(3), Lag(2*time.Millisecond), SeedTopics(3, "busy"))
	require.NoError(t, err)
	ctx := testkit.Ctx(t)

	const clients = 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("busy"))
			if err != nil {
				errs <- err
				return
			}
			defer cl.Close()
			for j := range 5 {
				if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i, j))).FirstErr(); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
			}
			// Raw requests with tokens too, half of them waiting on a lag.
			r, err := dialRawNoCleanup(c.Addrs()[i%3])
			if err != nil {
				errs <- err
				return
			}
			defer r.conn.Close()
			if i%10 == 0 {
				r2, err := dialRawNoCleanup(c.Addrs()[2]) // the controller
				if err != nil {
					errs <- err
					return
				}
				defer r2.conn.Close()
				if _, _, err := r2.roundTrip(createTopicsReq(1, nil, fmt.Sprintf("c%d", i)), nil); err != nil {
					errs <- err
				}
			}
			resp, _, err := r.roundTrip(metadataReq("busy"), &headerState{token: c.LogEnd()})
			if err != nil {
				errs <- err
				return
			}
			if code := resp.(*kmsg.MetadataResponse).Topics[0].ErrorCode; code != 0 {
				errs <- fmt.Errorf("client %d: metadata error %d", i, code)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.GreaterOrEqual(t, c.Stats().Connections, int64(clients))
	c.Close()
	eventually(t, "goroutines back to baseline", func() bool { return runtime.NumGoroutine() <= base })
}

func TestOptionErrors(t *testing.T) {
	for _, tc := range []struct {
		opt  Opt
		want string
	}{
		{Brokers(0), "Brokers(0)"},
		{Lag(-1), "Lag(-1ns)"},
		{BrokerLag(0, -1), "BrokerLag(0, -1ns)"},
		{BrokerLag(9, 1), "BrokerLag(9"},
		{ClusterID(""), "ClusterID"},
		{WaitMax(0), "WaitMax(0s)"},
		{IdleTimeout(-time.Second), "IdleTimeout(-1s)"},
		{InconsistentMetadataCode(5), "InconsistentMetadataCode(5)"},
		{Logger(nil), "Logger(nil)"},
		{SeedTopics(0, "x"), "SeedTopics(0"},
		{BehindAnswer(7), "BehindAnswer(Behind(7))"},
		{InconsistentTokenIs(-1), "InconsistentTokenIs(InconsistentToken(-1))"},
		{WriteAnswers(5), "WriteAnswers(5)"},
	} {
		_, err := New(Brokers(1), tc.opt)
		require.ErrorContains(t, err, tc.want)
	}
}
