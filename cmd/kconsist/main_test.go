package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/integration/localcluster"
)

const clusterID = "cli-cluster"

func newCluster(t *testing.T, opts ...localcluster.Opt) *localcluster.Cluster {
	t.Helper()
	lc, err := localcluster.New(append([]localcluster.Opt{localcluster.Brokers(3), localcluster.ClusterID(clusterID)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(lc.Close)
	return lc
}

type result struct {
	code           int
	stdout, stderr string
}

// kc runs the command in-process.
func kc(stdin string, args ...string) result {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func bootstrap(lc *localcluster.Cluster) string { return strings.Join(lc.Addrs(), ",") }

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// plainClient is a franz-go client that knows nothing of kconsist: what
// another process, in another language, would use.
func plainClient(t *testing.T, lc *localcluster.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(lc.Addrs()...)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return cl
}

// brokerMetadata asks broker node directly for topic.
func brokerMetadata(t *testing.T, cl *kgo.Client, node int32, topic string) kmsg.MetadataResponseTopic {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := cl.Broker(int(node)).Request(testCtx(t), req)
	require.NoError(t, err)
	r := resp.(*kmsg.MetadataResponse)
	require.Len(t, r.Topics, 1)
	return r.Topics[0]
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}

// TestCreateWaitThenPlainClient: after topic create --wait, a plain
// franz-go client describes the topic on every broker and produces to
// every partition with no error, with one broker applying late; flags
// before and after the arguments. Without --wait the lagging broker does
// not know the topic yet.
func TestCreateWaitThenPlainClient(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []localcluster.Opt
	}{
		{"kip1243", nil},
		{"kafka44", []localcluster.Opt{localcluster.Native(false)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := newCluster(t, append(tc.opts, localcluster.BrokerLag(2, 400*time.Millisecond))...)
			r := kc("", "-b", bootstrap(lc), "topic", "create", "orders", "--partitions", "3", "--replication-factor", "1", "--wait")
			require.Equal(t, 0, r.code, r)
			require.Contains(t, r.stdout, "created topic orders (3 partitions, replication factor 1)")
			require.Contains(t, r.stdout, "every broker (3) has applied it")

			cl := plainClient(t, lc)
			for node := range int32(3) {
				topic := brokerMetadata(t, cl, node, "orders")
				require.Zero(t, topic.ErrorCode, "broker %d", node)
				require.Len(t, topic.Partitions, 3, "broker %d", node)
			}
			details, err := kadm.NewClient(cl).ListTopics(testCtx(t), "orders")
			require.NoError(t, err)
			require.NoError(t, details.Error())
			require.Len(t, details["orders"].Partitions, 3)
			for p := range int32(3) {
				res := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "orders", Partition: p, Value: []byte("v")})
				require.NoError(t, res.FirstErr(), "partition %d", p)
			}

			// Flags after the arguments, JSON output.
			r = kc("", "topic", "create", "audit", "-o", "json", "--wait", "-p", "2", "-b", bootstrap(lc), "--config", "retention.ms=1000")
			require.Equal(t, 0, r.code, r)
			m := decode(t, r.stdout)
			require.Equal(t, "audit", m["topic"])
			require.Equal(t, true, m["waited"])
			require.Len(t, m["brokers"], 3)
			tok, err := consistency.ParseToken(m["token"].(string))
			require.NoError(t, err)
			require.Equal(t, clusterID, tok.ClusterID())
			for node := range int32(3) {
				applied, err := lc.AppliedOffset(node)
				require.NoError(t, err)
				require.GreaterOrEqual(t, applied, tok.Offset())
			}
		})
	}
}

// TestTokenAndWait: token prints both forms, and wait takes either form
// as well as none (the committed token).
func TestTokenAndWait(t *testing.T) {
	lc := newCluster(t, localcluster.BrokerLag(1, 300*time.Millisecond))
	b := bootstrap(lc)
	r := kc("", "-b", b, "topic", "create", "t", "-o", "json")
	require.Equal(t, 0, r.code, r)

	r = kc("", "-b", b, "token")
	require.Equal(t, 0, r.code, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 2)
	want := consistency.MustOf(clusterID, lc.LogEnd())
	require.Equal(t, want.String(), lines[0])
	tok, err := consistency.ParseToken(lines[1])
	require.NoError(t, err)
	require.Equal(t, want, tok)

	r = kc("", "token", "-o", "json", "-b", b)
	require.Equal(t, 0, r.code, r)
	m := decode(t, r.stdout)
	require.Equal(t, clusterID, m["cluster"])
	require.Equal(t, float64(lc.LogEnd()), m["offset"])
	require.Equal(t, want.Encode(), m["token"])

	for _, arg := range []string{want.Encode(), want.String()} {
		r = kc("", "-b", b, "wait", arg)
		require.Equal(t, 0, r.code, r)
		require.Contains(t, r.stdout, "every broker (3) has applied "+want.String())
	}
	r = kc("", "-b", b, "wait", "-o", "json", "--topic", "t")
	require.Equal(t, 0, r.code, r)
	m = decode(t, r.stdout)
	require.Equal(t, want.Encode(), m["token"])
	for _, br := range m["brokers"].([]any) {
		require.Equal(t, true, br.(map[string]any)["done"])
	}
	for node := range int32(3) {
		applied, err := lc.AppliedOffset(node)
		require.NoError(t, err)
		require.GreaterOrEqual(t, applied, want.Offset())
	}
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestExitStatuses: every documented exit status, from the bad input
// that causes it.
func TestExitStatuses(t *testing.T) {
	lc := newCluster(t)
	b := bootstrap(lc)
	require.Equal(t, 0, kc("", "-b", b, "topic", "create", "exists").code)

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"ok", []string{"-b", b, "token"}, exitOK, ""},
		{"operation failed", []string{"-b", b, "topic", "create", "exists"}, exitFailed, "TOPIC_ALREADY_EXISTS"},
		{"unknown flag", []string{"-b", b, "token", "--nope"}, exitUsage, "unknown flag"},
		{"unknown command", []string{"-b", b, "tokens"}, exitUsage, "unknown command"},
		{"missing argument", []string{"-b", b, "topic", "create"}, exitUsage, "accepts 1 arg"},
		{"no bootstrap", []string{"token"}, exitUsage, "no bootstrap servers"},
		{"bad -X", []string{"-b", b, "-X", "acks", "token"}, exitUsage, `-X "acks": want key=value`},
		{"unknown property", []string{"-b", b, "-X", "no.such.key=1", "token"}, exitUsage, "no.such.key"},
		{"bad property value", []string{"-b", b, "-X", "acks=some", "token"}, exitUsage, "acks"},
		{"missing config file", []string{"--config", "/nonexistent/client.properties", "token"}, exitUsage, "--config"},
		{"bad output", []string{"-b", b, "-o", "yaml", "token"}, exitUsage, `-o "yaml"`},
		{"bad --timeout", []string{"-b", b, "--timeout", "0s", "token"}, exitUsage, "--timeout"},
		{"bad topic --config", []string{"-b", b, "topic", "create", "x", "--config", "=novalue"}, exitUsage, "--config"},
		{"config alter without topic", []string{"-b", b, "config", "alter", "--set", "a=b"}, exitUsage, "--topic is required"},
		{"malformed token", []string{"-b", b, "wait", "not-a-token"}, exitBadToken, "not-a-token"},
		{"negative offset", []string{"-b", b, "wait", clusterID + "@-5"}, exitBadToken, "token"},
		{"token from the future", []string{"-b", b, "wait", fmt.Sprintf("%s@%d", clusterID, lc.LogEnd()+1000)}, exitBadToken, "beyond cluster \"cli-cluster\"'s committed metadata offset"},
		{"token of another cluster", []string{"-b", b, "wait", "another-cluster@3"}, exitWrongClust, `names cluster "another-cluster"`},
		{"unreachable", []string{"-b", closedPort(t), "--timeout", "2s", "token"}, exitUnreachable, "could not be reached"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := kc("", tc.args...)
			require.Equal(t, tc.code, r.code, r)
			require.Contains(t, r.stderr, tc.msg, r)
			if tc.code != exitOK && tc.name != "bad output" {
				// JSON output names the status too.
				r = kc("", append(tc.args, "-o", "json")...)
				require.Equal(t, tc.code, r.code, r)
				if tc.name != "unknown flag" && tc.name != "unknown command" {
					m := decode(t, strings.TrimSpace(r.stdout))
					require.Equal(t, exitNames[tc.code], m["status"])
					require.Equal(t, float64(tc.code), m["exit"])
				}
			}
		})
	}
}

