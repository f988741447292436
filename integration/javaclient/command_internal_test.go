package javaclient

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// stopTB stops Command at its first Fatalf or Skip, as a real *testing.T
// does with runtime.Goexit.
type stopTB struct {
	testing.TB
	msg     string
	skipped bool
}

type stopped struct{}

func (s *stopTB) Helper() {}
func (s *stopTB) Fatalf(format string, args ...any) {
	s.msg = strings.TrimSpace(fmt.Sprintf(format, args...))
	panic(stopped{})
}
func (s *stopTB) Skip(...any) { s.skipped = true; panic(stopped{}) }

func command(tb *stopTB) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(stopped); !ok {
				panic(r)
			}
		}
	}()
	Command(tb, context.Background(), "all", "127.0.0.1:9")
}

// Without java the test fails saying what to install; -short skips first.
func TestCommandWithoutJava(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	tb := &stopTB{TB: t}
	command(tb)
	if testing.Short() {
		require.True(t, tb.skipped, "-short skips the Java tests")
		return
	}
	require.Contains(t, tb.msg, "java is not on PATH")
	require.Contains(t, tb.msg, "install a Java 17+ runtime")
}

// The program is found next to this package's source and the command
// carries the Kafka classpath and the mode.
func TestCommandArgs(t *testing.T) {
	cmd := Command(t, context.Background(), "produce", "127.0.0.1:9", "topic")
	args := strings.Join(cmd.Args, " ")
	require.Contains(t, args, "JavaClient.java produce 127.0.0.1:9 topic")
	require.Contains(t, args, "-cp ")
	require.Contains(t, args, "-Dlog4j2.configurationFile=")
}
