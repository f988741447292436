package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// machine describes where the numbers were measured.
type machine struct {
	CPUs      int
	CPUModel  string
	GoVersion string
	OS        string
	Commit    string
	Date      string
}

func thisMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH,
		Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"), CPUModel: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if exec.Command("git", "diff", "--quiet", "HEAD", "--", ".").Run() != nil {
			m.Commit += " with uncommitted changes in the working tree"
		}
	}
	return m
}

func (m machine) String() string {
	s := fmt.Sprintf("%d CPUs (`nproc`), %s, %s, %s, %s", m.CPUs, m.CPUModel, m.GoVersion, m.OS, m.Date)
	if m.Commit != "" {
		s += ", commit " + m.Commit
	}
	return s
}

// Marker pairs delimit the generated sections; everything else in the file
// is left as it is.
const (
	localSection = "local"
	kafkaSection = "realkafka"
)

func beginMarker(section string) string {
	return "<!-- BEGIN GENERATED " + section + ": written by go run ./integration/bench; edits inside are lost -->"
}
func endMarker(section string) string { return "<!-- END GENERATED " + section + " -->" }

// skeleton is a new BENCHMARKS.md.
func skeleton() string {
	return "# Benchmarks\n\n## SDK overhead, read-your-writes and misroute recovery (local cluster)\n\n" +
		beginMarker(localSection) + "\n" + endMarker(localSection) + "\n\n" +
		"## Overhead on real Apache Kafka 4.4\n\n" +
		beginMarker(kafkaSection) + "\n" + endMarker(kafkaSection) + "\n\n" +
		"## Consumer throughput\n\n" +
		beginMarker(consumeSection) + "\n" + endMarker(consumeSection) + "\n\n" +
		beginMarker(kconsumeSection) + "\n" + endMarker(kconsumeSection) + "\n\n" +
		"## Micro-benchmarks\n\n## RELIABILITY\n"
}

// replaceSection puts body between the markers of section in doc, adding
// the markers at the end if doc lacks them.
func replaceSection(doc, section, body string) string {
	b, e := beginMarker(section), endMarker(section)
	i := strings.Index(doc, b)
	j := strings.Index(doc, e)
	if i < 0 || j < i {
		if !strings.HasSuffix(doc, "\n") {
			doc += "\n"
		}
		return doc + "\n" + b + "\n" + body + e + "\n"
	}
	return doc[:i+len(b)] + "\n" + body + doc[j:]
}

