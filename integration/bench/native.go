package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
)

// nativeSection is the section of -realkafka-ryw -kip1243.
const nativeSection = "realkafka-native"

// nativeRYWSides are the read-your-writes clients of the native step: a
// factory in emulated mode, plain kgo and a factory in native mode.
func nativeRYWSides() []rywSide {
	return []rywSide{
		{vFactory, "factory emulated", "e", func(addrs []string) (*rywClients, error) {
			return factoryRYW(addrs, factory.Consistency(factory.ModeEmulated))
		}},
		{vPlain, variantNames[vPlain], "p", plainRYW},
		{rywFactory2, "factory native", "n", func(addrs []string) (*rywClients, error) {
			return factoryRYW(addrs, factory.Consistency(factory.ModeNative))
		}},
	}
}

// nativeOverhead is the overhead configuration of the native step: the
// factory in emulated mode, plain kgo, the control and a factory in native
// mode, every store empty at the start.
func nativeOverhead(cfg overheadConfig) overheadConfig {
	cfg.Mode = factory.ModeEmulated
	cfg.AlsoModes = []factory.ConsistencyMode{factory.ModeNative}
	return cfg
}

// runRealNative starts three Apache Kafka 4.4 nodes with the KIP-1243
// agent and measures, in one run, read-your-writes latency and the
// producer overhead of plain kgo, a factory in emulated mode and a factory
// in native mode, interleaved.
func runRealNative(ctx context.Context, o options, p plan, m machine) (string, error) {
	t0 := time.Now()
	load0 := loadAverage()
	var over *overheadResult
	var ryw *rywResult
	startup, err := withKafka(ctx, o.Logf, func(ctx context.Context, c *kafkatest.Cluster) error {
		var err error
		if ryw, err = rywSidesOnKafka(ctx, c.BootstrapAddrs(), p.kryw, nativeRYWSides(), o.Logf); err != nil {
			return fmt.Errorf("read-your-writes: %w", err)
		}
		if err = createInSync(ctx, c, "overhead", overheadTopicConfigs); err != nil {
			return err
		}
		over, err = runOverhead(ctx, "Apache Kafka 4.4 with the KIP-1243 agent, 3 nodes", c.BootstrapAddrs(), "overhead",
			consistency.Unknown(), nativeOverhead(p.kafka), nil, o.Logf)
		return err
	}, kafkatest.KIP1243())
	if err != nil {
		return "", err
	}
	var body bytes.Buffer
	header(&body, o, m, time.Since(t0))
	fmt.Fprintf(&body, "Load average (1 min, `/proc/loadavg`) at the start %s, at the end %s.\n\n", load0, loadAverage())
	fmt.Fprintf(&body, "Three combined broker+controller JVMs started by `integration/kafkatest` with the KIP-1243 agent "+
		"(`kafkatest.KIP1243()`: hold mode, 30 s bound; `integration/kafkatest/KIP1243.md`), ready in %v. Every flexible "+
		"response carries the broker's applied metadata offset, and a request whose token the broker has not applied is "+
		"parked until it has. Three clients side by side in one run: plain kgo, a factory in emulated mode "+
		"(`factory.Consistency(factory.ModeEmulated)`: tokens made from KRaft's offsets, as on Kafka without the agent) "+
		"and a factory in native mode (`factory.Consistency(factory.ModeNative)`: only the tokens the brokers send).\n\n",
		startup.Round(time.Second))
	nativeMarkdown(&body, ryw, over, p.kryw)
	return body.String(), nil
}

// loadAverage is the 1-minute load average, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return "unknown"
}