// TestExitTimeout: a broker that stays behind makes --wait end with exit
// status 3 at --timeout, naming it; progress shows on stderr meanwhile.
// The timeouts leave a loaded machine time for the two brokers that do
// apply to say so (2.5 s and 1.5 s did not always).
func TestExitTimeout(t *testing.T) {
	// Broker 2, kfake's controller, answers the create: at commit, or it
	// would wait the hour for its own apply.
	lc := newCluster(t, localcluster.BrokerLag(2, time.Hour), localcluster.WriteAnswers(localcluster.WritesAtCommit))
	r := kc("", "-b", bootstrap(lc), "--timeout", "8s", "topic", "create", "slow", "--wait")
	require.Equal(t, exitTimeout, r.code, r)
	require.Contains(t, r.stderr, "1 of 3 brokers had not applied token "+clusterID+"@", r)
	require.Contains(t, r.stderr, "broker 2 (", r)
	require.Contains(t, r.stderr, "waiting for "+clusterID+"@", r)
	require.Contains(t, r.stderr, "2 of 3 brokers done; broker 2 at", r)

	r = kc("", "-b", bootstrap(lc), "--timeout", "5s", "-o", "json", "wait")
	require.Equal(t, exitTimeout, r.code, r)
	m := decode(t, r.stdout)
	require.Equal(t, "timeout", m["status"])
	behind := m["behind"].([]any)
	require.Len(t, behind, 1)
	require.Equal(t, float64(2), behind[0].(map[string]any)["node"])
	require.Equal(t, false, behind[0].(map[string]any)["done"])
}

