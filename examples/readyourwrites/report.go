package main

// The report: the table of both flows, its legend, and the verdict.

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

func printTable(out io.Writer, results ...*result) {
	var rs []*result
	for _, r := range results {
		if r != nil {
			rs = append(rs, r)
		}
	}
	var rows [][]string
	row := func(label string, cell func(*result) string) {
		cells := []string{label}
		for _, r := range rs {
			cells = append(cells, cell(r))
		}
		rows = append(rows, cells)
	}
	cluster := func(n int64, r *result) string {
		if !r.clusterStats {
			return "n/a"
		}
		return fmt.Sprint(n)
	}
	row("clients", func(r *result) string { return r.name })
	row("stale reads seen by the app", func(r *result) string { return fmt.Sprint(len(r.stale)) })
	row("stale answers served (cluster count)", func(r *result) string { return cluster(r.staleServed, r) })
	row("requests held by brokers (cluster count)", func(r *result) string { return cluster(r.held, r) })
	row("INCONSISTENT_METADATA retried", func(r *result) string { return fmt.Sprint(r.retried) })
	row("errors returned to the app", func(r *result) string { return fmt.Sprint(len(r.errs)) })
	row("records produced / consumed", func(r *result) string {
		return fmt.Sprintf("%d / %d", r.produced, r.consumed)
	})
	row("Metadata requests / all requests", func(r *result) string {
		return fmt.Sprintf("%d / %d", r.metadataReq, r.requests)
	})
	for i, name := range phaseNames {
		row("latency "+name, func(r *result) string { return ms(r.phases[i]) })
	}
	row("latency total", func(r *result) string { return ms(r.total()) })

	// Labels left, values right-aligned under their column's name.
	widths := make([]int, len(rows[0]))
	for _, cells := range rows {
		for i, c := range cells {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, cells := range rows {
		line := fmt.Sprintf("%-*s", widths[0], cells[0])
		for i, c := range cells[1:] {
			line += fmt.Sprintf("  %*s", widths[i+1], c)
		}
		fmt.Fprintln(out, line)
	}
	fmt.Fprintln(out)
}

func ms(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}

// printLegend says what the two stale counters count: one run showed 8
// served and 3 seen, which reads like a contradiction without it.
func printLegend(out io.Writer, clusterCounts bool) {
	fmt.Fprintln(out, "stale reads seen by the app: answers that reached the application code showing a topic as")
	fmt.Fprintln(out, "  missing or short of partitions, or failing with UNKNOWN_TOPIC_OR_PARTITION.")
	if clusterCounts {
		fmt.Fprintln(out, "stale answers served: answers a lagging broker gave from old metadata, counted by the cluster.")
		fmt.Fprintln(out, "  The two differ both ways: franz-go retries some stale answers before the app sees them")
		fmt.Fprintln(out, "  (served, not seen; the retries show in the latency), and kadm answers some reads from a")
		fmt.Fprintln(out, "  metadata cache that one stale answer filled (served once, seen several times).")
		fmt.Fprintln(out, "requests held by brokers: KIP-1243 brokers (-native) hold a request until they catch up.")
		fmt.Fprintln(out, "  Brokers without KIP-1243 hold nothing: the factory holds its own requests, uncounted here.")
	} else {
		fmt.Fprintln(out, "stale answers served, requests held by brokers: only the embedded cluster counts them (n/a here).")
	}
	fmt.Fprintln(out)
}

// verdict explains the table and decides the exit code: the factory flow
// must have read its writes wherever the factory held a token.
func verdict(out io.Writer, s settings, t target, f, plain *result) error {
	if f.tokenKnown {
		fmt.Fprintf(out, "factory token after the run: %s (f.Token()); to hand over: %s (f.Token().Encode())\n", f.token, f.tokenText)
	} else {
		fmt.Fprintln(out, "factory token after the run: unknown. The cluster sends no KIP-1243 tokens, and the factory")
		fmt.Fprintln(out, "could not make them from KRaft offsets either, so it behaved like a plain client.")
		if f.offReason != nil {
			fmt.Fprintf(out, "  Why: %v\n", f.offReason)
		}
	}
	if f.limited != nil {
		fmt.Fprintf(out, "note: %v\n", f.limited)
	}
	if len(plain.stale) > 0 {
		fmt.Fprintf(out, "plain kgo/kadm saw %d stale reads, e.g.:\n", len(plain.stale))
		for i, st := range plain.stale {
			if i == 3 {
				fmt.Fprintf(out, "  ... and %d more\n", len(plain.stale)-3)
				break
			}
			fmt.Fprintln(out, "  "+st)
		}
	}
	strict := f.tokenKnown
	var problems []string
	if len(f.errs) > 0 {
		problems = append(problems, fmt.Sprintf("%d errors (first: %s)", len(f.errs), f.errs[0]))
	}
	if f.produced != s.records || f.consumed != f.produced {
		problems = append(problems, fmt.Sprintf("produced %d and consumed %d of %d records", f.produced, f.consumed, s.records))
	}
	if strict && len(f.stale) > 0 {
		problems = append(problems, fmt.Sprintf("%d stale reads (first: %s)", len(f.stale), f.stale[0]))
	}
	if strict && f.staleServed > 0 {
		problems = append(problems, fmt.Sprintf("the cluster served %d stale answers", f.staleServed))
	} else if !strict && len(f.stale) > 0 {
		fmt.Fprintf(out, "factory saw %d stale reads without tokens (first: %s)\n", len(f.stale), f.stale[0])
	}
	if len(problems) > 0 {
		return fmt.Errorf("the factory flow did not read its writes: %s", strings.Join(problems, "; "))
	}
	fmt.Fprintln(out)
	for _, line := range conclusion(s, t, f, plain) {
		fmt.Fprintln(out, line)
	}
	fmt.Fprintf(out, "OK: the factory flow read its writes (%d records, %d stale reads, %d errors).\n", f.consumed, len(f.stale), len(f.errs))
	return nil
}

// conclusion says in words what this run showed: plain clients do not read
// stale data in every run, and the closing lines must not claim they did.
func conclusion(s settings, t target, f, plain *result) []string {
	var lines []string
	switch {
	case !f.tokenKnown:
		lines = append(lines, "Without a token the factory can only be as fresh as the brokers it reaches, like plain kgo.")
	case len(plain.stale) > 0:
		lines = append(lines, fmt.Sprintf("Plain kgo/kadm read %d stale answers; the factory, whose clients share a token, read none.", len(plain.stale)))
		lines = append(lines, "Where a broker lagged, the factory's request waited for it to catch up instead of being")
		lines = append(lines, "answered at once but wrongly.")
	case plain.clusterStats && plain.staleServed > 0:
		lines = append(lines, fmt.Sprintf("Plain kgo/kadm read no stale answer this run, but lagging brokers served it %d, which franz-go", plain.staleServed))
		lines = append(lines, "retried until they were fresh (see its latency); the factory was served none.")
	default:
		lines = append(lines, "Plain kgo/kadm read no stale answer this run either: no broker was behind when it read.")
		switch {
		case t.lc != nil && s.lag == 0:
			lines = append(lines, "With -lag 0 no broker lags; give -lag a duration to see stale reads.")
		case t.realKafka:
			lines = append(lines, "Kafka brokers usually catch up within milliseconds, so stale reads come in some runs, not all: run it again.")
		default:
			lines = append(lines, "Stale reads depend on timing and show in some runs, not all: run it again.")
		}
	}
	return lines
}