// nativeMarkdown writes the one table of the native step: per client, its
// read-your-writes figures and its producer overhead.
func nativeMarkdown(w *bytes.Buffer, ryw *rywResult, over *overheadResult, cfg rywConfig) {
	c := over.Cfg
	fmt.Fprintf(w, "*Read-your-writes* (as in the section above): one trial is `CreateTopic` (1 partition) through the side's "+
		"admin client → a Metadata request for the topic to every broker, one after the other (factory: `f.KgoClient()`; "+
		"plain: the admin's `kgo.Client`) → first record produced and acknowledged → that record consumed from the start. "+
		"%d trials per client after one untimed warm-up, the three clients taking turns in a rotating order; a trial that "+
		"has not consumed its record after %v is a failure; p50/p99/max over successful trials (nearest rank). *Stale*: "+
		"trials in which a broker answered the Metadata request without the topic just created (answers in brackets).\n\n",
		cfg.Trials, cfg.Timeout)
	fmt.Fprintf(w, "*Producer overhead* (as in the overhead tables above, %d-byte values, acks=all, idempotent, no compression, "+
		"linger 0): four producers, the factory in emulated mode, plain kgo, the control (a second plain kgo) and the "+
		"factory in native mode, every factory's store empty at the start; %d interleaved rounds in %d blocks (fresh "+
		"clients per block, warmed untimed; the order of the four rotates through a balanced Latin square), a burst of %d "+
		"async records per client and round, then %d sequential acknowledged produces per client, the clients taking turns "+
		"record by record. Ratios are to **kgo ×2** (per round, the geometric mean of plain kgo and the control; for "+
		"latency their samples pooled), with a 95%% bootstrap interval over the blocks; the control's ratio is to plain kgo "+
		"alone and is the harness's own error. Run time %v.\n\n",
		c.ValueSize, c.Rounds, max(c.Blocks, 1), c.Records, c.Latencies, over.Elapsed.Round(time.Second))
	fmt.Fprintf(w, "| client | RYW trials | RYW p50 ms | RYW p99 ms | RYW max ms | RYW p50 create / read / produce / consume ms | RYW failures | RYW trials stale (answers) | "+
		"throughput, records/s (median of rounds) | throughput / kgo ×2 (95%% CI), target ≥ 0.97 | produce p99 ms (pooled) | p99 / kgo ×2 (95%% CI), target ≤ 1.05 | failed records | token at the end |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	rows := []struct {
		name     string
		ryw, ovh int // -1: not measured
	}{
		{"plain kgo", vPlain, vPlain},
		{"factory, emulated mode", vFactory, vFactory},
		{"factory, native mode", rywFactory2, vFactory2},
		{"control (plain kgo): harness error", -1, vControl},
	}
	for _, r := range rows {
		cells := []string{r.name}
		if r.ryw < 0 {
			cells = append(cells, "–", "–", "–", "–", "–", "–", "–")
		} else {
			s := ryw.summary(r.ryw)
			fails := fmt.Sprint(s.Failures)
			for k, n := range s.FailureKinds {
				fails += fmt.Sprintf("; %d× %s", n, strings.ReplaceAll(k, "|", "/"))
			}
			cells = append(cells, fmt.Sprint(s.N), f1(s.P50), f1(s.P99), f1(s.Max),
				fmt.Sprintf("%s / %s / %s / %s", f1(s.CreateP50), f1(s.ReadP50), f1(s.ProduceP50), f1(s.ConsumeP50)),
				fails, fmt.Sprintf("%d (%d)", s.StaleTrials, s.StaleAnswers))
		}
		v := r.ovh
		tput, p99 := "– (the baseline)", "– (the baseline)"
		if v != vPlain {
			ratios := over.tputRatios(v)
			lo, hi := over.medianCI(ratios)
			tput = fmt.Sprintf("%s [%s, %s]", f3(quantile(ratios, 0.5)), f3(lo), f3(hi))
			plo, phi := over.pooledCI(v, 0.99)
			p99 = fmt.Sprintf("%s [%s, %s]", f3(over.pooledRatio(v, 0.99)), f3(plo), f3(phi))
			if v != vControl {
				tput += ": " + verdict(lo, hi, 0.97, true)
				p99 += ": " + verdict(plo, phi, 1.05, false)
			}
		}
		token := over.Tokens[v]
		if token == "" {
			token = "–"
		}
		cells = append(cells, f0(quantile(over.Tput[v], 0.5)), tput, f3(quantile(over.Lat[v], 0.99)), p99, fmt.Sprint(over.Errors[v]), token)
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
}
