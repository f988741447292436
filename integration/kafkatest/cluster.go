package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"
)

// Opt configures Start.
type Opt func(*config) error

type config struct {
	version      string // "": KafkaVersion
	nodes        int
	clusterID    string
	advertised   map[int32]string
	brokerConfig map[string]string
	startTimeout time.Duration
	secure       *secureConfig // SASLSSL, ReauthInterval
	kip1243      *agentConfig  // KIP1243
}

// Nodes sets how many nodes the cluster has; the default is 1. Every node is
// a combined broker and controller with node id 1..n, and all of them vote
// in the KRaft quorum, so a cluster of 3 survives one node down. Internal
// topics get replication factor min(n, 3).
func Nodes(n int) Opt {
	return func(c *config) error {
		if n < 1 || n > 9 {
			return fmt.Errorf("Nodes(%d): want 1 to 9 nodes", n)
		}
		c.nodes = n
		return nil
	}
}

// Version sets the Apache Kafka release the cluster runs, one of
// [Versions]; the default is [KafkaVersion]. Every release runs in KRaft
// mode with the same properties. [KIP1243] needs 4.4.0, the release its
// agent hooks into.
func Version(v string) Opt {
	return func(c *config) error {
		if err := checkVersion(v); err != nil {
			return fmt.Errorf("Version(%q): %w", v, err)
		}
		c.version = v
		return nil
	}
}

// ClusterID sets the cluster id that storage is formatted with: a Kafka Uuid,
// 22 characters of unpadded URL-safe base64 of 16 bytes (see NewClusterID).
// The default is a random one.
func ClusterID(id string) Opt {
	return func(c *config) error {
		if err := validClusterID(id); err != nil {
			return err
		}
		c.clusterID = id
		return nil
	}
}

// AdvertisedAddr makes node advertise addr ("host:port") to clients instead
// of its own client listener, e.g. a Forwarder's address. Only the client
// listener is affected: replication and the quorum use listeners of their
// own, so the cluster works whatever addr points at.
func AdvertisedAddr(node int32, addr string) Opt {
	return func(c *config) error {
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
			return fmt.Errorf("AdvertisedAddr(%d, %q): want host:port", node, addr)
		}
		if c.advertised == nil {
			c.advertised = make(map[int32]string)
		}
		c.advertised[node] = addr
		return nil
	}
}

// BrokerConfig sets one server property on every node, after (and so over)
// the defaults this package writes for a small, fast cluster.
func BrokerConfig(key, value string) Opt {
	return func(c *config) error {
		if key == "" || strings.ContainsAny(key, "=\n") || strings.Contains(value, "\n") {
			return fmt.Errorf("BrokerConfig(%q, %q): key must be non-empty without '=' or newlines, value without newlines", key, value)
		}
		if c.brokerConfig == nil {
			c.brokerConfig = make(map[string]string)
		}
		c.brokerConfig[key] = value
		return nil
	}
}

// StartTimeout bounds how long Start and Restart wait for nodes to become
// ready; the default is 2 minutes, generous for a loaded 2-core machine.
func StartTimeout(d time.Duration) Opt {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("StartTimeout(%v): want a positive duration", d)
		}
		c.startTimeout = d
		return nil
	}
}

// NewClusterID returns a random Kafka cluster id. Like Kafka's own
// Uuid.randomUuid it never starts with '-', which command lines would take
// for a flag.
func NewClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' && id != "AAAAAAAAAAAAAAAAAAAAAA" {
			return id
		}
	}
}

func validClusterID(id string) error {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != 16 {
		return fmt.Errorf("ClusterID(%q): want 22 characters of unpadded URL-safe base64 encoding 16 bytes", id)
	}
	if id == "AAAAAAAAAAAAAAAAAAAAAA" {
		return fmt.Errorf("ClusterID(%q): the zero Uuid is reserved by Kafka", id)
	}
	return nil
}

