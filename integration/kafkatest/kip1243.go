package kafkatest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The KIP-1243 agent's sources (kip1243agent/): built with Maven at test
// time, never committed as a jar.
//
//go:embed kip1243agent/pom.xml kip1243agent/src
var agentSources embed.FS

// agentMarker starts every line the agent logs.
const agentMarker = "kip1243-agent: "

// agentClasses are the classes the agent must have instrumented by the time
// a node answers Metadata; a node whose log lacks one runs without
// KIP-1243, and Start fails instead of testing plain Kafka.
var agentClasses = []string{
	"org.apache.kafka.common.requests.RequestHeader",
	"org.apache.kafka.image.loader.metrics.MetadataLoaderMetrics",
	"kafka.server.KafkaApis",
	"kafka.server.ControllerApis",
	"org.apache.kafka.common.requests.RequestContext",
	"org.apache.kafka.server.ForwardingManagerImpl",
	"kafka.network.RequestChannel",
	"org.apache.kafka.raft.KafkaRaftClient",
	"org.apache.kafka.network.Request",
}

// agentLog4j quiets org.apache.kafka.common.protocol.Errors, which warns
// "Unexpected error code" on every INCONSISTENT_METADATA answer.
const agentLog4j = `logger.kip1243errors.name = org.apache.kafka.common.protocol.Errors
logger.kip1243errors.level = error
`

// DefaultInconsistentMetadataCode is the provisional code of
// INCONSISTENT_METADATA the agent answers with unless told otherwise
// (KIP-1243 has no code upstream; Kafka 4.4's codes end at 136).
const DefaultInconsistentMetadataCode int16 = 1243

// KIP1243Setting configures the KIP-1243 agent (see [KIP1243]).
type KIP1243Setting func(*agentConfig) error

type agentConfig struct {
	hold         bool
	bound        time.Duration
	boundSet     bool
	code         int16
	tokensOff    bool
	closeOnMiss  bool
	closeRefused bool
	judgedToken  bool
	writeHold    time.Duration
	require      []string // extra class#method the agent must find
}

// KIP1243 starts every node with the KIP-1243 Java agent
// (kip1243agent/, built with Maven on first use and cached next to the
// Kafka download, keyed by a hash of its sources): an unmodified Kafka
// 4.4.0 broker then speaks KIP-1243 (KIP1243.md quotes the KIP for each
// rule). It stamps every flexible response header with tag 0 {cluster id,
// the last metadata offset the broker applied}, reads tag 0 of every
// request with header v2 (ApiVersions v3+ included), refuses a request
// naming another cluster (REBOOTSTRAP_REQUIRED, or a closed connection
// where the answer has no error field), and parks a request whose token
// the broker has not applied yet until it has; a request still behind
// when its bound ends (the agent's, or the request's own timeout if
// shorter) is answered INCONSISTENT_METADATA, or its connection closed
// where the answer has no place for an error. The answer to a forwarded
// write waits until the answering broker has applied the write. Without
// settings it holds for up to 30s and answers INCONSISTENT_METADATA with
// the broker's newest offset. Start fails the test, quoting the agent, if
// the agent did not attach to every node.
func KIP1243(settings ...KIP1243Setting) Opt {
	return func(c *config) error {
		a := &agentConfig{hold: true, code: DefaultInconsistentMetadataCode}
		for _, s := range settings {
			if err := s(a); err != nil {
				return fmt.Errorf("KIP1243: %w", err)
			}
		}
		c.kip1243 = a
		return nil
	}
}

// KIP1243Variant is one of the ways KIP-1243 lets a broker treat a request
// it is behind on, as agent settings.
type KIP1243Variant struct {
	Name     string
	Settings []KIP1243Setting
}

// KIP1243Variants returns the variants the agent offers, each setting
// value at least once: hold (the default), error at once with the
// newest or the judged offset in the INCONSISTENT_METADATA header, and
// error by closing the connection.
func KIP1243Variants() []KIP1243Variant {
	return []KIP1243Variant{
		{Name: "hold", Settings: nil},
		{Name: "error-newest", Settings: []KIP1243Setting{KIP1243Error(0)}},
		{Name: "error-judged", Settings: []KIP1243Setting{KIP1243Error(0), KIP1243JudgedErrorToken()}},
		{Name: "error-close", Settings: []KIP1243Setting{KIP1243Error(0), KIP1243CloseInsteadOfError()}},
	}
}

// KIP1243Hold parks a request whose token is ahead of the broker until the
// broker has applied it, and refuses it if it has not after bound, or after
// the request's own timeout if that is shorter (the default mode; the
// default bound is 30s).
func KIP1243Hold(bound time.Duration) KIP1243Setting {
	return func(a *agentConfig) error {
		if bound <= 0 {
			return fmt.Errorf("KIP1243Hold(%v): want a positive bound", bound)
		}
		a.hold, a.bound, a.boundSet = true, bound, true
		return nil
	}
}

