package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMain lets the test binary stand in for the command when a test runs
// a step in a child process: spawnStep runs os.Executable, which is this
// binary, with -step.
func TestMain(m *testing.M) {
	for _, a := range os.Args[1:] {
		if strings.HasPrefix(a, "-step=") {
			main()
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

func stepNames(o options) []string {
	var names []string
	for _, st := range stepsOf(o) {
		names = append(names, st.name)
	}
	return names
}

// TestStepsOf: the flags select the steps, in the order the command always
// ran them.
func TestStepsOf(t *testing.T) {
	for _, tc := range []struct {
		o    options
		want []string
	}{
		{options{Local: true}, []string{localSection, consumeSection}},
		{options{Local: true, RealKafka: true}, []string{localSection, consumeSection, kconsumeSection, kafkaSection}},
		{options{Local: true, RealKafka: true, RealKafkaRYW: true}, []string{localSection, consumeSection, kconsumeSection, kafkaSection, rywKafkaSection}},
		{options{RealKafkaRYW: true}, []string{rywKafkaSection}},
		{options{RealKafkaRYW: true, KIP1243: true}, []string{nativeSection}},
		{options{Local: true, RealKafka: true, RealKafkaRYW: true, KIP1243: true}, []string{localSection, consumeSection, kconsumeSection, kafkaSection, nativeSection}},
		{options{Local: true, CurvesOnly: true}, []string{scaleSection}},
		{options{Local: true, RealKafka: true, RealKafkaRYW: true, CurvesOnly: true}, []string{scaleSection, scaleKafkaSection}},
		{options{RealKafka: true, CurvesOnly: true}, []string{scaleKafkaSection}},
		{options{Local: true, ConsumeOnly: true, CurvesOnly: true}, nil},
		{options{CurvesOnly: true}, nil},
		{options{Local: true, RealKafkaRYW: true, KIP1243: true, ConsumeOnly: true}, []string{consumeSection}},
		{options{Local: true, ConsumeOnly: true}, []string{consumeSection}},
		{options{Local: true, RealKafka: true, RealKafkaRYW: true, ConsumeOnly: true}, []string{consumeSection, kconsumeSection}},
		{options{Local: true, MisrouteOnly: true}, []string{misrouteSection}},
		{options{Local: true, RealKafka: true, MisrouteOnly: true}, []string{misrouteSection, kmisrouteSection}},
		{options{DRSwitchOnly: true}, []string{drSection}},
		{options{Local: true, RealKafka: true, DRSwitchOnly: true}, []string{drSection}},
		{options{}, nil},
	} {
		require.Equal(t, tc.want, stepNames(tc.o), "%+v", tc.o)
	}
}

// TestChildArgs: a child parses childArgs back into the parent's options,
// with the step to run and the command as the user typed it.
func TestChildArgs(t *testing.T) {
	for _, o := range []options{
		{Quick: true, Scale: 3, Local: true, Out: "x/BENCHMARKS.md", Charts: "x/charts", Command: "go run ./integration/bench -quick -scale 3"},
		{Scale: 1, RealKafka: true, RealKafkaRYW: true, ConsumeOnly: true, MisrouteOnly: true, Out: "B.md", Charts: "c", Command: "go run ./integration/bench -local=false"},
		{Scale: 2, RealKafkaRYW: true, KIP1243: true, Out: "B.md", Charts: "c", Command: "go run ./integration/bench -realkafka-ryw -kip1243 -local=false"},
		{Scale: 1, Local: true, CurvesOnly: true, Out: "B.md", Charts: "c", Command: "go run ./integration/bench -curves-only"},
		{Scale: 1, Local: true, DRSwitchOnly: true, Out: "B.md", Charts: "c", Command: "go run ./integration/bench -drswitch-only"},
	} {
		var got options
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		bindFlags(fs, &got)
		require.NoError(t, fs.Parse(childArgs(o, "consume-local", "/tmp/out.md")))
		require.Empty(t, fs.Args())
		want := o
		want.Step, want.StepOut, want.Isolate = "consume-local", "/tmp/out.md", true
		require.Equal(t, fmt.Sprintf("%+v", want), fmt.Sprintf("%+v", got))
	}
}

// TestKIP1243Flag: -kip1243 parses, turns the real-Kafka read-your-writes
// step into the native one, and is refused where it would do nothing.
func TestKIP1243Flag(t *testing.T) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	bindFlags(fs, &o)
	require.NoError(t, fs.Parse([]string{"-realkafka-ryw", "-kip1243", "-local=false", "-quick"}))
	require.True(t, o.KIP1243)
	require.Equal(t, []string{nativeSection}, stepNames(o))
	require.Equal(t, (10+14)*time.Minute, stepsOf(o)[0].limit(1))

	dir := t.TempDir()
	for _, bad := range []options{
		{KIP1243: true, Local: true},
		{KIP1243: true, RealKafkaRYW: true, ConsumeOnly: true, Local: true},
		{KIP1243: true, RealKafkaRYW: true, MisrouteOnly: true, Local: true},
	} {
		bad.Charts = dir
		bad.spawn = func(context.Context, options, step, time.Duration) (string, error) {
			t.Fatalf("%+v: a step ran", bad)
			return "", nil
		}
		require.ErrorContains(t, run(context.Background(), bad), "-kip1243 needs -realkafka-ryw", "%+v", bad)
	}
}

// TestNativeSectionWritten: the native step's section goes between its
// own markers, added at the end of a report that lacks them, and a second
// run replaces it.
func TestNativeSectionWritten(t *testing.T) {
	out := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(out, []byte(skeleton()), 0o644))
	for _, body := range []string{"first\n", "second\n"} {
		require.NoError(t, writeSections(out, map[string]string{nativeSection: body}))
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		require.Equal(t, 1, strings.Count(string(b), beginMarker(nativeSection)))
		require.Contains(t, string(b), beginMarker(nativeSection)+"\n"+body+endMarker(nativeSection))
		require.True(t, strings.HasPrefix(string(b), skeleton()))
	}
}

// TestRunMergesSteps: run hands every step to spawn, in order, and writes
// the sections they return into one report; a step that fails stops the
// run before the report is written.
func TestRunMergesSteps(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	const manual = "## RELIABILITY\n\nwritten by hand, must survive\n"
	require.NoError(t, os.WriteFile(out, []byte(skeleton()+"\n"+manual), 0o644))
	var order []string
	o := options{Local: true, RealKafka: true, Isolate: true, Scale: 2, Out: out, Charts: dir,
		spawn: func(_ context.Context, _ options, st step, limit time.Duration) (string, error) {
			order = append(order, st.name)
			require.Equal(t, st.limit(2), limit)
			return "body of " + st.name + "\n", nil
		}}
	require.NoError(t, run(context.Background(), o))
	require.Equal(t, stepNames(o), order)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	require.Contains(t, doc, manual)
	for _, name := range order {
		require.Contains(t, doc, beginMarker(name)+"\nbody of "+name+"\n"+endMarker(name))
	}

	o.spawn = func(_ context.Context, _ options, st step, _ time.Duration) (string, error) {
		if st.name == consumeSection {
			return "", fmt.Errorf("step %s (child process): exit status 1", st.name)
		}
		return "new body\n", nil
	}
	require.ErrorContains(t, run(context.Background(), o), "consume-local (child process)")
	after, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, doc, string(after), "a failed run leaves the report alone")
}