// Cluster is a running Apache Kafka cluster made of child processes of the
// test. Its methods are safe for concurrent use.
type Cluster struct {
	t         testing.TB // nil for StartCluster
	root      string     // removed by Close; set by StartCluster
	closeOnce sync.Once
	id        string
	version   string
	java      string
	classpath string
	dir       string
	timeout   time.Duration
	nodes     []*node      // ordered by id
	jvmExtra  []string     // for every JVM (e.g. the CDS archive to use)
	tls       *tlsMaterial // the SASL_SSL listener's, if any
	scram     []string     // format arguments adding SCRAM credentials
	// trainArchive, if set, is where a broker's JVM dumps the classes it
	// loaded when it exits (see classArchive).
	trainArchive string
	// agent, if set, is the KIP-1243 agent every broker JVM starts with
	// (agentArg: its -javaagent option).
	agent    *agentConfig
	agentArg string
}

type node struct {
	id         int32
	dir        string
	props      string
	logPath    string
	external   string // client listener
	internal   string
	controller string
	advertised string
	// The SASL_SSL listener, if any: bound on loopback, advertised as
	// SecureHost.
	secure, secureAdvertised string

	mu   sync.Mutex
	proc *os.Process
	done chan struct{} // closed when proc has exited
}

// Start provisions Kafka (see Provision), formats storage and starts the
// cluster, returning once every node answers Metadata listing all nodes.
// Everything it starts is killed in t.Cleanup; if the test failed, the tail
// of every node's log is logged first. Start fails the test when java (or
// mvn, without KAFKA_HOME) is missing, and skips it under -short. Programs
// that are not tests use [StartCluster].
func Start(t testing.TB, opts ...Opt) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("kafkatest: real Apache Kafka tests are skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c, cfg, err := prepare(ctx, opts)
	if err != nil {
		t.Fatalf("kafkatest.Start: %v", err)
	}
	c.t = t
	// The temp dir is made before the cleanup is registered, so that the
	// processes are gone (and logs read) before it is removed.
	root := t.TempDir()
	t.Cleanup(c.cleanup)
	if err := c.bootRetrying(ctx, root, cfg, t.Logf); err != nil {
		t.Fatalf("kafkatest.Start: %v", err)
	}
	return c
}

// StartCluster is [Start] for programs that are not tests: it provisions
// Kafka, starts the cluster in a new temporary directory and returns once
// every node answers, or returns an error (wrapping [ErrMissingTool] when
// java or mvn is missing). ctx bounds provisioning and start-up. The caller
// must call [Cluster.Close], which ends the nodes and removes the
// directory. The nodes are also killed if the program dies (on Linux).
func StartCluster(ctx context.Context, opts ...Opt) (*Cluster, error) {
	c, cfg, err := prepare(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("kafkatest.StartCluster: %w", err)
	}
	root, err := os.MkdirTemp("", "kafkatest-")
	if err != nil {
		return nil, fmt.Errorf("kafkatest.StartCluster: %w", err)
	}
	c.root = root
	if err := c.bootRetrying(ctx, root, cfg, nil); err != nil {
		c.Close()
		return nil, fmt.Errorf("kafkatest.StartCluster: %w", err)
	}
	return c, nil
}

// prepare checks opts, finds java and provisions Kafka: everything before
// the first process starts.
func prepare(ctx context.Context, opts []Opt) (*Cluster, config, error) {
	cfg := config{nodes: 1, startTimeout: 2 * time.Minute, version: KafkaVersion}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, cfg, err
		}
	}
	if cfg.kip1243 != nil && cfg.version != KafkaVersion {
		return nil, cfg, fmt.Errorf("KIP1243 needs Apache Kafka %s (the agent hooks into its classes), not Version(%q)", KafkaVersion, cfg.version)
	}
	for id := range cfg.advertised {
		if id < 1 || int(id) > cfg.nodes {
			return nil, cfg, fmt.Errorf("AdvertisedAddr names node %d, but the cluster has nodes 1..%d", id, cfg.nodes)
		}
	}
	if cfg.secure != nil && len(cfg.secure.users) == 0 {
		return nil, cfg, errors.New("ReauthInterval needs SASLSSL: the cluster has no SASL listener")
	}
	if cfg.clusterID == "" {
		cfg.clusterID = NewClusterID()
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, cfg, fmt.Errorf("%w: java is not on PATH; install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)", ErrMissingTool)
	}
	cp, err := ProvisionVersion(ctx, cfg.version)
	if err != nil {
		return nil, cfg, err
	}
	c := &Cluster{id: cfg.clusterID, version: cfg.version, java: java, classpath: cp, timeout: cfg.startTimeout, scram: scramArgs(cfg.secure)}
	if cfg.secure != nil {
		if c.tls, err = newTLSMaterial(); err != nil {
			return nil, cfg, err
		}
	}
	if a := classArchive(java, cp, cfg.version); a != "" {
		c.jvmExtra = []string{"-XX:SharedArchiveFile=" + a}
	}
	if cfg.kip1243 != nil {
		jar, err := AgentJar(ctx)
		if err != nil {
			return nil, cfg, err
		}
		c.agent, c.agentArg = cfg.kip1243, "-javaagent:"+jar+"="+cfg.kip1243.args()
	}
	return c, cfg, nil
}