// refuseSASL makes c answer every SASL authentication as Kafka answers a
// wrong password (kfake itself closes the connection).
func refuseSASL(c *kfake.Cluster) {
	c.ControlKey(36, func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.SASLAuthenticateRequest)
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		resp.Version = r.Version
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"
		resp.ErrorMessage = &msg
		return resp, nil, true
	})
}

func saslCluster(t *testing.T) *kfake.Cluster {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "alice", "right"))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// TestExitAuth: a password the cluster refuses is exit status 7, well
// before --timeout; the right one from a client.properties file works.
func TestExitAuth(t *testing.T) {
	refusing := saslCluster(t)
	refuseSASL(refusing)
	sasl := []string{"-b", strings.Join(refusing.ListenAddrs(), ","), "-X", "security.protocol=SASL_PLAINTEXT",
		"-X", "sasl.mechanism=SCRAM-SHA-256", "-X", "sasl.username=alice", "-X", "sasl.password=wrong", "--timeout", "30s"}
	for _, verb := range [][]string{{"token"}, {"topic", "create", "t", "--wait"}, {"wait"}} {
		r := kc("", append(sasl, verb...)...)
		require.Equal(t, exitAuth, r.code, r)
		require.Contains(t, r.stderr, "SASL_AUTHENTICATION_FAILED", r)
	}

	ok := saslCluster(t)
	props := filepath.Join(t.TempDir(), "client.properties")
	require.NoError(t, os.WriteFile(props, []byte("bootstrap.servers="+strings.Join(ok.ListenAddrs(), ",")+
		"\nsecurity.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\nsasl.username=alice\nsasl.password=right\n"), 0o600))
	r := kc("", "--config", props, "topic", "create", "t")
	require.Equal(t, exitOK, r.code, r)
	// On topic create, --config key=value is a topic config, and the
	// file still names the client properties, before or after.
	r = kc("", "topic", "create", "t2", "--config", "retention.ms=1000", "--config", props, "-o", "json")
	require.Equal(t, exitOK, r.code, r)
	r = kc("", "topic", "create", "t3", "--config", props, "--config", "other.properties")
	require.Equal(t, exitUsage, r.code, r)
}