// TestChildRefusesOtherSteps: a child runs only a step its flags ask for.
func TestChildRefusesOtherSteps(t *testing.T) {
	dir := t.TempDir()
	err := run(context.Background(), options{Local: true, ConsumeOnly: true, Step: localSection, StepOut: filepath.Join(dir, "x"), Charts: dir})
	require.ErrorContains(t, err, `-step "local": not a step of this run (its steps: consume-local)`)
	err = run(context.Background(), options{Local: true, Step: localSection, Charts: dir})
	require.ErrorContains(t, err, "-step needs -step-out")
}

// TestStepInChildProcess runs the cheapest step (-consume-only -quick on
// the local cluster) as the command does: in a child process, whose log
// comes back through Logf and whose section lands in the report.
func TestStepInChildProcess(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "BENCHMARKS.md")
	require.NoError(t, os.WriteFile(out, []byte(skeleton()), 0o644))
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
		t.Logf(format, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	require.NoError(t, run(ctx, options{Quick: true, Local: true, ConsumeOnly: true, Isolate: true, Out: out, Charts: dir,
		Command: "go run ./integration/bench -consume-only -quick", Logf: logf}))

	mu.Lock()
	log := strings.Join(lines, "\n")
	mu.Unlock()
	m := regexp.MustCompile(`step consume-local: running in process (\d+)`).FindStringSubmatch(log)
	require.NotNil(t, m, "the child's log did not come through:\n%s", log)
	pid, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.NotEqual(t, os.Getpid(), pid, "the step ran in the test's own process")

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	doc := string(b)
	local := doc[strings.Index(doc, beginMarker(consumeSection)):strings.Index(doc, endMarker(consumeSection))]
	require.Contains(t, local, "Command: `go run ./integration/bench -consume-only -quick`")
	for _, name := range readerNames {
		require.Greater(t, leading(t, cells(t, local, "| "+name+" |")[1]), 1000.0, "%s: records/s", name)
	}
	// Only that step ran.
	require.Contains(t, doc, beginMarker(localSection)+"\n"+endMarker(localSection))
}
