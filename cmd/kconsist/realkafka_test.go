package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// trial is what a plain franz-go client saw right after one create.
type trial struct {
	stale     int           // first direct Metadata answers without the topic or a leader
	errs      int           // describe or produce errors
	javaStale int           // the Java client's describes that failed
	javaErrs  int           // the Java client's produce errors
	wait      time.Duration // the command's own wait (waited_ms)
	command   time.Duration // the whole command, or kadm's CreateTopic
	converged time.Duration // from the create's return until every broker served the topic
}

// TestRealKafkaCreateWait: on three Apache Kafka 4.4 nodes, 50 trials of
// kconsist topic create --wait, each followed at once by a plain franz-go
// client (connected to every broker beforehand, and knowing nothing of
// kconsist) that asks every broker directly for the topic, lists it
// through kadm and produces to every partition, and by a Java 4.4 client
// (testdata/TopicUser.java) that describes the topic and produces to it:
// 0 errors and 0 stale answers. Then 50 trials of a plain kadm CreateTopic followed by the same
// client, whose stale answers and errors are counted. Both measure how long
// after the create returned every broker served the topic; the figures
// are logged.
func TestRealKafkaCreateWait(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three Apache Kafka 4.4 nodes")
	}
	c := kafkatest.Start(t, kafkatest.Nodes(3))
	addrs := c.BootstrapAddrs()
	const trials = 50
	java := startJava(t, addrs)

	run := func(wait bool) []trial {
		var out []trial
		for i := range trials {
			name := fmt.Sprintf("t-%v-%d", wait, i)
			u := newUser(t, addrs)
			var tr trial
			start := time.Now()
			if wait {
				r := kc("", "-b", strings.Join(addrs, ","), "-q", "-o", "json", "topic", "create", name, "-p", "3", "-r", "3", "--wait")
				tr.command = time.Since(start)
				require.Equal(t, 0, r.code, r)
				tr.wait = time.Duration(decode(t, r.stdout)["waited_ms"].(float64)) * time.Millisecond
			} else {
				resp, err := kadm.NewClient(u.admin).CreateTopic(testCtx(t), 3, 3, nil, name)
				tr.command = time.Since(start)
				require.NoError(t, err)
				require.NoError(t, resp.Err)
			}
			// The Java service and the franz-go client start at once.
			done := time.Now()
			javac := make(chan javaResult, 1)
			go func() { javac <- java.use(name) }()
			tr.stale, tr.converged = u.converge(t, name, done)
			tr.errs = u.use(name)
			jr := <-javac
			require.NoError(t, jr.err)
			tr.javaStale, tr.javaErrs = jr.describeErrs, jr.produceErrs
			if jr.first != "-" {
				t.Logf("%s: the Java client saw %s", name, jr.first)
			}
			out = append(out, tr)
		}
		return out
	}
	waited := run(true)
	plain := run(false)

	sum := func(ts []trial, f func(trial) int) (n int) {
		for _, tr := range ts {
			n += f(tr)
		}
		return n
	}
	pct := func(ts []trial, f func(trial) time.Duration) string {
		ds := make([]time.Duration, len(ts))
		for i, tr := range ts {
			ds[i] = f(tr)
		}
		slices.Sort(ds)
		return fmt.Sprintf("p50 %v p99 %v", ds[len(ds)/2].Round(100*time.Microsecond), ds[min(len(ds)-1, len(ds)*99/100)].Round(100*time.Microsecond))
	}
	staleTrials := func(ts []trial) (n int) {
		for _, tr := range ts {
			if tr.stale+tr.errs > 0 {
				n++
			}
		}
		return n
	}
	t.Logf("kconsist topic create --wait: %d trials, %d with stale answers or errors (%d stale answers of %d, %d errors); the wait %s, the command %s; every broker served the topic %s after it returned",
		trials, staleTrials(waited), sum(waited, func(tr trial) int { return tr.stale }), 3*trials, sum(waited, func(tr trial) int { return tr.errs }),
		pct(waited, func(tr trial) time.Duration { return tr.wait }), pct(waited, func(tr trial) time.Duration { return tr.command }),
		pct(waited, func(tr trial) time.Duration { return tr.converged }))
	t.Logf("plain kadm CreateTopic: %d trials, %d with stale answers or errors (%d stale answers of %d, %d errors); CreateTopic %s; every broker served the topic %s after it returned",
		trials, staleTrials(plain), sum(plain, func(tr trial) int { return tr.stale }), 3*trials, sum(plain, func(tr trial) int { return tr.errs }),
		pct(plain, func(tr trial) time.Duration { return tr.command }), pct(plain, func(tr trial) time.Duration { return tr.converged }))
	javaTrials := func(ts []trial) (n int) {
		for _, tr := range ts {
			if tr.javaStale+tr.javaErrs > 0 {
				n++
			}
		}
		return n
	}
	t.Logf("Java 4.4 client (Admin describeTopics, then a producer): after create --wait %d of %d trials failed (%d describes, %d produces); after a plain create %d of %d (%d describes, %d produces)",
		javaTrials(waited), trials, sum(waited, func(tr trial) int { return tr.javaStale }), sum(waited, func(tr trial) int { return tr.javaErrs }),
		javaTrials(plain), trials, sum(plain, func(tr trial) int { return tr.javaStale }), sum(plain, func(tr trial) int { return tr.javaErrs }))
	require.Zero(t, staleTrials(waited), "a plain client saw a stale answer or an error after create --wait")
	require.Zero(t, javaTrials(waited), "the Java client failed after create --wait")
}