// TestDeleteAndConfigWait: after delete --wait no broker lists the topic;
// after config alter --wait every broker describes the new value.
func TestDeleteAndConfigWait(t *testing.T) {
	lc := newCluster(t, localcluster.BrokerLag(0, 300*time.Millisecond))
	b := bootstrap(lc)
	require.Equal(t, 0, kc("", "-b", b, "topic", "create", "gone", "--wait").code)
	require.Equal(t, 0, kc("", "-b", b, "topic", "create", "kept", "--wait").code)

	r := kc("", "-b", b, "config", "alter", "--topic", "kept", "--set", "retention.ms=1234", "--wait")
	require.Equal(t, 0, r.code, r)
	require.Contains(t, r.stdout, "altered 1 config(s) of topic kept")
	cl := plainClient(t, lc)
	for node := range int32(3) {
		req := kmsg.NewPtrDescribeConfigsRequest()
		res := kmsg.NewDescribeConfigsRequestResource()
		res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeTopic, "kept", []string{"retention.ms"}
		req.Resources = append(req.Resources, res)
		resp, err := cl.Broker(int(node)).Request(testCtx(t), req)
		require.NoError(t, err)
		rs := resp.(*kmsg.DescribeConfigsResponse).Resources
		require.Len(t, rs, 1)
		require.Len(t, rs[0].Configs, 1, "broker %d", node)
		require.Equal(t, "1234", *rs[0].Configs[0].Value, "broker %d", node)
	}

	r = kc("", "-b", b, "topic", "delete", "gone", "--wait")
	require.Equal(t, 0, r.code, r)
	require.Contains(t, r.stdout, "deleted topic gone")
	for node := range int32(3) {
		topic := brokerMetadata(t, cl, node, "gone")
		require.Equal(t, int16(3), topic.ErrorCode, "broker %d still lists the topic", node) // UNKNOWN_TOPIC_OR_PARTITION
	}
	r = kc("", "-b", b, "topic", "delete", "gone", "never-was")
	require.Equal(t, exitFailed, r.code, r)
	require.Contains(t, r.stderr, "UNKNOWN_TOPIC_OR_PARTITION")
}

// TestProduceConsumeTokenHeader: produce puts the token in a header, and
// consume prints a record only once every broker has applied its token.
func TestProduceConsumeTokenHeader(t *testing.T) {
	lc := newCluster(t)
	b := bootstrap(lc)
	require.Equal(t, 0, kc("", "-b", b, "topic", "create", "events", "-p", "1", "--wait").code)
	r := kc("k1:one\nk2:two\nthree\n", "-b", b, "produce", "events", "--token-header", "kconsist-token", "-K", ":", "-o", "json")
	require.Equal(t, 0, r.code, r)
	m := decode(t, r.stdout)
	require.Equal(t, float64(3), m["records"])
	tok, err := consistency.ParseToken(m["token"].(string))
	require.NoError(t, err)
	require.Equal(t, consistency.MustOf(clusterID, lc.LogEnd()), tok)

	r = kc("", "-b", b, "consume", "events", "-n", "3", "-K", "=", "--wait-token-header", "kconsist-token")
	require.Equal(t, 0, r.code, r)
	require.Equal(t, "k1=one\nk2=two\n=three\n", r.stdout)

	r = kc("", "-b", b, "consume", "events", "-n", "1", "--wait-token-header", "kconsist-token", "-o", "json")
	require.Equal(t, 0, r.code, r)
	m = decode(t, r.stdout)
	require.Equal(t, "one", m["value"])
	require.Equal(t, "k1", m["key"])
	require.Equal(t, tok.Encode(), m["token_applied"])

	// Records with a bad token in the header stop the consumer.
	require.Equal(t, 0, kc("", "-b", b, "topic", "create", "bad", "-p", "1", "--wait").code)
	cl := plainClient(t, lc)
	for _, v := range []string{"garbage", "another-cluster@1"} {
		res := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "bad", Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "tok", Value: []byte(v)}}})
		require.NoError(t, res.FirstErr())
	}
	r = kc("", "-b", b, "consume", "bad", "-n", "1", "--wait-token-header", "tok")
	require.Equal(t, exitBadToken, r.code, r)
	require.Contains(t, r.stderr, "record bad/0@0, header tok")
	r = kc("", "-b", b, "consume", "bad", "-n", "2", "--wait-token-header", "tok", "-K", "|")
	// The first record's token is malformed: it stops there.
	require.Equal(t, exitBadToken, r.code, r)
	res := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "other", Value: []byte("x")})
	require.Error(t, res.FirstErr()) // nothing created it
	require.Equal(t, 0, kc("", "-b", b, "topic", "create", "other", "-p", "1", "--wait").code)
	res = cl.ProduceSync(testCtx(t), &kgo.Record{Topic: "other", Value: []byte("x"), Headers: []kgo.RecordHeader{{Key: "tok", Value: []byte("another-cluster@1")}}})
	require.NoError(t, res.FirstErr())
	r = kc("", "-b", b, "consume", "other", "-n", "1", "--wait-token-header", "tok")
	require.Equal(t, exitWrongClust, r.code, r)

	// --token must be good, and needs --token-header.
	r = kc("x\n", "-b", b, "produce", "events", "--token", tok.Encode())
	require.Equal(t, exitUsage, r.code, r)
	r = kc("x\n", "-b", b, "produce", "events", "--token-header", "h", "--token", fmt.Sprintf("%s@%d", clusterID, lc.LogEnd()+50))
	require.Equal(t, exitBadToken, r.code, r)
}

