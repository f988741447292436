package kafkatest

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFailureReportShowsTheCause: a node that crashed logs the cause above
// the lines of its shutdown; the report of a failed test shows the error
// and its stack, not only the tail.
func TestFailureReportShowsTheCause(t *testing.T) {
	lines := []string{
		"[2026-12-06 16:15:59,001] INFO [BrokerServer id=1] Transition from STARTING to STARTED (kafka.server.BrokerServer)",
		"[2026-12-06 16:16:00,100] ERROR [BrokerServer id=1] Fatal error during broker startup. Prepare to shutdown (kafka.server.BrokerServer)",
		"java.lang.OutOfMemoryError: Java heap space",
		"\tat org.apache.kafka.Example.run(Example.java:1)",
		"Caused by: java.lang.IllegalStateException: boom",
		"\t... 18 more",
		"[2026-12-06 16:16:00,277] INFO [ControllerServer id=1] shutting down (kafka.server.ControllerServer)",
		"\tat not.a.stack.of.an.error(Line.java:1)",
	}
	for range 100 { // a shutdown longer than the tail
		lines = append(lines, "[2026-12-06 16:16:00,400] INFO [SocketServer] Shutting down (kafka.network.SocketServer)")
	}
	log := strings.Join(lines, "\n")

	got := firstErrors(log, 40)
	require.Equal(t, strings.Join(lines[1:6], "\n"), got)
	require.Equal(t, lines[1], firstErrors(log, 1), "at most max lines")
	require.Empty(t, firstErrors(strings.Join(lines[7:], "\n"), 40), "a log without errors")

	report := failureReport(1, "/x/kafka.log", log, true)
	require.Contains(t, report, "had exited before the test ended")
	require.Contains(t, report, "OutOfMemoryError")
	require.Contains(t, report, "tail:\n")
	require.NotContains(t, failureReport(1, "/x/kafka.log", log, false), "had exited")
}