// user is a plain franz-go client connected to every broker before the
// create, as a service already running would be.
type user struct {
	cl, admin *kgo.Client
	brokers   []int32
}

func newUser(t *testing.T, addrs []string) *user {
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	adm, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	t.Cleanup(adm.Close)
	bs, err := kadm.NewClient(cl).ListBrokers(ctx)
	require.NoError(t, err)
	u := &user{cl: cl, admin: adm}
	for _, b := range bs {
		u.brokers = append(u.brokers, b.NodeID)
		servesTopic(ctx, cl, b.NodeID, "warm-up") // opens the connection
	}
	return u
}

// converge asks every broker directly, at once, for topic until it serves
// it; it returns how many first answers were stale and how long after
// since the last broker served it.
func (u *user) converge(t *testing.T, topic string, since time.Time) (stale int, took time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type answer struct {
		stale bool
		at    time.Time
	}
	answers := make(chan answer, len(u.brokers))
	for _, node := range u.brokers {
		go func() {
			first := true
			a := answer{}
			for !servesTopic(ctx, u.cl, node, topic) && ctx.Err() == nil {
				if first {
					a.stale = true
				}
				first = false
				time.Sleep(time.Millisecond)
			}
			a.at = time.Now()
			answers <- a
		}()
	}
	var last time.Time
	for range u.brokers {
		a := <-answers
		if a.stale {
			stale++
		}
		if a.at.After(last) {
			last = a.at
		}
	}
	require.NoError(t, ctx.Err(), "a broker never served %s", topic)
	return stale, last.Sub(since)
}

// use lists topic through kadm and produces to each of its partitions,
// returning the errors.
func (u *user) use(topic string) (errs int) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	details, err := kadm.NewClient(u.cl).ListTopics(ctx, topic)
	if err != nil || details.Error() != nil || len(details[topic].Partitions) != 3 {
		errs++
	}
	for p := range int32(3) {
		if err := u.cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
			errs++
		}
	}
	return errs
}

// servesTopic asks broker node directly whether it lists every partition
// of topic (3) with a leader.
func servesTopic(ctx context.Context, cl *kgo.Client, node int32, topic string) bool {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(node)).Request(ctx, req)
	if err != nil {
		return false
	}
	r := resp.(*kmsg.MetadataResponse)
	if len(r.Topics) != 1 || r.Topics[0].ErrorCode != 0 || len(r.Topics[0].Partitions) != 3 {
		return false
	}
	for _, p := range r.Topics[0].Partitions {
		if p.Leader < 0 || p.ErrorCode != 0 {
			return false
		}
	}
	return true
}

// javaUser is TopicUser.java (testdata): a Java 4.4 service using topics
// it is told of on stdin.
type javaUser struct {
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *lockedBuffer
}

// lockedBuffer is a buffer the process writes while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type javaResult struct {
	describeErrs, produceErrs int
	first                     string
	err                       error
}

func startJava(t *testing.T, addrs []string) *javaUser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	t.Cleanup(cancel)
	bin, err := exec.LookPath("java")
	require.NoError(t, err, "java 17+ must be on PATH")
	classpath, err := kafkatest.Provision(ctx)
	require.NoError(t, err)
	cmd := exec.CommandContext(ctx, bin, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", classpath,
		filepath.Join("testdata", "TopicUser.java"), strings.Join(addrs, ","), "3")
	cmd.WaitDelay = 5 * time.Second
	j := &javaUser{stderr: new(lockedBuffer)}
	cmd.Stderr = j.stderr
	j.in, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		j.in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("TopicUser.java: %v\n%s", err, j.stderr)
		}
	})
	j.out = bufio.NewScanner(stdout)
	require.True(t, j.out.Scan(), "TopicUser.java did not start:\n%s", j.stderr)
	require.Equal(t, "ready", j.out.Text(), j.stderr.String())
	return j
}

// use tells the Java service of topic and returns what it saw.
func (j *javaUser) use(topic string) javaResult {
	if _, err := fmt.Fprintln(j.in, topic); err != nil {
		return javaResult{err: err}
	}
	if !j.out.Scan() {
		return javaResult{err: fmt.Errorf("TopicUser.java ended: %v", j.out.Err())}
	}
	var r javaResult
	var name string
	if _, err := fmt.Sscan(j.out.Text(), &name, &r.describeErrs, &r.produceErrs, &r.first); err != nil || name != topic {
		return javaResult{err: fmt.Errorf("TopicUser.java answered %q for %s: %v", j.out.Text(), topic, err)}
	}
	return r
}