// TestHelp: every verb has help with examples, on stdout, exit 0.
func TestHelp(t *testing.T) {
	for _, verb := range [][]string{{}, {"token"}, {"wait"}, {"topic", "create"}, {"topic", "delete"}, {"config", "alter"}, {"produce"}, {"consume"}} {
		r := kc("", append(verb, "--help")...)
		require.Equal(t, 0, r.code, r)
		require.Contains(t, r.stdout, "Examples:", verb)
		require.Contains(t, r.stdout, "kconsist ", verb)
	}
	r := kc("", "topic")
	require.Equal(t, exitUsage, r.code, r)
}

// TestBinary builds the command once and runs it as a process: exit
// statuses reach the shell.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kconsist")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, string(out))
	lc := newCluster(t)

	cmd := exec.Command(bin, "-b", bootstrap(lc), "topic", "create", "bin", "--wait")
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "every broker (3) has applied it")

	err = exec.Command(bin, "-b", bootstrap(lc), "wait", "nonsense").Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, exitBadToken, ee.ExitCode())

	// consume --group | head -3: the reader closes the pipe after three
	// lines; the next write fails (EPIPE, not a SIGPIPE that kills the
	// process), and the group commits what the pipe took, not the record
	// whose write failed.
	out, err = exec.Command(bin, "-b", bootstrap(lc), "topic", "create", "piped", "-p", "3", "--wait").CombinedOutput()
	require.NoError(t, err, string(out))
	pl := plainClient(t, lc, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, v := range []string{"p0", "p1", "p2"} {
		require.NoError(t, pl.ProduceSync(testCtx(t), &kgo.Record{Topic: "piped", Partition: 0, Value: []byte(v)}).FirstErr())
	}
	pr, pw, err := os.Pipe()
	require.NoError(t, err)
	cmd = exec.CommandContext(testCtx(t), bin, "-b", bootstrap(lc), "consume", "piped", "--group", "piped")
	cmd.Stdout = pw
	var errb bytes.Buffer
	cmd.Stderr = &errb
	require.NoError(t, cmd.Start())
	require.NoError(t, pw.Close())
	lines := bufio.NewReader(pr)
	for _, want := range []string{"p0\n", "p1\n", "p2\n"} {
		line, err := lines.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, want, line)
	}
	require.NoError(t, pr.Close())
	// Records on every partition: one lands where the consumer writes next.
	for p := range int32(3) {
		require.NoError(t, pl.ProduceSync(testCtx(t), &kgo.Record{Topic: "piped", Partition: p, Value: []byte("after")}).FirstErr())
	}
	require.NoError(t, cmd.Wait(), errb.String())
	require.Empty(t, errb.String())
	offs, err := kadm.NewClient(pl).FetchOffsets(testCtx(t), "piped")
	require.NoError(t, err)
	o, ok := offs.Lookup("piped", 0)
	require.True(t, ok)
	require.Equal(t, int64(3), o.At) // p0..p2 went into the pipe; "after" did not
}

func TestExitCodeNames(t *testing.T) {
	for code := exitOK; code <= exitAuth; code++ {
		require.NotEmpty(t, exitNames[code], strconv.Itoa(code))
	}
}

// FuzzParseToken: any text either parses to a token that reads back the
// same from its encoded form, or fails with an error wrapping a token
// error; never a panic.
func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"c@1", "cli-cluster@0", consistency.MustOf("x", 5).Encode(), "@1", "a@", "a@-1", "a@01", "a@b@3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := parseToken(s)
		if err != nil {
			require.Equal(t, exitBadToken, exitCode(err), "%q: %v", s, err)
			return
		}
		back, err := parseToken(tok.Encode())
		require.NoError(t, err)
		require.Equal(t, tok, back)
	})
}
