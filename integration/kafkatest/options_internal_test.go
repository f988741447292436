package kafkatest

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt  Opt
		want string // "" for valid
	}{
		{Nodes(1), ""},
		{Nodes(3), ""},
		{Nodes(0), "Nodes(0)"},
		{Nodes(10), "Nodes(10)"},
		{ClusterID(NewClusterID()), ""},
		{ClusterID("short"), `ClusterID("short")`},
		{ClusterID("AAAAAAAAAAAAAAAAAAAAAA"), "zero Uuid"},
		{ClusterID("MkU3OEVBNTcwNTJENDM2Qk=="), "unpadded"},
		{AdvertisedAddr(1, "127.0.0.1:9092"), ""},
		{AdvertisedAddr(1, "127.0.0.1"), `AdvertisedAddr(1, "127.0.0.1")`},
		{BrokerConfig("num.partitions", "3"), ""},
		{BrokerConfig("", "3"), `BrokerConfig("", "3")`},
		{BrokerConfig("a=b", "3"), "BrokerConfig"},
		{BrokerConfig("a", "x\ny=z"), "newlines"},
		{StartTimeout(0), "StartTimeout(0s)"},
	} {
		var c config
		err := tc.opt(&c)
		if tc.want == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, tc.want)
	}
}

func TestNewClusterID(t *testing.T) {
	t.Parallel()
	for range 1000 {
		id := NewClusterID()
		require.NoError(t, validClusterID(id))
		require.NotEqual(t, byte('-'), id[0], "a leading '-' reads as a flag")
		b, err := base64.RawURLEncoding.DecodeString(id)
		require.NoError(t, err)
		require.Len(t, b, 16)
	}
}

func TestServerProperties(t *testing.T) {
	t.Parallel()
	n := &node{id: 2, dir: "/d/node-2", external: "127.0.0.1:1", internal: "127.0.0.1:2", controller: "127.0.0.1:3", advertised: "127.0.0.1:9"}
	cfg := config{nodes: 3, brokerConfig: map[string]string{"num.io.threads": "4", "x.y": "z"}}
	p := serverProperties(n, "1@a:1,2@b:2,3@c:3", cfg)
	for _, want := range []string{
		"node.id=2\n",
		"process.roles=broker,controller\n",
		"controller.quorum.voters=1@a:1,2@b:2,3@c:3\n",
		"listeners=EXTERNAL://127.0.0.1:1,INTERNAL://127.0.0.1:2,CONTROLLER://127.0.0.1:3\n",
		"advertised.listeners=EXTERNAL://127.0.0.1:9,INTERNAL://127.0.0.1:2\n",
		"inter.broker.listener.name=INTERNAL\n",
		"offsets.topic.replication.factor=3\n",
		"transaction.state.log.min.isr=2\n",
		"num.io.threads=4\n", // BrokerConfig wins over the default
		"x.y=z\n",
	} {
		require.Contains(t, p, want)
	}
	require.Equal(t, 1, strings.Count(p, "num.io.threads="))

	one := serverProperties(n, "2@b:2", config{nodes: 1})
	require.Contains(t, one, "offsets.topic.replication.factor=1\n")
	require.Contains(t, one, "transaction.state.log.min.isr=1\n")
}

func TestProvisionKafkaHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("KAFKA_HOME", home)
	_, err := Provision(context.Background())
	require.ErrorContains(t, err, "KAFKA_HOME="+home)

	libs := filepath.Join(home, "libs")
	require.NoError(t, os.MkdirAll(libs, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(libs, "kafka_2.13-4.4.0.jar"), nil, 0o644))
	cp, err := Provision(context.Background())
	require.NoError(t, err)
	require.Equal(t, filepath.Join(libs, "*"), cp)
}

func TestProvisionWithoutMaven(t *testing.T) {
	t.Setenv("KAFKA_HOME", "")
	t.Setenv("KCONSIST_KAFKA_CACHE", t.TempDir())
	t.Setenv("PATH", t.TempDir())
	_, err := Provision(context.Background())
	require.ErrorIs(t, err, ErrMissingTool)
	require.ErrorContains(t, err, "install it")
}

func TestProvisionUsesCompleteCache(t *testing.T) {
	// A cache another process finished is used as is, without Maven.
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "libs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "libs", ".complete"), nil, 0o644))
	t.Setenv("KAFKA_HOME", "")
	t.Setenv("KCONSIST_KAFKA_CACHE", dir)
	t.Setenv("PATH", t.TempDir())
	cp, err := Provision(context.Background())
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "libs", "*"), cp)
}

