package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// KafkaVersion is the Apache Kafka release that Provision fetches and Start
// runs unless told otherwise ([Version]).
const KafkaVersion = "4.4.0"

// versions are the Apache Kafka releases Start can run, oldest first: all
// KRaft, all served by Maven Central, all started with the same
// server.properties and StorageTool invocation.
var versions = []string{"3.6.2", "3.9.1", "4.0.0", "4.1.0", "4.2.0", "4.4.0"}

// Versions returns the Apache Kafka releases [Version] accepts, oldest
// first.
func Versions() []string { return slices.Clone(versions) }

func checkVersion(v string) error {
	if !slices.Contains(versions, v) {
		return fmt.Errorf("kafkatest: Apache Kafka version %q is not one this package runs; want one of %s", v, strings.Join(versions, ", "))
	}
	return nil
}

// VersionsEnv is the environment variable that [MatrixVersions] reads.
const VersionsEnv = "KCONSIST_KAFKA_VERSIONS"

// defaultMatrix is what MatrixVersions returns without VersionsEnv: the
// release every claim is made on, and the oldest, whose ApiVersions (v3),
// metadata log and follower catch-up differ most from it. CI runs these;
// the others run with KCONSIST_KAFKA_VERSIONS=all.
var defaultMatrix = []string{"4.4.0", "3.6.2"}

// MatrixVersions returns the Apache Kafka releases that tests meant for
// several versions run on: $KCONSIST_KAFKA_VERSIONS, a comma-separated list
// of releases from [Versions] or "all"; without it 4.4.0 and 3.6.2. A
// release it does not know is an error naming it.
func MatrixVersions() ([]string, error) {
	env := strings.TrimSpace(os.Getenv(VersionsEnv))
	switch env {
	case "":
		return slices.Clone(defaultMatrix), nil
	case "all":
		return Versions(), nil
	}
	var out []string
	for _, v := range strings.Split(env, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		if err := checkVersion(v); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", VersionsEnv, env, err)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s=%q names no version; want a comma-separated list of %s, or all", VersionsEnv, env, strings.Join(versions, ", "))
	}
	return out, nil
}

// ErrMissingTool is returned when java or mvn is not on PATH.
var ErrMissingTool = errors.New("kafkatest: required tool missing")

// pomFor asks Maven for the broker and what the storage tool and logging need at
// run time. Kafka's own distribution ships log4j2 with the slf4j 1.x binding,
// matching the slf4j-api 1.7 that kafka_2.13 depends on.
func pomFor(version string) string {
	return `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kconsist.kafkatest</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>` + version + `</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.26.1</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.26.1</version></dependency>
  </dependencies>
</project>
`
}

// The dependency plugin is pinned so a fresh machine resolves the same thing.
const copyGoal = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

// provisioned remembers, per cache directory, that Maven has been run in
// this process, so each Start costs one stat at most.
var provisioned struct {
	sync.Mutex
	libs map[string]string
}

// Provision makes Apache Kafka 4.4.0 available: ProvisionVersion with
// [KafkaVersion].
func Provision(ctx context.Context) (classpath string, err error) {
	return ProvisionVersion(ctx, KafkaVersion)
}

// ProvisionVersion makes Apache Kafka version (one of [Versions]) available
// and returns a java classpath for it (a "dir/*" wildcard). With KAFKA_HOME
// set to a distribution of that version ($KAFKA_HOME/libs holds
// kafka_2.13-<version>.jar) it uses $KAFKA_HOME/libs and needs no Maven;
// KAFKA_HOME of another version is an error for 4.4.0 and ignored for the
// others. Otherwise it resolves kafka_2.13 and its runtime dependencies
// with mvn into the cache directory, once per machine and version:
// kconsist/kafka-<version> in the user cache directory, or, with
// $KCONSIST_KAFKA_CACHE set, that directory for 4.4.0 and its subdirectory
// kafka-<version> for the others. Concurrent callers, also in other
// processes, are safe.
func ProvisionVersion(ctx context.Context, version string) (classpath string, err error) {
	if err := checkVersion(version); err != nil {
		return "", err
	}
	if home := os.Getenv("KAFKA_HOME"); home != "" {
		libs := filepath.Join(home, "libs")
		if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+version+".jar")); err == nil {
			return filepath.Join(libs, "*"), nil
		}
		if version == KafkaVersion {
			jars, _ := filepath.Glob(filepath.Join(libs, "kafka_2.13-*.jar"))
			if len(jars) == 0 {
				return "", fmt.Errorf("kafkatest: KAFKA_HOME=%s has no libs/kafka_2.13-*.jar; unset it or point it at an unpacked Kafka %s distribution", home, version)
			}
			return "", fmt.Errorf("kafkatest: KAFKA_HOME=%s holds %s, not kafka_2.13-%s.jar; unset it or point it at an unpacked Kafka %s distribution", home, filepath.Base(jars[0]), version, version)
		}
	}
	dir, err := cacheDirFor(version)
	if err != nil {
		return "", err
	}
	provisioned.Lock()
	defer provisioned.Unlock()
	libs, ok := provisioned.libs[dir]
	if !ok {
		if libs, err = provisionMaven(ctx, dir, version); err != nil {
			return "", err
		}
		if provisioned.libs == nil {
			provisioned.libs = make(map[string]string)
		}
		provisioned.libs[dir] = libs
	}
	return filepath.Join(libs, "*"), nil
}