// bootRetrying boots the cluster under root. Free ports are found by
// binding :0 and letting go, so another process can take one before Kafka
// binds it. That shows as a bind failure, and a second try with new ports
// almost surely succeeds. logf, if not nil, is told of each retry.
func (c *Cluster) bootRetrying(ctx context.Context, root string, cfg config, logf func(string, ...any)) error {
	for attempt := 1; ; attempt++ {
		c.dir = filepath.Join(root, fmt.Sprintf("try-%d", attempt))
		err := c.boot(ctx, cfg)
		if err == nil {
			return nil
		}
		if attempt == 3 || !c.bindFailed() || ctx.Err() != nil {
			return err
		}
		if logf != nil {
			logf("kafkatest.Start: a port was taken (attempt %d), retrying with new ports", attempt)
		}
		c.killAll()
	}
}

func (c *Cluster) boot(ctx context.Context, cfg config) error {
	per := 3
	if cfg.secure != nil {
		per = 4
	}
	ports, err := freePorts(per * cfg.nodes)
	if err != nil {
		return err
	}
	c.nodes = c.nodes[:0]
	var voters []string
	for i := range cfg.nodes {
		id := int32(i + 1)
		n := &node{
			id:         id,
			dir:        filepath.Join(c.dir, fmt.Sprintf("node-%d", id)),
			external:   fmt.Sprintf("127.0.0.1:%d", ports[per*i]),
			internal:   fmt.Sprintf("127.0.0.1:%d", ports[per*i+1]),
			controller: fmt.Sprintf("127.0.0.1:%d", ports[per*i+2]),
		}
		if cfg.secure != nil {
			n.secure = fmt.Sprintf("127.0.0.1:%d", ports[per*i+3])
			n.secureAdvertised = secureAddr(n.secure)
		}
		n.props = filepath.Join(n.dir, "server.properties")
		n.logPath = filepath.Join(n.dir, "kafka.log")
		n.advertised = n.external
		if a, ok := cfg.advertised[id]; ok {
			n.advertised = a
		}
		voters = append(voters, fmt.Sprintf("%d@%s", id, n.controller))
		c.nodes = append(c.nodes, n)
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return fmt.Errorf("cluster directory: %w", err)
	}
	log4j := filepath.Join(c.dir, "log4j2.properties")
	l4j := log4jConfig
	if c.agent != nil {
		// Kafka logs a warning for every answer whose error code its Errors
		// enum does not know, which INCONSISTENT_METADATA's is.
		l4j += agentLog4j
	}
	if err := os.WriteFile(log4j, []byte(l4j), 0o644); err != nil {
		return fmt.Errorf("write log4j config: %w", err)
	}
	for _, n := range c.nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return fmt.Errorf("node %d: %w", n.id, err)
		}
		props := serverProperties(n, strings.Join(voters, ","), cfg)
		if err := os.WriteFile(n.props, []byte(props), 0o644); err != nil {
			return fmt.Errorf("node %d: write server.properties: %w", n.id, err)
		}
	}
	if err := c.writeTLSFiles(); err != nil {
		return err
	}

	var g errgroup.Group
	for _, n := range c.nodes {
		g.Go(func() error { return c.format(n) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, n := range c.nodes {
		if err := c.launch(n); err != nil {
			return err
		}
	}
	if err := c.waitReady(ctx, c.nodes); err != nil {
		return err
	}
	return c.checkAgents(c.nodes)
}

func (c *Cluster) checkAgents(nodes []*node) error {
	for _, n := range nodes {
		if err := c.checkAgent(n); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) jvmArgs() []string {
	// Small heaps and a startup-friendly JIT keep a 2-core machine usable
	// with several nodes running; these brokers never see real load.
	return append([]string{
		"-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-XX:-UsePerfData", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(c.dir, "log4j2.properties"),
		"-cp", c.classpath,
	}, c.jvmExtra...)
}

func (c *Cluster) format(n *node) error {
	args := append(c.jvmArgs(), "kafka.tools.StorageTool", "format",
		"--config", n.props, "--cluster-id="+c.id)
	args = append(args, c.scram...)
	cmd := exec.Command(c.java, args...)
	cmd.SysProcAttr = procAttr()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("node %d: kafka.tools.StorageTool format: %w\n%s", n.id, err, tail(out.String(), 30))
	}
	return nil
}

func (c *Cluster) launch(n *node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc != nil {
		return fmt.Errorf("node %d is already running (pid %d)", n.id, n.proc.Pid)
	}
	logf, err := os.OpenFile(n.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("node %d: open log: %w", n.id, err)
	}
	fmt.Fprintf(logf, "==== kafkatest: starting node %d at %s ====\n", n.id, time.Now().Format(time.RFC3339Nano))
	args := c.jvmArgs()
	if c.trainArchive != "" {
		args = append(args, "-XX:ArchiveClassesAtExit="+c.trainArchive)
	}
	if c.agentArg != "" {
		args = append(args, c.agentArg)
	}
	args = append(args, "kafka.Kafka", n.props)
	cmd := exec.Command(c.java, args...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("node %d: start java: %w", n.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	n.proc, n.done = cmd.Process, done
	return nil
}

// waitReady polls each node in want over its own client listener until its
// Metadata lists every node in want and a controller; it never sleeps on a
// guess of how long Kafka takes.
func (c *Cluster) waitReady(ctx context.Context, want []*node) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ids := make([]int32, 0, len(want))
	for _, n := range want {
		ids = append(ids, n.id)
	}
	var g errgroup.Group
	for _, n := range want {
		g.Go(func() error { return c.waitNode(ctx, n, ids) })
	}
	return g.Wait()
}

func (c *Cluster) waitNode(ctx context.Context, n *node, ids []int32) error {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return fmt.Errorf("node %d is not running", n.id)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.external), kgo.DialTimeout(time.Second), kgo.RequestRetries(0))
	if err != nil {
		return fmt.Errorf("node %d: readiness client: %w", n.id, err)
	}
	defer cl.Close()
	seed := cl.SeedBrokers()[0]
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		last = probe(ctx, seed, c.id, ids)
		if last == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("node %d exited while starting; log tail:\n%s", n.id, tail(readFile(n.logPath), 40))
		case <-ctx.Done():
			return fmt.Errorf("node %d not ready after %v: %v", n.id, c.timeout, last)
		case <-tick.C:
		}
	}
}