// fatalTB stops Start at its first Fatalf or Skip, which a real *testing.T
// would do with runtime.Goexit.
type fatalTB struct {
	testing.TB
	msg     string
	skipped bool
}

type stopped struct{}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	panic(stopped{})
}
func (f *fatalTB) Skip(args ...any) { f.skipped = true; panic(stopped{}) }

func runStart(tb *fatalTB, opts ...Opt) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
		}
	}()
	Start(tb, opts...)
}

func TestStartWithoutJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	tb := &fatalTB{TB: t}
	runStart(tb)
	if testing.Short() {
		require.True(t, tb.skipped, "-short skips the real-Kafka suite")
		return
	}
	require.Contains(t, tb.msg, "java is not on PATH")
	require.Contains(t, tb.msg, "install a Java 17+ runtime")
}

func TestStartRejectsBadOptions(t *testing.T) {
	if testing.Short() {
		tb := &fatalTB{TB: t}
		runStart(tb, Nodes(0))
		require.True(t, tb.skipped)
		return
	}
	for _, tc := range []struct {
		opts []Opt
		want string
	}{
		{[]Opt{Nodes(0)}, "Nodes(0)"},
		{[]Opt{AdvertisedAddr(2, "127.0.0.1:1")}, "AdvertisedAddr names node 2, but the cluster has nodes 1..1"},
	} {
		tb := &fatalTB{TB: t}
		runStart(tb, tc.opts...)
		require.Contains(t, tb.msg, tc.want)
	}
}

// TestClassArchive proves the CDS archive brokers start with is usable: a
// JVM that insists on sharing (-Xshare:on) fails on an archive that does
// not match its classpath or JDK.
func TestClassArchive(t *testing.T) {
	if testing.Short() {
		t.Skip("kafkatest: real Apache Kafka tests are skipped with -short")
	}
	java, err := exec.LookPath("java")
	require.NoError(t, err, "install a Java 17+ runtime")
	cp, err := Provision(context.Background())
	require.NoError(t, err)
	archive := classArchive(java, cp, KafkaVersion)
	require.NotEmpty(t, archive)
	require.FileExists(t, archive)
	out, err := exec.Command(java, "-Xshare:on", "-XX:SharedArchiveFile="+archive, "-XX:+UseSerialGC",
		"-cp", cp, "kafka.tools.StorageTool", "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "metadata.version=")
}

func TestKIP1243Options(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		settings []KIP1243Setting
		args     string
		err      string
	}{
		{nil, "mode=hold,errorCode=1243", ""},
		{[]KIP1243Setting{KIP1243Hold(2500 * time.Millisecond)}, "mode=hold,holdMs=2500,errorCode=1243", ""},
		{[]KIP1243Setting{KIP1243Error(0), KIP1243ErrorCode(77)}, "mode=error,holdMs=0,errorCode=77", ""},
		{[]KIP1243Setting{KIP1243TokensOff(), KIP1243CloseOnMismatch(), KIP1243WriteHold(time.Second)},
			"mode=hold,writeHoldMs=1000,errorCode=1243,tokens=off,mismatch=close", ""},
		{[]KIP1243Setting{KIP1243Error(0), KIP1243CloseInsteadOfError(), KIP1243JudgedErrorToken()},
			"mode=error,holdMs=0,inconsistent=close,errorToken=judged,errorCode=1243", ""},
		{[]KIP1243Setting{kip1243RequireHook("a.B#c"), kip1243RequireHook("d.E#f")}, "mode=hold,errorCode=1243,requireHook=a.B#c;d.E#f", ""},
		{[]KIP1243Setting{KIP1243Hold(0)}, "", "KIP1243Hold(0s)"},
		{[]KIP1243Setting{KIP1243Error(-time.Second)}, "", "KIP1243Error(-1s)"},
		{[]KIP1243Setting{KIP1243ErrorCode(0)}, "", "KIP1243ErrorCode(0)"},
		{[]KIP1243Setting{KIP1243WriteHold(0)}, "", "KIP1243WriteHold(0s)"},
		{[]KIP1243Setting{kip1243RequireHook("a.B#c,mode=error")}, "", "requireHook"},
	} {
		var c config
		err := KIP1243(tc.settings...)(&c)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, tc.args, c.kip1243.args())
	}
}
