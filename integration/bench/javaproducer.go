package main

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// misrouteJava is the Java producer's side of the misroute benchmark.
//
//go:embed MisrouteProducer.java
var misrouteJava []byte

// javaLog4j sends the Java client's warnings to stderr, and the network
// client's info lines (disconnections, rebootstraps), which the benchmark
// keeps for its log when something fails.
const javaLog4j = `rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1}: %m%n
logger.network.name = org.apache.kafka.clients.NetworkClient
logger.network.level = info
`

// javaProducer is an Apache Kafka Java producer in a child JVM, driven
// through its stdin (MisrouteProducer.java): one line per record, one line
// back per outcome, in order.
type javaProducer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	dir    string
	stderr *tailBuffer

	mu      sync.Mutex
	pending []func(error) // outcomes not yet read, in send order
	exited  error         // set once stdout ends
}

// startJavaProducer starts the Java producer on bootstrap and topic with the
// client's defaults plus settings ("key=value"), and returns once it is
// ready. It fails with kafkatest.ErrMissingTool when java is not installed.
func startJavaProducer(ctx context.Context, bootstrap, topic string, settings ...string) (*javaProducer, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java producer: %w: java is not on PATH (a Java 17+ runtime)", kafkatest.ErrMissingTool)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	classpath, err := kafkatest.Provision(pctx)
	if err != nil {
		return nil, fmt.Errorf("java producer: %w", err)
	}
	dir, err := os.MkdirTemp("", "kconsist-bench-java-")
	if err != nil {
		return nil, err
	}
	src, log4j := filepath.Join(dir, "MisrouteProducer.java"), filepath.Join(dir, "log4j2.properties")
	if err := errors.Join(os.WriteFile(src, misrouteJava, 0o644), os.WriteFile(log4j, []byte(javaLog4j), 0o644)); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// A short-lived client gains nothing from the optimising compiler or a
	// parallel collector, and on two cores they cost the most.
	args := append([]string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dlog4j2.configurationFile=" + log4j,
		"-cp", classpath, src, bootstrap, topic}, settings...)
	j := &javaProducer{cmd: exec.Command(java, args...), dir: dir, stderr: &tailBuffer{max: 64 << 10}}
	j.cmd.Stderr = j.stderr
	if j.stdin, err = j.cmd.StdinPipe(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	stdout, err := j.cmd.StdoutPipe()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := j.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("java producer: %w", err)
	}
	ready := make(chan struct{})
	go j.read(stdout, ready)
	select {
	case <-ready:
		return j, nil
	case <-ctx.Done():
		j.close()
		return nil, ctx.Err()
	case <-time.After(2 * time.Minute):
		j.close()
		return nil, fmt.Errorf("java producer: not ready after 2 minutes; stderr:\n%s", j.stderr)
	}
}

// read hands every outcome line to the oldest waiting callback.
func (j *javaProducer) read(stdout io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(stdout)
	isReady := false
	for sc.Scan() {
		line := sc.Text()
		if !isReady {
			if line == "ready" {
				isReady = true
				close(ready)
			}
			continue
		}
		var err error
		if line != "ack" {
			err = errors.New("java producer: " + strings.TrimPrefix(line, "fail "))
		}
		j.mu.Lock()
		var done func(error)
		if len(j.pending) > 0 {
			done = j.pending[0]
			j.pending = j.pending[1:]
		}
		j.mu.Unlock()
		if done != nil {
			done(err)
		}
	}
	j.mu.Lock()
	j.exited = fmt.Errorf("java producer exited; stderr:\n%s", j.stderr)
	pending := j.pending
	j.pending = nil
	j.mu.Unlock()
	for _, done := range pending {
		done(j.exited)
	}
}

// send produces one record; done gets its outcome.
func (j *javaProducer) send(done func(error)) {
	j.mu.Lock()
	if j.exited != nil {
		err := j.exited
		j.mu.Unlock()
		done(err)
		return
	}
	j.pending = append(j.pending, done)
	_, err := io.WriteString(j.stdin, "p\n")
	if err != nil {
		j.pending = j.pending[:len(j.pending)-1]
	}
	j.mu.Unlock()
	if err != nil {
		done(fmt.Errorf("java producer: %w", err))
	}
}

// close ends the producer (closing stdin closes it) and waits for the JVM,
// killing it if it takes longer than 20s.
func (j *javaProducer) close() {
	_ = j.stdin.Close()
	done := make(chan struct{})
	go func() { _ = j.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = j.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(j.dir)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
