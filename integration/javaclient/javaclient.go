package javaclient

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/kconsist/kconsist/integration/kafkatest"
)

// log4jConfig sends the client's warnings and errors to stderr, where a
// test shows them when it fails (the default configuration prints only
// errors), and the network client's info lines, which tell of
// disconnections and rebootstraps.
const log4jConfig = `rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss.SSS} %-5p %c{1}: %m%n
logger.network.name = org.apache.kafka.clients.NetworkClient
logger.network.level = info
`

// Command returns the command that runs JavaClient.java with args (a mode
// and its arguments, see the program's comment), bound to ctx. It skips
// the test under -short, fails it when java (or mvn, without KAFKA_HOME) is
// missing, and provisions the Kafka jars first (once per machine).
func Command(t testing.TB, ctx context.Context, args ...string) *exec.Cmd {
	t.Helper()
	if testing.Short() {
		t.Skip("javaclient: Java client tests are skipped with -short")
	}
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("javaclient: %v: java is not on PATH; install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)", kafkatest.ErrMissingTool)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	classpath, err := kafkatest.Provision(pctx)
	if err != nil {
		t.Fatalf("javaclient: %v", err)
	}
	log4j := filepath.Join(t.TempDir(), "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(log4jConfig), 0o644); err != nil {
		t.Fatalf("javaclient: %v", err)
	}
	// A short-lived client gains nothing from the optimising compiler or
	// a parallel collector, and on two cores they cost the most.
	jvm := []string{"-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Dlog4j2.configurationFile=" + log4j, "-cp", classpath, programPath(t)}
	cmd := exec.CommandContext(ctx, java, append(jvm, args...)...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// programPath finds JavaClient.java next to this file's source.
func programPath(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "JavaClient.java")
	if !ok {
		t.Fatalf("javaclient: cannot locate JavaClient.java (no caller information)")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("javaclient: %v (built with -trimpath?)", err)
	}
	return p
}