// writeSections updates path (creating it from the skeleton) with the
// given sections.
func writeSections(path string, sections map[string]string) error {
	doc := skeleton()
	if b, err := os.ReadFile(path); err == nil {
		doc = string(b)
	} else if !os.IsNotExist(err) {
		return err
	}
	for _, name := range []string{localSection, kafkaSection, consumeSection, kconsumeSection, misrouteSection, kmisrouteSection, rywKafkaSection, nativeSection, scaleSection, scaleKafkaSection, drSection} {
		if body, ok := sections[name]; ok {
			doc = replaceSection(doc, name, body)
		}
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}

func f1(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.1f", x)
}

func f2(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.2f", x)
}

func f3(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.3f", x)
}

func yesNo(ok bool) string {
	if ok {
		return "**met**"
	}
	return "**missed**"
}

func spreadText(s spread, f func(float64) string) string {
	return fmt.Sprintf("%s [%s–%s]", f(s.Median), f(s.Min), f(s.Max))
}

func relPath(from, to string) string {
	rel, err := filepath.Rel(filepath.Dir(from), to)
	if err != nil {
		return to
	}
	return filepath.ToSlash(rel)
}

// overheadMarkdown writes the overhead table of r.
func overheadMarkdown(w *bytes.Buffer, r *overheadResult) {
	c := r.Cfg
	fmt.Fprintf(w, "Where: %s. Topic of 3 partitions. Three clients, all acks=all, idempotent, no compression, linger 0, %d-byte values: "+
		"the factory producer (`factory.NewProducer(f, producer.Bytes(), producer.Bytes())`, `ProduceAsync`), a plain "+
		"`kgo.Client` (`Produce`), and a second plain `kgo.Client`, the **control**, on the same cluster in the same process. "+
		"The control differs from plain kgo in nothing: its ratio to plain kgo is the harness's own error, what this run "+
		"reports when there is no overhead. The factory is compared with both plain clients (**kgo ×2**: per round, the geometric "+
		"mean of their two values; for latency, their samples pooled together), so that a burst of either that met a slow "+
		"moment of the cluster weighs half as much. So the factory's ratio is a little less noisy than the control's (for "+
		"independent rounds, about √(3/4) of its spread in log terms), and the two share the control's bursts: the control column "+
		"shows the harness's error, not an independent check of the factory column.\n\n", r.Where, c.ValueSize)
	fmt.Fprintf(w, "Repetitions: %d interleaved rounds in %d blocks; each block makes three fresh clients and warms them up untimed, "+
		"so that what differs between two client instances without being the SDK averages out. The order of the clients "+
		"cycles through all six permutations. Each round, for each client in the round's order: a forced GC and a burst of %d async records "+
		"(throughput = records / time from first produce to last acknowledgement; CPU = user + system time of the whole process, "+
		"clients, cluster and Go runtime, during the burst, per record). Then, after another forced GC, %d sequential produces per client, "+
		"each waiting for its acknowledgement (latency), the three clients taking turns record by record so that a slow stretch of "+
		"the cluster or the machine hits them alike. Spread: median [min–max] over rounds. Run time %v.\n\n",
		c.Rounds, max(c.Blocks, 1), c.Records, c.Latencies, r.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "Verdicts use a 95%% bootstrap interval (1000 resamples of the blocks, each with all its rounds): *met* when the whole interval is on the "+
		"target's side, *missed* when it is all on the other side, *not decided* when the run's noise spans the target.\n\n")
	fmt.Fprintf(w, "| metric | factory | plain kgo | control | factory / kgo ×2 | control / plain (harness error) | target | result |\n|---|---|---|---|---|---|---|---|\n")

	// perRound is the cell of a per-round ratio: median, its interval, spread.
	perRound := func(ratios []float64) (string, float64, float64) {
		lo, hi := r.medianCI(ratios)
		sp := spreadOf(ratios)
		return fmt.Sprintf("%s, 95%% CI [%s, %s]; per-round [%s–%s]", f3(sp.Median), f3(lo), f3(hi), f3(sp.Min), f3(sp.Max)), lo, hi
	}
	fcell, tlo, thi := perRound(r.tputRatios(vFactory))
	ccell, _, _ := perRound(r.tputRatios(vControl))
	fmt.Fprintf(w, "| throughput, records/s (median [min–max] of rounds; ratios: median of per-round ratios) | %s | %s | %s | %s | %s | ≥ 0.97 | %s |\n",
		spreadText(spreadOf(r.Tput[vFactory]), f0), spreadText(spreadOf(r.Tput[vPlain]), f0), spreadText(spreadOf(r.Tput[vControl]), f0),
		fcell, ccell, verdict(tlo, thi, 0.97, true))
	if fr := r.cpuRatios(vFactory); fr != nil {
		fcell, _, _ = perRound(fr)
		ccell, _, _ = perRound(r.cpuRatios(vControl))
		fmt.Fprintf(w, "| process CPU per record in the bursts, µs (median [min–max] of rounds) | %s | %s | %s | %s | %s | – | – |\n",
			spreadText(spreadOf(r.CPU[vFactory]), f2), spreadText(spreadOf(r.CPU[vPlain]), f2), spreadText(spreadOf(r.CPU[vControl]), f2),
			fcell, ccell)
	}
	pooled := func(v int, q float64) float64 { return quantile(r.Lat[v], q) }
	latCell := func(v int, q float64) (string, float64, float64) {
		lo, hi := r.pooledCI(v, q)
		ratios := r.p50Ratios(v)
		if q > 0.5 {
			ratios = r.p99Ratios(v)
		}
		return fmt.Sprintf("%s pooled, 95%% CI [%s, %s]; per-round %s", f3(r.pooledRatio(v, q)), f3(lo), f3(hi), spreadText(spreadOf(ratios), f3)), lo, hi
	}
	fcell, _, _ = latCell(vFactory, 0.5)
	ccell, _, _ = latCell(vControl, 0.5)
	fmt.Fprintf(w, "| p50 latency, ms (all %d samples of a client pooled) | %s | %s | %s | %s | %s | – | – |\n",
		len(r.Lat[vFactory]), f3(pooled(vFactory, 0.5)), f3(pooled(vPlain, 0.5)), f3(pooled(vControl, 0.5)), fcell, ccell)
	fcell, plo, phi := latCell(vFactory, 0.99)
	ccell, _, _ = latCell(vControl, 0.99)
	fmt.Fprintf(w, "| p99 latency, ms (all %d samples of a client pooled) | %s | %s | %s | %s | %s | ≤ 1.05 | %s |\n",
		len(r.Lat[vFactory]), f3(pooled(vFactory, 0.99)), f3(pooled(vPlain, 0.99)), f3(pooled(vControl, 0.99)), fcell, ccell,
		verdict(plo, phi, 1.05, false))
	fmt.Fprintf(w, "| failed records | %d | %d | %d | – | – | 0 | %s |\n\n", r.Errors[vFactory], r.Errors[vPlain], r.Errors[vControl],
		yesNo(r.failed() == 0))
}

func f0(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return fmt.Sprintf("%.0f", x)
}

func rywMarkdown(w *bytes.Buffer, rs []rywResult, cfg rywConfig) {
	fmt.Fprintf(w, "Where: a fresh local cluster per lag, 3 brokers, broker 0 applies metadata at once, brokers 1 and 2 after the lag "+
		"(`localcluster.BrokerLag`), wait mode (a lagging broker holds a request whose token it has not applied), "+
		"metadata writes answered at commit, as Kafka 4.4 answers them (`localcluster.WritesAtCommit`). "+
		"One trial: `CreateTopic` (1 partition) through the admin client → first record produced and acknowledged → that record "+
		"consumed from the start of the partition by a consumer assigned to it. Time is from the create call to the record in hand. "+
		"Factory: `f.Admin()`, `factory.NewProducer`, `factory.NewConsumer` of one factory, default settings. Plain: three "+
		"`kgo.Client`s (kadm, producer, consumer) with franz-go's defaults, retries included. Clients are made once per lag "+
		"and warmed with one untimed trial. Before each trial every broker has applied the whole metadata log, so a trial does "+
		"not inherit the lag of the previous one's write.\n\n")
	fmt.Fprintf(w, "Repetitions: %d trials per lag and client, alternating factory/plain; a trial that has not consumed its record after "+
		"%v + lag is a failure. p50/p99/max are over successful trials (nearest rank: with %d trials p99 is the largest but at most one). "+
		"*Stale answers*: answers the cluster served from a broker image older than the write (`localcluster.Stats().StaleAnswers` "+
		"during the trial — UNKNOWN_TOPIC_OR_PARTITION to Produce/Fetch/ListOffsets, Metadata without the topic). *Errors seen*: "+
		"errors the consumer surfaced to the application before the record came.\n\n", cfg.Trials, cfg.Timeout, cfg.Trials)
	fmt.Fprintf(w, "| lag | client | trials | p50 ms | p99 ms | max ms | p50 create / produce / consume ms | failures | trials with stale answers (answers) | errors seen | target: factory p99 ≤ lag + 50 ms, 0 failures |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		for v := range 2 {
			s := r.summary(v)
			target := "–"
			if v == vFactory {
				target = yesNo(s.Failures == 0 && s.P99 <= ms(r.Lag)+50)
			}
			fails := fmt.Sprint(s.Failures)
			for k, n := range s.FailureKinds {
				fails += fmt.Sprintf("; %d× %s", n, strings.ReplaceAll(k, "|", "/"))
			}
			fmt.Fprintf(w, "| %v | %s | %d | %s | %s | %s | %s / %s / %s | %s | %d (%d) | %d | %s |\n",
				r.Lag, variantNames[v], s.N, f1(s.P50), f1(s.P99), f1(s.Max), f1(s.CreateP50), f1(s.ProduceP50), f1(s.ConsumeP50),
				fails, s.StaleTrials, s.StaleAnswers, s.SurfacedErrors, target)
		}
	}
	fmt.Fprintln(w)
}

func chartLinks(w *bytes.Buffer, doc string, charts []string) {
	for _, c := range charts {
		fmt.Fprintf(w, "![%s](%s)\n", strings.TrimSuffix(filepath.Base(c), ".png"), relPath(doc, c))
	}
	fmt.Fprintln(w)
}