// probe also checks the cluster id: should another process have taken the
// port, its broker must not pass for ours.
func probe(ctx context.Context, b *kgo.Broker, clusterID string, ids []int32) error {
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // no topics, only brokers
	kresp, err := b.Request(pctx, req)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	if resp.ClusterID == nil || *resp.ClusterID != clusterID {
		got := "none"
		if resp.ClusterID != nil {
			got = *resp.ClusterID
		}
		return fmt.Errorf("the broker on this port reports cluster id %s, want %s", got, clusterID)
	}
	var have []int32
	for _, br := range resp.Brokers {
		have = append(have, br.NodeID)
	}
	for _, id := range ids {
		if !slices.Contains(have, id) {
			return fmt.Errorf("metadata lists brokers %v, want %v", have, ids)
		}
	}
	if resp.ControllerID < 0 {
		return errors.New("metadata names no controller")
	}
	return nil
}

// ClusterID returns the cluster id storage was formatted with.
func (c *Cluster) ClusterID() string { return c.id }

// Version returns the Apache Kafka release the cluster runs.
func (c *Cluster) Version() string { return c.version }

// BootstrapAddrs returns every node's client listener address (not the
// advertised one), in node id order.
func (c *Cluster) BootstrapAddrs() []string {
	addrs := make([]string, 0, len(c.nodes))
	for _, n := range c.nodes {
		addrs = append(addrs, n.external)
	}
	return addrs
}

