package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// KafkaVersion is the Apache Kafka release that Provision fetches.
const KafkaVersion = "4.4.0"

// ErrMissingTool is returned when java or mvn is not on PATH.
var ErrMissingTool = errors.New("kafkatest: required tool missing")

// pom asks Maven for the broker and what the storage tool and logging need at
// run time. Kafka's own distribution ships log4j2 with the slf4j 1.x binding,
// matching the slf4j-api 1.7 that kafka_2.13 depends on.
const pom = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kconsist.kafkatest</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>` + KafkaVersion + `</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>2.26.1</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>2.26.1</version></dependency>
  </dependencies>
</project>
`

// The dependency plugin is pinned so a fresh machine resolves the same thing.
const copyGoal = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

// provisioned remembers, per cache directory, that Maven has been run in
// this process, so each Start costs one stat at most.
var provisioned struct {
	sync.Mutex
	libs map[string]string
}

// Provision makes Apache Kafka 4.4.0 available and returns a java classpath
// for it (a "dir/*" wildcard). With KAFKA_HOME set it uses $KAFKA_HOME/libs
// and needs no Maven. Otherwise it resolves kafka_2.13 and its runtime
// dependencies with mvn into the cache directory ($KCONSIST_KAFKA_CACHE, or
// kconsist/kafka-4.4.0 in the user cache directory), once per machine.
// Concurrent callers, also in other processes, are safe.
func Provision(ctx context.Context) (classpath string, err error) {
	if home := os.Getenv("KAFKA_HOME"); home != "" {
		libs := filepath.Join(home, "libs")
		jars, _ := filepath.Glob(filepath.Join(libs, "kafka_2.13-*.jar"))
		if len(jars) == 0 {
			return "", fmt.Errorf("kafkatest: KAFKA_HOME=%s has no libs/kafka_2.13-*.jar; unset it or point it at an unpacked Kafka %s distribution", home, KafkaVersion)
		}
		return filepath.Join(libs, "*"), nil
	}
	dir, err := cacheDir()
	if err != nil {
		return "", err
	}
	provisioned.Lock()
	defer provisioned.Unlock()
	libs, ok := provisioned.libs[dir]
	if !ok {
		if libs, err = provisionMaven(ctx, dir); err != nil {
			return "", err
		}
		if provisioned.libs == nil {
			provisioned.libs = make(map[string]string)
		}
		provisioned.libs[dir] = libs
	}
	return filepath.Join(libs, "*"), nil
}

func cacheDir() (string, error) {
	if d := os.Getenv("KCONSIST_KAFKA_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkatest: no cache directory (set KCONSIST_KAFKA_CACHE): %w", err)
	}
	return filepath.Join(base, "kconsist", "kafka-"+KafkaVersion), nil
}

// provisionMaven fills dir/libs. The lock keeps parallel test binaries from
// running Maven on the same local repository at once; the rename makes a
// half-copied libs directory impossible to observe, even where locking is a
// no-op.
func provisionMaven(ctx context.Context, dir string) (string, error) {
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
		return "", fmt.Errorf("%w: mvn (Apache Maven) is not on PATH; install it (e.g. apt-get install maven) or set KAFKA_HOME to an unpacked Kafka %s", ErrMissingTool, KafkaVersion)
	}
	work, err := os.MkdirTemp(dir, "staging-")
	if err != nil {
		return "", fmt.Errorf("kafkatest: staging directory: %w", err)
	}
	defer os.RemoveAll(work)
	if err := os.WriteFile(filepath.Join(work, "pom.xml"), []byte(pom), 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: write pom: %w", err)
	}
	staged := filepath.Join(work, "libs")
	cmd := exec.CommandContext(ctx, mvn, "-q", "-B", "-f", filepath.Join(work, "pom.xml"),
		copyGoal, "-DincludeScope=runtime", "-DoutputDirectory="+staged)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkatest: mvn could not resolve org.apache.kafka:kafka_2.13:%s: %w\n%s", KafkaVersion, err, tail(out.String(), 40))
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