// KIP1243Error refuses a request whose token is ahead of the broker: at
// once with bound 0, else after holding it up to bound (or the request's
// own timeout if that is shorter).
func KIP1243Error(bound time.Duration) KIP1243Setting {
	return func(a *agentConfig) error {
		if bound < 0 {
			return fmt.Errorf("KIP1243Error(%v): want a bound of 0 or more", bound)
		}
		a.hold, a.bound, a.boundSet = false, bound, true
		return nil
	}
}

// KIP1243CloseInsteadOfError makes a broker refuse a request it is behind
// on by closing its connection, never answering INCONSISTENT_METADATA.
func KIP1243CloseInsteadOfError() KIP1243Setting {
	return func(a *agentConfig) error {
		a.closeRefused = true
		return nil
	}
}

// KIP1243JudgedErrorToken makes the header token of an
// INCONSISTENT_METADATA answer the offset the request was judged at,
// instead of the broker's newest offset as the answer is built.
func KIP1243JudgedErrorToken() KIP1243Setting {
	return func(a *agentConfig) error {
		a.judgedToken = true
		return nil
	}
}

// KIP1243WriteHold bounds how long the answer to a forwarded write waits
// for the answering broker to apply the write before the API's timeout
// error is answered instead (never longer than the request's own
// timeout); the default is 30s.
func KIP1243WriteHold(d time.Duration) KIP1243Setting {
	return func(a *agentConfig) error {
		if d <= 0 {
			return fmt.Errorf("KIP1243WriteHold(%v): want a positive bound", d)
		}
		a.writeHold = d
		return nil
	}
}

// KIP1243ErrorCode sets the code of INCONSISTENT_METADATA; the default is
// [DefaultInconsistentMetadataCode].
func KIP1243ErrorCode(code int16) KIP1243Setting {
	return func(a *agentConfig) error {
		if code <= 0 {
			return fmt.Errorf("KIP1243ErrorCode(%d): want a positive code", code)
		}
		a.code = code
		return nil
	}
}

// KIP1243TokensOff makes the brokers neither stamp response headers nor read
// request tokens: plain Kafka with the agent attached, for comparisons.
func KIP1243TokensOff() KIP1243Setting {
	return func(a *agentConfig) error {
		a.tokensOff = true
		return nil
	}
}

// KIP1243CloseOnMismatch makes a broker close the connection of a request
// whose header names another cluster, instead of answering
// REBOOTSTRAP_REQUIRED.
func KIP1243CloseOnMismatch() KIP1243Setting {
	return func(a *agentConfig) error {
		a.closeOnMiss = true
		return nil
	}
}

// kip1243RequireHook makes the agent require one more class#method, which
// tests name wrongly to see an agent that cannot attach.
func kip1243RequireHook(hook string) KIP1243Setting {
	return func(a *agentConfig) error {
		if !strings.Contains(hook, "#") || strings.ContainsAny(hook, ",;= ") {
			return fmt.Errorf("requireHook(%q): want class#method", hook)
		}
		a.require = append(a.require, hook)
		return nil
	}
}

// args renders the -javaagent argument string.
func (a *agentConfig) args() string {
	parts := []string{"mode=hold"}
	if !a.hold {
		parts[0] = "mode=error"
	}
	if a.boundSet {
		parts = append(parts, "holdMs="+strconv.FormatInt(a.bound.Milliseconds(), 10))
	}
	if a.closeRefused {
		parts = append(parts, "inconsistent=close")
	}
	if a.judgedToken {
		parts = append(parts, "errorToken=judged")
	}
	if a.writeHold > 0 {
		parts = append(parts, "writeHoldMs="+strconv.FormatInt(a.writeHold.Milliseconds(), 10))
	}
	parts = append(parts, "errorCode="+strconv.Itoa(int(a.code)))
	if a.tokensOff {
		parts = append(parts, "tokens=off")
	}
	if a.closeOnMiss {
		parts = append(parts, "mismatch=close")
	}
	if len(a.require) > 0 {
		parts = append(parts, "requireHook="+strings.Join(a.require, ";"))
	}
	return strings.Join(parts, ",")
}

var agentJars struct {
	sync.Mutex
	path map[string]string // source hash -> jar
}