// NodeIDs returns the node ids, 1..n.
func (c *Cluster) NodeIDs() []int32 {
	ids := make([]int32, 0, len(c.nodes))
	for _, n := range c.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

// ListenerAddr returns the address node id's client listener is bound to, where
// a Forwarder standing in for its advertised address should forward to.
func (c *Cluster) ListenerAddr(id int32) (string, error) {
	n, err := c.node(id)
	if err != nil {
		return "", err
	}
	return n.external, nil
}

// AdvertisedAddr returns the client address node id puts in Metadata.
func (c *Cluster) AdvertisedAddr(id int32) (string, error) {
	n, err := c.node(id)
	if err != nil {
		return "", err
	}
	return n.advertised, nil
}

// DirectDial returns a kgo.Dialer option that connects to a node's own
// client listener whenever Metadata sends the client to that node's
// advertised address, so the client reaches this cluster whatever a
// Forwarder in between is currently pointing at.
func (c *Cluster) DirectDial() kgo.Opt {
	direct := make(map[string]string)
	for _, n := range c.nodes {
		direct[n.advertised] = n.external
	}
	var d net.Dialer
	return kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		if to, ok := direct[host]; ok {
			host = to
		}
		return d.DialContext(ctx, network, host)
	})
}

// CountRecords counts the records of topic in this cluster (see the package
// function CountRecords), talking to the nodes directly (DirectDial).
func (c *Cluster) CountRecords(ctx context.Context, topic string) (int64, error) {
	return CountRecords(ctx, topic, kgo.SeedBrokers(c.BootstrapAddrs()...), c.DirectDial())
}

// LogPath returns the file node id's stdout and stderr go to.
func (c *Cluster) LogPath(id int32) (string, error) {
	n, err := c.node(id)
	if err != nil {
		return "", err
	}
	return n.logPath, nil
}

// Logs returns what node id has logged so far, across restarts.
func (c *Cluster) Logs(id int32) (string, error) {
	n, err := c.node(id)
	if err != nil {
		return "", err
	}
	return readFile(n.logPath), nil
}

// LogTail returns the last lines lines of node id's log.
func (c *Cluster) LogTail(id int32, lines int) (string, error) {
	logs, err := c.Logs(id)
	if err != nil {
		return "", err
	}
	return tail(logs, lines), nil
}

// Stop shuts node id down gracefully (SIGTERM) and waits for it to exit; if it
// has not after a minute it is killed and Stop reports that.
func (c *Cluster) Stop(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	return n.stop(syscall.SIGTERM, time.Minute)
}

// Kill ends node id at once (SIGKILL), like a crash, and waits for it to exit.
func (c *Cluster) Kill(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	return n.stop(syscall.SIGKILL, 30*time.Second)
}

// Restart starts node id again with the same ports, data directory and log
// file, stopping it gracefully first if it is running, and waits until it
// and every other running node list each other in Metadata.
func (c *Cluster) Restart(id int32) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	if err := n.stop(syscall.SIGTERM, time.Minute); err != nil {
		return err
	}
	if err := c.launch(n); err != nil {
		return err
	}
	var running []*node
	for _, m := range c.nodes {
		if m.running() {
			running = append(running, m)
		}
	}
	if err := c.waitReady(context.Background(), running); err != nil {
		return err
	}
	return c.checkAgent(n)
}

// Running reports whether node id's process is alive.
func (c *Cluster) Running(id int32) bool {
	n, err := c.node(id)
	return err == nil && n.running()
}

func (c *Cluster) node(id int32) (*node, error) {
	for _, n := range c.nodes {
		if n.id == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("kafkatest: no node %d in this cluster (nodes are 1..%d)", id, len(c.nodes))
}

func (n *node) running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// stop signals node's process and waits for it; a process that ignores sig
// until timeout is killed. Stopping a stopped node is a no-op.
func (n *node) stop(sig syscall.Signal, timeout time.Duration) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.proc == nil {
		return nil
	}
	_ = n.proc.Signal(sig) // fails only if it already exited, which done shows
	var err error
	select {
	case <-n.done:
	case <-time.After(timeout):
		_ = n.proc.Kill()
		<-n.done
		err = fmt.Errorf("kafkatest: node %d did not exit within %v of %v and was killed", n.id, timeout, sig)
	}
	n.proc, n.done = nil, nil
	return err
}

