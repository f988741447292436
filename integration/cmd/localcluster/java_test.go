package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/integration/javaclient"
)

// timedLines keeps a process's output lines with when they arrived.
type timedLines struct {
	mu    sync.Mutex
	lines []string
	at    []time.Time
}

func (l *timedLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		l.mu.Lock()
		l.lines, l.at = append(l.lines, sc.Text()), append(l.at, time.Now())
		l.mu.Unlock()
	}
}

// first returns the first line from index from on with prefix, its index and
// when it arrived.
func (l *timedLines) first(prefix string, from int) (string, int, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := from; i < len(l.lines); i++ {
		if strings.HasPrefix(l.lines[i], prefix) {
			return l.lines[i], i, l.at[i], true
		}
	}
	return "", 0, time.Time{}, false
}

func (l *timedLines) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.lines)
}

func (l *timedLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// The misroute of issue 23, driven as a Java user drives it: the command
// runs clusters A and B, the Apache Kafka 4.4 Java producer (idempotent)
// produces to a one-partition topic, and "switch NODE" on the command's
// stdin hands the address of the partition's leader to B. B answers the producer's ApiVersions
// REBOOTSTRAP_REQUIRED, so the producer stalls instead of writing to B;
// the next "switch" hands the address back and the producer recovers with
// every record acknowledged, none failed.
func TestRunSwitchJavaProducer(t *testing.T) {
	if testing.Short() {
		t.Skip("javaclient: Java client tests are skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, errOut, stdin, _, lines := startRun(t, "-brokers", "3", "-second", "-v")
	addrs := strings.Split(lines["bootstrap"], ",")

	// One partition: every record depends on its leader's address, the
	// one switched.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 1, 1, nil, "misroute")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	var leader int32 = -1
	waitFor(t, "every broker to know the topic", func() bool {
		md, err := adm.Metadata(ctx, "misroute")
		if err != nil || md.Topics["misroute"].Err != nil || len(md.Topics["misroute"].Partitions) != 1 {
			return false
		}
		leader = md.Topics["misroute"].Partitions[0].Leader
		return true
	})
	switchLine := fmt.Sprintf("switch %d\n", leader)

	cmd := javaclient.Command(t, ctx, "produce", lines["bootstrap"], "misroute")
	javaIn, err := cmd.StdinPipe()
	require.NoError(t, err)
	javaOut, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var javaErr bytes.Buffer
	cmd.Stderr = &javaErr
	require.NoError(t, cmd.Start())
	java := &timedLines{}
	readDone := make(chan struct{})
	go func() { defer close(readDone); java.read(javaOut) }()
	exited := false
	defer func() {
		if !exited {
			javaIn.Close()
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("java stdout:\n%s\njava stderr:\n%s\ncommand stdout:\n%s", java, javaErr.String(), out)
		}
	}()
	has := func(prefix string, from int) func() bool {
		return func() bool { _, _, _, ok := java.first(prefix, from); return ok }
	}
	waitFor(t, "the Java producer's first 100 acknowledgements", has("acked 100", 0))

	_, err = io.WriteString(stdin, switchLine)
	require.NoError(t, err)
	switched := time.Now()
	waitFor(t, "the switch", func() bool { return strings.Contains(out.String(), "now serves cluster") })
	// Twice: the producer keeps being refused, it does not move on to B.
	waitFor(t, "REBOOTSTRAP_REQUIRED to the Java producer, twice", func() bool {
		return strings.Count(errOut.String(), "answered REBOOTSTRAP_REQUIRED") >= 2
	})
	rejected := time.Now()
	mark := java.len()

	_, err = io.WriteString(stdin, switchLine)
	require.NoError(t, err)
	back := time.Now()
	waitFor(t, "the switch back", func() bool { return strings.Contains(out.String(), "again; REBOOTSTRAP_REQUIRED answered") })
	waitFor(t, "the producer to recover", has("gap ", mark))
	gap, _, recovered, _ := java.first("gap ", mark)

	require.NoError(t, javaIn.Close())
	err = cmd.Wait()
	exited = true
	<-readDone
	require.NoError(t, err, "the Java producer failed")
	total, _, _, ok := java.first("acked ", java.len()-2)
	require.True(t, ok)
	_, _, _, ok = java.first("PASS", 0)
	require.True(t, ok, "every record acknowledged, none failed")

	require.Contains(t, javaErr.String(), "Rebootstrap requested by server due to cluster metadata mismatch", "the producer logged why it rebootstrapped")

	var answered string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, "REBOOTSTRAP_REQUIRED answered") {
			answered = l[strings.Index(l, "REBOOTSTRAP_REQUIRED"):]
		}
	}
	for _, l := range strings.Split(javaErr.String(), "\n") {
		if strings.Contains(strings.ToLower(l), "rebootstrap") {
			t.Log("java: " + l)
		}
	}
	t.Logf("switch -> second REBOOTSTRAP_REQUIRED seen: %v; switch back -> first acknowledgement: %v; producer %s ms without acknowledgements; %s; %s in total",
		rejected.Sub(switched).Round(time.Millisecond), recovered.Sub(back).Round(time.Millisecond), strings.TrimPrefix(gap, "gap "), answered, total)
}
