package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"runtime"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// readLoadAvg returns the three load averages of /proc/loadavg.
func readLoadAvg() (string, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "", errNoLoad
	}
	return strings.Join(f[:3], " "), nil
}

// coresBusy is the process CPU per second of wall time in a burst: CPU µs
// per record × records per second. On this 2-core machine a value near 2
// means the curve is bounded by the machine, not by the code.
func coresBusy(cpu, tput []float64) float64 {
	n := min(len(cpu), len(tput))
	xs := make([]float64, n)
	for i := range xs {
		xs[i] = cpu[i] * tput[i] / 1e6
	}
	return quantile(xs, 0.5)
}

// appendPollColor draws the consumer's AppendPoll, a lighter blue than
// Records' and Poll's.
var appendPollColor = color.RGBA{R: 0x6b, G: 0xae, B: 0xd6, A: 0xff}

// curveSeries is one line of a curve chart.
type curveSeries struct {
	name  string
	ys    []float64 // NaN: no point
	color color.Color
	dash  bool
}

// curveChart draws series over xs on a log₂ x axis (the curves double).
func curveChart(dir, name, title, xlabel, ylabel string, xs []float64, series []curveSeries) (string, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel + " (log scale)"
	p.Y.Label.Text = ylabel
	p.X.Scale = plot.LogScale{}
	ticks := make([]plot.Tick, len(xs))
	for i, x := range xs {
		ticks[i] = plot.Tick{Value: x, Label: fmt.Sprint(x)}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	for _, s := range series {
		var pts plotter.XYs
		for i, y := range s.ys {
			if i < len(xs) && !math.IsNaN(y) && !math.IsInf(y, 0) {
				pts = append(pts, plotter.XY{X: xs[i], Y: y})
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return "", err
		}
		l.Color, sc.Color = s.color, s.color
		if s.dash {
			l.Dashes = []vg.Length{4, 3}
		}
		p.Add(l, sc)
		p.Legend.Add(s.name, l, sc)
	}
	p.Y.Min = math.Min(0, p.Y.Min)
	p.Legend.Top = true
	p.Legend.Left = true
	return save(p, dir, name)
}

func g1(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	if x == math.Trunc(x) {
		return fmt.Sprintf("%.0f", x)
	}
	return fmt.Sprintf("%.1f", x)
}

func ratioCell(ratios []float64) (string, float64, float64) {
	if len(ratios) == 0 {
		return "–", math.NaN(), math.NaN()
	}
	lo, hi := ratioCI(ratios)
	return fmt.Sprintf("%s [%s, %s]", f3(ratioMedian(ratios)), f3(lo), f3(hi)), lo, hi
}

func bytesText(b float64) string {
	switch {
	case math.IsNaN(b):
		return "–"
	case math.Abs(b) >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case math.Abs(b) >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.0f B", b)
}

// scaleMarkdown writes the step's tables and charts.
func scaleMarkdown(w *bytes.Buffer, r *scaleResult, out, chartDir string) error {
	c := r.Cfg
	fmt.Fprintf(w, "Machine load (`/proc/loadavg`, 1/5/15 min) at the start: %s; at the end: %s. The machine is shared: "+
		"figures from a loaded machine are noisier and slower than from a quiet one; ratios are taken within one run.\n\n", r.Load[0], r.Load[1])

	// Curve 1.
	w.WriteString("### Brokers: requests per write and per read\n\n")
	fmt.Fprintf(w, "Where: a fresh in-process local cluster per broker count and mode, apply lag 0 (brokers still apply "+
		"asynchronously), *emulated*: `localcluster.Native(false)`, brokers as Apache Kafka 4.4 (no header tokens; the factory "+
		"emulates them from ApiVersions and DescribeQuorum); *native*: brokers implement KIP-1243. One trial: `CreateTopic` "+
		"(3 partitions, replication min(3, brokers)) through the admin client, then a Metadata request for the topic sent to every "+
		"broker in turn through the same client (`kgo.Client.Broker(n).Request`: a read on every broker), then the same reads "+
		"once more, when every broker is known to have applied the create (a second read that does not show the topic fails "+
		"the run). Factory: `f.Admin()` and "+
		"its `Kgo()`; plain: one `kgo.Client`, `kadm`. %d trials per client after one untimed trial each, alternating who goes "+
		"first; every broker has applied the previous trial before the next starts. Requests are counted at the brokers' "+
		"gateways (`localcluster.Stats().Requests`); the user-facing client's own requests by API key with a franz-go hook; "+
		"*internal* is the rest, what the factory's own clients asked (the emulator's ApiVersions and DescribeQuorum, the "+
		"cluster watcher), split into ApiVersions (counted where the gateways pass them to kfake, a `kfake.ControlKey` "+
		"counter, less plain kgo's count in the same phase: a create makes the local cluster's own control client connect "+
		"to kfake too) and the other keys (DescribeQuorum, answered by the gateways themselves, and Metadata). Medians over trials; key counts are means per trial.\n\n", c.BrokerTrials)
	w.WriteString("| brokers | mode | requests per create, factory / plain | extra per write | factory create: client keys; internal | " +
		"requests for the reads on all brokers, factory / plain | extra per broker read | factory reads: client keys; internal | " +
		"same reads again (every broker caught up), factory / plain; extra per read | " +
		"create + reads p50 / p99 ms, factory / plain | first reads not showing the topic, factory / plain |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pt := range r.Brokers {
		f, p := pt.Trials[vFactory], pt.Trials[vPlain]
		cr := func(t brokerTrial) float64 { return float64(t.Create.Total) }
		rd := func(t brokerTrial) float64 { return float64(t.Read.Total) }
		ag := func(t brokerTrial) float64 { return float64(t.Again.Total) }

		tot := func(t brokerTrial) float64 { return ms(t.CreateDur + t.ReadDur) }
		stale := func(trs []brokerTrial) int {
			n := 0
			for _, t := range trs {
				n += t.Stale
			}
			return n
		}
		mode := "emulated"
		if pt.Native {
			mode = "native"
		}
		// ApiVersions at kfake less plain kgo's in the same phase: a create
		// makes the local cluster's own control client connect to kfake
		// too, for both clients alike.
		internal := func(sel func(brokerTrial) phaseCount) (float64, float64) {
			all, av := meanInternal(f, sel)
			_, pav := meanInternal(p, sel)
			return all, av - pav
		}
		ci, cav := internal(func(t brokerTrial) phaseCount { return t.Create })
		ri, rav := internal(func(t brokerTrial) phaseCount { return t.Read })
		ai, aav := internal(func(t brokerTrial) phaseCount { return t.Again })
		fmt.Fprintf(w, "| %d | %s | %s / %s | %s | %s; internal %.1f (ApiVersions %.1f, other %.1f) | %s / %s | %s | %s; internal %.1f (ApiVersions %.1f, other %.1f) | %s / %s; %s (internal ApiVersions %.1f, other %.1f) | %s / %s, %s / %s | %d / %d of %d |\n",
			pt.Brokers, mode, g1(medianOf(f, cr)), g1(medianOf(p, cr)), g1(medianOf(f, cr)-medianOf(p, cr)),
			keysText(meanKeys(f, func(t brokerTrial) phaseCount { return t.Create })), ci, cav, ci-cav,
			g1(medianOf(f, rd)), g1(medianOf(p, rd)), f2((medianOf(f, rd)-medianOf(p, rd))/float64(pt.Brokers)),
			keysText(meanKeys(f, func(t brokerTrial) phaseCount { return t.Read })), ri, rav, ri-rav,
			g1(medianOf(f, ag)), g1(medianOf(p, ag)), f2((medianOf(f, ag)-medianOf(p, ag))/float64(pt.Brokers)), aav, ai-aav,
			f1(medianOf(f, tot)), f1(quantileOf(f, 0.99, tot)), f1(medianOf(p, tot)), f1(quantileOf(p, 0.99, tot)),
			stale(f), stale(p), len(f)*pt.Brokers)
	}
	w.WriteString("\nTarget: extra requests per write independent of partitions, at most one per broker read from, 0 for a read on a broker " +
		"known to be caught up.\n\n")

	w.WriteString("### Brokers: producer throughput and p99\n\n")
	fmt.Fprintf(w, "The producer comparison of section 1 (factory, plain kgo, control; acks=all, idempotent, linger 0, 1 KiB values), at each "+
		"broker count on the emulated cluster, on a topic with one partition per broker (replication min(3, brokers)), so every "+
		"broker leads a partition: %d rounds of %d-record bursts and %d sequential produces per client, in %d blocks. Ratios: "+
		"factory / kgo ×2 with the 95%% bootstrap interval over blocks, as in section 1. *Cores busy*: process CPU seconds per "+
		"second during the factory's bursts (median; the machine has %d).\n\n", c.Overhead.Rounds, c.Overhead.Records, c.Overhead.Latencies,
		max(c.Overhead.Blocks, 1), runtime.NumCPU())
	w.WriteString("| brokers | throughput records/s, factory / plain | throughput ratio [95% CI] | control / plain | p99 ms, factory / plain | p99 ratio [95% CI] | cores busy | failed records | throughput ≥ 0.97 | p99 ≤ 1.05 |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var bxs, tputY, p99Y, ctlY []float64
	for _, pt := range r.Brokers {
		o := pt.Over
		if o == nil {
			continue
		}
		tlo, thi := o.medianCI(o.tputRatios(vFactory))
		plo, phi := o.pooledCI(vFactory, 0.99)
		fmt.Fprintf(w, "| %d | %s / %s | %s [%s, %s] | %s | %s / %s | %s [%s, %s] | %s | %d | %s | %s |\n", pt.Brokers,
			f0(spreadOf(o.Tput[vFactory]).Median), f0(spreadOf(o.Tput[vPlain]).Median),
			f3(spreadOf(o.tputRatios(vFactory)).Median), f3(tlo), f3(thi), f3(spreadOf(o.tputRatios(vControl)).Median),
			f3(quantile(o.Lat[vFactory], 0.99)), f3(quantile(o.Lat[vPlain], 0.99)),
			f3(o.pooledRatio(vFactory, 0.99)), f3(plo), f3(phi), f2(coresBusy(o.CPU[vFactory], o.Tput[vFactory])),
			o.failed(), verdict(tlo, thi, 0.97, true), verdict(plo, phi, 1.05, false))
		bxs = append(bxs, float64(pt.Brokers))
		tputY = append(tputY, spreadOf(o.tputRatios(vFactory)).Median)
		ctlY = append(ctlY, spreadOf(o.tputRatios(vControl)).Median)
		p99Y = append(p99Y, o.pooledRatio(vFactory, 0.99))
	}
	w.WriteString("\n")

	var charts []string
	{
		var xs []float64
		var fe, pe, fn, pn []float64
		for _, pt := range r.Brokers {
			perTrial := func(v int) float64 {
				return medianOf(pt.Trials[v], func(t brokerTrial) float64 { return float64(t.Create.Total + t.Read.Total) })
			}
			if pt.Native {
				fn = append(fn, perTrial(vFactory))
				pn = append(pn, perTrial(vPlain))
			} else {
				xs = append(xs, float64(pt.Brokers))
				fe = append(fe, perTrial(vFactory))
				pe = append(pe, perTrial(vPlain))
			}
		}
		ch, err := curveChart(chartDir, "scale_brokers_requests.png", "Requests for one create + a read on every broker", "brokers", "requests at the brokers",
			xs, []curveSeries{{"factory, emulated", fe, colors[0], false}, {"plain kgo, emulated cluster", pe, colors[1], false},
				{"factory, native", fn, colors[3], true}, {"plain kgo, native cluster", pn, colors[2], true}})
		if err != nil {
			return err
		}
		charts = append(charts, ch)
		if len(bxs) > 0 {
			ch, err = curveChart(chartDir, "scale_brokers_producer.png", "Producer, factory / kgo ×2, by brokers", "brokers", "ratio",
				bxs, []curveSeries{{"throughput", tputY, colors[0], false}, {"p99 latency", p99Y, darkColors[0], true}, {"control throughput (harness error)", ctlY, colors[2], false}})
			if err != nil {
				return err
			}
			charts = append(charts, ch)
		}
	}
	chartLinks(w, out, charts)

	// Curve 2.
	w.WriteString("### Topics: create, then wait until every broker serves them\n\n")
	fmt.Fprintf(w, "Where: a local cluster per broker count, emulated (as Kafka 4.4), every broker applying metadata %v after "+
		"its commit. One trial: `CreateTopics` of N topics of %d partitions (replication min(3, brokers)) in one call, then "+
		"the wait: the factory's `WaitApplied(ctx, f.Token(), WaitTopics(names...))` (default poll), or the common "+
		"workaround with plain kgo: a Metadata request for the topics every %v, to the next broker each time, until one answer "+
		"shows every partition of every topic with a leader (sent with `Broker(n).Request`: `kadm.Metadata` would be answered "+
		"from franz-go's metadata cache for `MetadataMinAge`, 5 s by default, and poll nothing). "+
		"The **limit** is the moment the last broker applied the create (the local cluster knows it exactly: "+
		"`Cluster.WaitApplied` per broker), measured from the create's answer; *wait − limit* is how long after that "+
		"moment the wait ended (negative: the wait ended before every broker could serve the topics). Requests: at the "+
		"gateways during the wait; bytes: what the user-facing clients wrote (`WaitApplied` asks through one client of the "+
		"factory's own, without hooks: its requests are in *internal*, its bytes in no column). "+
		"The topics are deleted after each trial and every broker applies that before the next. %d trials per point "+
		"(60%% of that at 1,000 topics), alternating who goes first; medians unless named.\n\n",
		c.TopicLag, c.TopicPartitions, c.PollEvery, c.TopicTrials)
	w.WriteString("| brokers | topics | waiter | trials | create ms | requests of the create (internal) | limit ms | wait − limit p50 [max] ms | requests | bytes written | client keys per wait (mean) | internal | ended before the limit | cores busy during the wait |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	type key struct{ b, v int }
	curves := map[key][]float64{}
	reqs := map[key][]float64{}
	var txs []float64
	seen := map[int]bool{}
	for _, pt := range r.Topics {
		if !seen[pt.Topics] {
			seen[pt.Topics] = true
			txs = append(txs, float64(pt.Topics))
		}
		for v := range numWaiters {
			trs := pt.Trials[v]
			early := 0
			for _, t := range trs {
				if t.Early {
					early++
				}
			}
			keys := map[int16]float64{}
			for _, t := range trs {
				for k, n := range t.Wait0.Client {
					keys[k] += float64(n) / float64(len(trs))
				}
			}
			internal, internalAV := 0.0, 0.0
			for _, t := range trs {
				internal += float64(t.Wait0.internal()) / float64(len(trs))
				internalAV += float64(t.Wait0.internalAPIVersions()) / float64(len(trs))
			}
			over := func(t topicTrial) float64 { return ms(t.Wait - t.Limit) }
			fmt.Fprintf(w, "| %d | %d | %s | %d | %s | %s (%s) | %s | %s [%s] | %s | %s | %s | %.1f (ApiVersions %.1f) | %d of %d | %s |\n", pt.Brokers, pt.Topics, waiterNames[v], len(trs),
				f1(medianOf(trs, func(t topicTrial) float64 { return ms(t.Create) })),
				g1(medianOf(trs, func(t topicTrial) float64 { return float64(t.Create0.Total) })),
				g1(medianOf(trs, func(t topicTrial) float64 { return float64(t.Create0.internal()) })), f1(medianOf(trs, func(t topicTrial) float64 { return ms(t.Limit) })),
				f1(medianOf(trs, over)), f1(quantileOf(trs, 1, over)),
				g1(medianOf(trs, func(t topicTrial) float64 { return float64(t.Wait0.Total) })),
				bytesText(medianOf(trs, func(t topicTrial) float64 { return float64(t.Wait0.Bytes) })),
				keysText(keys), internal, internalAV, early, len(trs),
				f2(medianOf(trs, func(t topicTrial) float64 { return t.WaitCPU.Seconds() / max(t.Wait.Seconds(), 1e-9) })))
			k := key{pt.Brokers, v}
			curves[k] = append(curves[k], medianOf(trs, over))
			reqs[k] = append(reqs[k], medianOf(trs, func(t topicTrial) float64 { return float64(t.Wait0.Total) }))
		}
	}
	w.WriteString("\nTarget: `WaitApplied` for 1,000 topics ends within 50 ms of the limit (p50) at 3 and at 24 brokers, in fewer requests than polling every 100 ms.\n\n")
	{
		var lat, req []curveSeries
		i := 0
		for _, b := range c.TopicBrokers {
			for v := range numWaiters {
				name := fmt.Sprintf("%s, %d brokers", strings.ReplaceAll(waiterNames[v], "`", ""), b)
				col := colors[v]
				if i >= 2 {
					col = darkColors[v]
				}
				lat = append(lat, curveSeries{name, curves[key{b, v}], col, i >= 2})
				req = append(req, curveSeries{name, reqs[key{b, v}], col, i >= 2})
			}
			i += 2
		}
		a, err := curveChart(chartDir, "scale_topics_wait.png", "Create N topics × 10 partitions, then wait: end − limit", "topics", "ms after the last broker applied the create", txs, lat)
		if err != nil {
			return err
		}
		b, err := curveChart(chartDir, "scale_topics_requests.png", "Requests during the wait", "topics", "requests at the brokers", txs, req)
		if err != nil {
			return err
		}
		chartLinks(w, out, []string{a, b})
	}

	// Curve 4.
	w.WriteString("### Time to usable after a create, against the alternatives\n\n")
	usableMarkdown(w, r.Usable, c, fmt.Sprintf("a local cluster of 3 brokers, emulated (as Kafka 4.4), every broker applying metadata %v "+
		"after its commit, every broker having applied the previous trial before the next; requests at the gateways over the "+
		"whole trial", c.UsableLag))

	// Curve 3.
	w.WriteString("### Producers per factory\n\n")
	fmt.Fprintf(w, "Where: a local cluster of 3 brokers, emulated, lag 0, one topic of 10 partitions (replication 3). For N producers: "+
		"the factory side is one factory and N `factory.NewProducer` (producers of equal settings share one franz-go client inside "+
		"the factory); the plain side is N `kgo.Client`s. Settings as in section 1 (acks=all, idempotent, no compression, linger 0, "+
		"1 KiB values). Each side is made fresh per round, produces one acknowledged record per producer (warm-up), then all N "+
		"produce %d records in all at once, from a goroutine each; throughput = records / time to the last acknowledgement, CPU = "+
		"process CPU per record. Then every producer produces %d records in all one at a time, each acknowledged before the "+
		"next, all producers at once: *p99* is the 99th percentile of those records' latencies (per round, then the median "+
		"over rounds; the ratio, the median of per-round ratios). *Heap per producer*: live heap (after two GCs) with the N producers made and warmed, less the "+
		"live heap before, over N (median over rounds; the in-process cluster's heap is in both figures, its connection "+
		"state included, so with few producers the noise of the whole process swamps one client). %d rounds, alternating which side goes first; medians over rounds.\n\n", c.ProducerTotal, c.ProducerLatency, c.ProducerRounds)
	w.WriteString("| producers | records/s, factory / plain | throughput ratio (median [min–max]) | p99 ms, factory / plain | p99 ratio (median [min–max]) | CPU µs per record, factory / plain | CPU ratio | heap per producer, factory / plain | heap ratio | cores busy, factory / plain | failed records |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	var pxs, ptput, pp99, pcpu, pheap []float64
	for _, pt := range r.Producers {
		tr := pairedRatios(pt.Tput)
		lr := pairedRatios(pt.P99)
		cr := pairedRatios(pt.CPU)
		fmt.Fprintf(w, "| %d | %s / %s | %s | %s / %s | %s | %s / %s | %s | %s / %s | %s | %s / %s | %d / %d |\n", pt.Producers,
			f0(quantile(pt.Tput[vFactory], 0.5)), f0(quantile(pt.Tput[vPlain], 0.5)), spreadText(spreadOf(tr), f3),
			f3(quantile(pt.P99[vFactory], 0.5)), f3(quantile(pt.P99[vPlain], 0.5)), spreadText(spreadOf(lr), f3),
			f2(quantile(pt.CPU[vFactory], 0.5)), f2(quantile(pt.CPU[vPlain], 0.5)), f3(quantile(cr, 0.5)),
			bytesText(quantile(pt.Heap[vFactory], 0.5)), bytesText(quantile(pt.Heap[vPlain], 0.5)), f3(quantile(pt.Heap[vFactory], 0.5)/quantile(pt.Heap[vPlain], 0.5)),
			f2(coresBusy(pt.CPU[vFactory], pt.Tput[vFactory])), f2(coresBusy(pt.CPU[vPlain], pt.Tput[vPlain])),
			pt.Errors[vFactory], pt.Errors[vPlain])
		pxs = append(pxs, float64(pt.Producers))
		ptput = append(ptput, quantile(tr, 0.5))
		pp99 = append(pp99, quantile(lr, 0.5))
		pcpu = append(pcpu, quantile(cr, 0.5))
		pheap = append(pheap, quantile(pt.Heap[vFactory], 0.5)/quantile(pt.Heap[vPlain], 0.5))
	}
	wh := pairedRatios(r.WideHeap)
	fmt.Fprintf(w, "\n*Heap per 1,000 partitions*: one producer of each kind made fresh per round (franz-go's manual partitioner, "+
		"the same settings), warmed with a record to every partition of the topic above and of a second 10-partition topic (so "+
		"connected to every broker and past its first new topic), then one "+
		"acknowledged one-byte record to each of the %d partitions of a third topic (whose log segments the brokers made before); "+
		"the live heap then, less the live heap after the warm-up, per 1,000 partitions (the brokers' copies of the records, "+
		"alike for both, included): factory %s, plain kgo %s, ratio %s (%d rounds, alternating which side goes first).\n",
		c.WidePartitions, bytesText(quantile(r.WideHeap[vFactory], 0.5)), bytesText(quantile(r.WideHeap[vPlain], 0.5)),
		spreadText(spreadOf(wh), f3), len(wh))
	w.WriteString("\nTargets: throughput ≥ 0.97× and p99 ≤ 1.05× kgo at 256 producers per factory; heap per client ≤ 1.1× kgo's.\n\n")
	{
		ch, err := curveChart(chartDir, "scale_producers.png", "N producers on one factory / N plain kgo clients", "producers", "ratio",
			pxs, []curveSeries{{"throughput", ptput, colors[0], false}, {"p99", pp99, colors[2], false}, {"CPU per record", pcpu, colors[1], false}, {"heap per producer", pheap, colors[3], true}})
		if err != nil {
			return err
		}
		chartLinks(w, out, []string{ch})
	}

	// Curve 5.
	w.WriteString("### Record size, on bare kfake\n\n")
	fmt.Fprintf(w, "Where: bare kfake (no gateways: the fastest broker at hand), 3 brokers, topics of 3 partitions, per value size a "+
		"fresh cluster. Consumer: the consumer comparison of its own section (factory `Records`, `Poll`, `AppendPoll`, `Records` with JSON; "+
		"plain kgo `PollFetches`; control) on a topic of %s of values (records = that / size, at least 100), %d rounds. Producer: the "+
		"producer comparison of section 1 with that value size (%d rounds of %d-record bursts, fewer records above 1 KiB so the "+
		"bytes stay alike, %d sequential produces per client). Ratios: factory / kgo ×2, 95%% bootstrap intervals.\n\n",
		bytesText(float64(c.SizeBytes)), consumeRounds(c.SizeRounds), c.SizeProduce.Rounds, c.SizeProduce.Records, c.SizeProduce.Latencies)
	w.WriteString("| value size | records | consumer `Records` / kgo | consumer `Poll` / kgo | consumer `AppendPoll` / kgo | consumer control / plain | producer throughput / kgo | producer p99 / kgo | producer control / plain | consumer ≥ 0.95 (`Records`) |\n|---|---|---|---|---|---|---|---|---|---|\n")
	var sxs, srec, spoll, sappend, sprod []float64
	for _, pt := range r.Sizes {
		cr := pt.Consume
		rc, rlo, rhi := ratioCell(cr.ratios(&cr.Tput, rFactory))
		pc, _, _ := ratioCell(cr.ratios(&cr.Tput, rFactoryPoll))
		ac, _, _ := ratioCell(cr.ratios(&cr.Tput, rFactoryAppend))
		cc, _, _ := ratioCell(cr.ratios(&cr.Tput, rControl))
		o := pt.Produce
		tlo, thi := o.medianCI(o.tputRatios(vFactory))
		plo, phi := o.pooledCI(vFactory, 0.99)
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s [%s, %s] | %s [%s, %s] | %s | %s |\n", bytesText(float64(pt.Size)), cr.Cfg.Records, rc, pc, ac, cc,
			f3(spreadOf(o.tputRatios(vFactory)).Median), f3(tlo), f3(thi), f3(o.pooledRatio(vFactory, 0.99)), f3(plo), f3(phi),
			f3(spreadOf(o.tputRatios(vControl)).Median), verdict(rlo, rhi, 0.95, true))
		sxs = append(sxs, float64(pt.Size))
		srec = append(srec, ratioMedian(cr.ratios(&cr.Tput, rFactory)))
		spoll = append(spoll, ratioMedian(cr.ratios(&cr.Tput, rFactoryPoll)))
		sappend = append(sappend, ratioMedian(cr.ratios(&cr.Tput, rFactoryAppend)))
		sprod = append(sprod, spreadOf(o.tputRatios(vFactory)).Median)
	}
	w.WriteString("\n")
	ch, err := curveChart(chartDir, "scale_sizes.png", "Throughput / kgo ×2 by value size, bare kfake", "value bytes", "ratio",
		sxs, []curveSeries{{"consumer Records", srec, colors[0], false}, {"consumer Poll", spoll, darkColors[0], true},
			{"consumer AppendPoll", sappend, appendPollColor, true}, {"producer", sprod, colors[3], false}})
	if err != nil {
		return err
	}
	chartLinks(w, out, []string{ch})
	fmt.Fprintf(w, "Run time of the step: %v.\n", r.Elapsed.Round(time.Second))
	return nil
}

// usableMarkdown writes the time-to-usable table of trials.
func usableMarkdown(w *bytes.Buffer, trials [numUsable][]usableTrial, c scaleConfig, where string) {
	fmt.Fprintf(w, "Where: %s. One trial: `CreateTopic` (3 partitions, replication 3), then the method's wait, then a produce "+
		"(acknowledged) and a Metadata read of the topic on every broker; what fails (an error, or a read without the topic) is a "+
		"failure the application sees, retried 10 ms later. Time from the create call to the last success, and its parts: the "+
		"create call, the wait, the use (produce and reads, retries included). Methods: the factory "+
		"(`f.Admin()`, `WaitApplied(ctx, f.Token(), WaitTopics(topic))`, `factory.NewProducer`); plain kgo polling describe every "+
		"%v (a Metadata request to the next broker each time until one shows every partition with a leader); plain kgo using the "+
		"topic at once (`ProduceSync` with franz-go's default retries). %d trials per method after one untimed each, the methods "+
		"in rotating order.\n\n", where, c.PollEvery, c.UsableTrials)
	w.WriteString("| method | trials | p50 ms | p99 ms | max ms | p50 create / wait / use ms | requests p50 | failures seen by the application (trials with any) |\n|---|---|---|---|---|---|---|---|\n")
	for m := range numUsable {
		trs := trials[m]
		d := func(t usableTrial) float64 { return ms(t.Usable) }
		fails, with := 0, 0
		for _, t := range trs {
			fails += t.Failures
			if t.Failures > 0 {
				with++
			}
		}
		reqs := medianOf(trs, func(t usableTrial) float64 { return float64(t.Requests) })
		rc := g1(reqs)
		if reqs < 0 {
			rc = "not counted"
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s / %s / %s | %s | %d (%d) |\n", usableNames[m], len(trs), f1(medianOf(trs, d)), f1(quantileOf(trs, 0.99, d)),
			f1(quantileOf(trs, 1, d)), f1(medianOf(trs, func(t usableTrial) float64 { return ms(t.Create) })),
			f1(medianOf(trs, func(t usableTrial) float64 { return ms(t.Wait) })),
			f1(medianOf(trs, func(t usableTrial) float64 { return ms(t.Usable - t.Create - t.Wait) })), rc, fails, with)
	}
	w.WriteString("\nTarget (issue 42, with 200 trials per method): p50 no worse than polling every 100 ms, p99 better, 0 failures seen by the application.\n\n")
}