// exited reports whether n's process has ended (a crash; stop clears
// done, so a node this package stopped is not reported).
func (n *node) exited() bool {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return true
	default:
		return false
	}
}

func (c *Cluster) killAll() {
	for _, n := range c.nodes {
		_ = n.stop(syscall.SIGKILL, 30*time.Second)
	}
}

func (c *Cluster) cleanup() {
	if c.t != nil && c.t.Failed() {
		for _, n := range c.nodes {
			c.t.Logf("kafkatest: %s", failureReport(n.id, n.logPath, readFile(n.logPath), n.exited()))
		}
	}
	// The data is thrown away with the temp dir, so there is nothing a
	// graceful shutdown would save.
	c.killAll()
}

// Close ends every node at once (SIGKILL: the data is thrown away, so a
// graceful shutdown would save nothing) and removes the directory
// [StartCluster] made. A cluster from [Start] is closed by t.Cleanup; Close
// may be called too. Close is idempotent and returns the directory
// removal's error.
func (c *Cluster) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.killAll()
		if c.root != "" {
			err = os.RemoveAll(c.root)
		}
	})
	return err
}

func (c *Cluster) bindFailed() bool {
	for _, n := range c.nodes {
		if strings.Contains(readFile(n.logPath), "Address already in use") {
			return true
		}
	}
	return false
}

func readFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	return string(b)
}

func serverProperties(n *node, voters string, cfg config) string {
	rf := min(cfg.nodes, 3)
	minISR := min(cfg.nodes, 2)
	p := map[string]string{
		"process.roles":                    "broker,controller",
		"node.id":                          strconv.Itoa(int(n.id)),
		"controller.quorum.voters":         voters,
		"listeners":                        "EXTERNAL://" + n.external + ",INTERNAL://" + n.internal + ",CONTROLLER://" + n.controller,
		"advertised.listeners":             "EXTERNAL://" + n.advertised + ",INTERNAL://" + n.internal,
		"listener.security.protocol.map":   "EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"inter.broker.listener.name":       "INTERNAL",
		"controller.listener.names":        "CONTROLLER",
		"log.dirs":                         filepath.Join(n.dir, "data"),
		"group.initial.rebalance.delay.ms": "0",
		// Internal topics sized for a test, replicated as in production
		// where the cluster is big enough.
		"offsets.topic.replication.factor":                 strconv.Itoa(rf),
		"offsets.topic.num.partitions":                     "5",
		"transaction.state.log.replication.factor":         strconv.Itoa(rf),
		"transaction.state.log.min.isr":                    strconv.Itoa(minISR),
		"transaction.state.log.num.partitions":             "5",
		"share.coordinator.state.topic.replication.factor": strconv.Itoa(rf),
		"share.coordinator.state.topic.min.isr":            strconv.Itoa(minISR),
		"share.coordinator.state.topic.num.partitions":     "5",
		// A dead node is fenced (and leaves every ISR) after 3s, not 9s.
		"broker.heartbeat.interval.ms": "500",
		"broker.session.timeout.ms":    "3000",
		// Fewer threads and a small cleaner buffer for a 256 MB heap.
		"num.network.threads":               "2",
		"num.io.threads":                    "2",
		"background.threads":                "2",
		"num.recovery.threads.per.data.dir": "1",
		"log.cleaner.dedupe.buffer.size":    "16777216",
	}
	if cfg.secure != nil {
		secureProperties(p, n, cfg.secure)
	}
	for k, v := range cfg.brokerConfig {
		p[k] = v
	}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("# written by kconsist integration/kafkatest\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, p[k])
	}
	return b.String()
}

// log4jConfig sends everything to stdout, which goes to the node's log file.
// The full config dump at startup is thousands of lines that bury what
// matters when a test fails. Log4j's own shutdown hook is off: it would stop
// logging before Kafka's hook has logged its shutdown.
const log4jConfig = `status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = warn
`