// cacheDir is the cache directory of KafkaVersion, where the KIP-1243
// agent is cached too.
func cacheDir() (string, error) { return cacheDirFor(KafkaVersion) }

// cacheDirFor is the cache directory of Apache Kafka version.
func cacheDirFor(version string) (string, error) {
	if d := os.Getenv("KCONSIST_KAFKA_CACHE"); d != "" {
		if version == KafkaVersion {
			return d, nil
		}
		return filepath.Join(d, "kafka-"+version), nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkatest: no cache directory (set KCONSIST_KAFKA_CACHE): %w", err)
	}
	return filepath.Join(base, "kconsist", "kafka-"+version), nil
}

// provisionMaven fills dir/libs. The lock keeps parallel test binaries from
// running Maven on the same local repository at once; the rename makes a
// half-copied libs directory impossible to observe, even where locking is a
// no-op.
func provisionMaven(ctx context.Context, dir, version string) (string, error) {
	libs := filepath.Join(dir, "libs")
	if complete(libs) {
		return libs, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kafkatest: create cache directory: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", fmt.Errorf("kafkatest: lock cache directory %s: %w", dir, err)
	}
	defer unlock()
	if complete(libs) { // another process finished while we waited
		return libs, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("%w: mvn (Apache Maven) is not on PATH; install it (e.g. apt-get install maven) or set KAFKA_HOME to an unpacked Kafka %s", ErrMissingTool, version)
	}
	work, err := os.MkdirTemp(dir, "staging-")
	if err != nil {
		return "", fmt.Errorf("kafkatest: staging directory: %w", err)
	}
	defer os.RemoveAll(work)
	if err := os.WriteFile(filepath.Join(work, "pom.xml"), []byte(pomFor(version)), 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: write pom: %w", err)
	}
	staged := filepath.Join(work, "libs")
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", filepath.Join(work, "pom.xml"),
		copyGoal, "-DincludeScope=runtime", "-DoutputDirectory="+staged)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkatest: mvn could not resolve org.apache.kafka:kafka_2.13:%s: %w\n%s", version, err, tail(out.String(), 40))
	}
	if err := os.WriteFile(filepath.Join(staged, ".complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: mark libs complete: %w", err)
	}
	if complete(libs) {
		return libs, nil
	}
	_ = os.RemoveAll(libs) // an incomplete leftover from a killed run
	if err := os.Rename(staged, libs); err != nil {
		return "", fmt.Errorf("kafkatest: move libs into place: %w", err)
	}
	return libs, nil
}

func complete(libs string) bool {
	_, err := os.Stat(filepath.Join(libs, ".complete"))
	return err == nil
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// firstErrors returns the first max lines of a Kafka log that report an
// error (log level ERROR or FATAL, or an exception) with the stack lines
// that follow each: a node that crashed logs its cause far above the tail,
// under the lines of its shutdown.
func firstErrors(s string, max int) string {
	var out []string
	inStack := false
	for line := range strings.SplitSeq(s, "\n") {
		if len(out) == max {
			break
		}
		stack := strings.HasPrefix(line, "\tat ") || strings.HasPrefix(line, "Caused by") || strings.HasPrefix(line, "\t...")
		switch {
		case strings.Contains(line, "] ERROR ") || strings.Contains(line, "] FATAL ") || strings.Contains(line, "Exception:") || strings.Contains(line, "Error:"):
			out, inStack = append(out, line), true
		case inStack && stack:
			out = append(out, line)
		default:
			inStack = false
		}
	}
	return strings.Join(out, "\n")
}

// failureReport is what a failed test is told of a node: whether its
// process had exited before the test ended, its log's first errors and its
// tail.
func failureReport(id int32, path, log string, exited bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %d log %s", id, path)
	if exited {
		b.WriteString(" (the node's process had exited before the test ended)")
	}
	if errs := firstErrors(log, 40); errs != "" {
		fmt.Fprintf(&b, "\nfirst errors:\n%s", errs)
	}
	fmt.Fprintf(&b, "\ntail:\n%s", tail(log, 60))
	return b.String()
}