// AgentJar returns the path of the KIP-1243 agent jar, building it with
// Maven (mvn -q package) into the cache directory if the jar for these
// sources is not there yet. Builds are keyed by a hash of the sources, so
// an edit rebuilds, and guarded by a file lock, so parallel test binaries
// build once. Start it with `java -javaagent:JAR[=key=value,...]` next to
// Kafka's libs on the class path.
func AgentJar(ctx context.Context) (string, error) {
	sum, err := agentHash()
	if err != nil {
		return "", err
	}
	agentJars.Lock()
	defer agentJars.Unlock()
	if p, ok := agentJars.path[sum]; ok {
		return p, nil
	}
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	final := filepath.Join(dir, "kip1243-agent-"+sum[:16]+".jar")
	if _, err := os.Stat(final); err != nil {
		if err := buildAgent(ctx, dir, final); err != nil {
			return "", err
		}
	}
	if agentJars.path == nil {
		agentJars.path = make(map[string]string)
	}
	agentJars.path[sum] = final
	return final, nil
}

func agentHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(agentSources, "kip1243agent", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := agentSources.ReadFile(path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("kafkatest: hash agent sources: %w", err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func buildAgent(ctx context.Context, dir, final string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kafkatest: create cache directory: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".agent.lock"))
	if err != nil {
		return fmt.Errorf("kafkatest: lock %s: %w", dir, err)
	}
	defer unlock()
	if _, err := os.Stat(final); err == nil { // another process built it while we waited
		return nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return fmt.Errorf("%w: mvn (Apache Maven) is not on PATH; it builds the KIP-1243 agent (e.g. apt-get install maven)", ErrMissingTool)
	}
	work, err := os.MkdirTemp(dir, "agent-build-")
	if err != nil {
		return fmt.Errorf("kafkatest: agent build directory: %w", err)
	}
	defer os.RemoveAll(work)
	err = fs.WalkDir(agentSources, "kip1243agent", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(work, filepath.FromSlash(path))
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := agentSources.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return fmt.Errorf("kafkatest: copy agent sources: %w", err)
	}
	pom := filepath.Join(work, "kip1243agent", "pom.xml")
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", pom, "package")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kafkatest: mvn could not build the KIP-1243 agent: %w\n%s", err, tail(out.String(), 40))
	}
	built := filepath.Join(work, "kip1243agent", "target", "kip1243-agent.jar")
	if err := os.Rename(built, final); err != nil {
		return fmt.Errorf("kafkatest: move the agent jar into place: %w", err)
	}
	return nil
}

// ErrAgent is returned (wrapped, quoting the agent) when the KIP-1243 agent
// did not attach to a node: the node then runs as plain Kafka, and a test
// of KIP-1243 must not pass on it.
var ErrAgent = errors.New("kafkatest: the KIP-1243 agent is not active")

// checkAgent reads the log of n's current run: the agent must have said
// READY, instrumented every class of agentClasses and (unless tokens are
// off) stamped a response, and must not have said FAILED.
func (c *Cluster) checkAgent(n *node) error {
	if c.agent == nil {
		return nil
	}
	logs := readFile(n.logPath)
	if i := strings.LastIndex(logs, "==== kafkatest: starting node"); i >= 0 {
		logs = logs[i:]
	}
	var failed, missing []string
	for _, line := range strings.Split(logs, "\n") {
		if i := strings.Index(line, agentMarker+"FAILED"); i >= 0 {
			failed = append(failed, line[i+len(agentMarker):])
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w on node %d (the broker runs as plain Kafka): %s", ErrAgent, n.id, strings.Join(failed, " | "))
	}
	if !strings.Contains(logs, agentMarker+"READY") {
		return fmt.Errorf("%w on node %d: its log has no %q line; was -javaagent given?", ErrAgent, n.id, agentMarker+"READY")
	}
	for _, cl := range agentClasses {
		if !strings.Contains(logs, agentMarker+"instrumented "+cl+"\n") {
			missing = append(missing, cl)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w on node %d: classes not instrumented: %s", ErrAgent, n.id, strings.Join(missing, ", "))
	}
	if !c.agent.tokensOff && !strings.Contains(logs, agentMarker+"ACTIVE") {
		return fmt.Errorf("%w on node %d: no response header was stamped while it started", ErrAgent, n.id)
	}
	return nil
}

// AgentLog returns the lines the KIP-1243 agent logged on node id, across
// restarts, without their prefix.
func (c *Cluster) AgentLog(id int32) ([]string, error) {
	logs, err := c.Logs(id)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		if i := strings.Index(line, agentMarker); i >= 0 {
			out = append(out, line[i+len(agentMarker):])
		}
	}
	return out, nil
}

// DataDir returns node id's log directory (log.dirs), which holds its copy
// of the metadata log, __cluster_metadata-0.
func (c *Cluster) DataDir(id int32) (string, error) {
	n, err := c.node(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(n.dir, "data"), nil
}
