package main

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kconsist/kconsist/factory"
	"github.com/kconsist/kconsist/integration/kafkatest"
)

// misrouteTraceOpts gives the factory a debug logger writing to the trace
// file's name with ".factory.log" appended, when tracing.
func misrouteTraceOpts() []factory.Opt {
	name := os.Getenv("KCONSIST_MISROUTE_TRACE")
	if name == "" {
		return nil
	}
	f, err := openTrace(name + ".factory.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, "misroute trace:", err)
		return nil
	}
	return []factory.Opt{factory.Logger(slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug})))}
}

// openTrace appends to name: the local and the real-Kafka runs of one
// command write to the same files, one after the other.
func openTrace(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// misrouteTrace writes, per trial, every frame the forwarders carried for
// the client on trial, timed from the misroute or move: the attempts each
// client makes at the misrouted address and what each one is. Set
// KCONSIST_MISROUTE_TRACE to a file name to write it (issue 21).
type misrouteTrace struct {
	mu     sync.Mutex
	f      *os.File
	t0     time.Time
	client string
	lines  []string
	n      int
}

func newMisrouteTrace() *misrouteTrace {
	name := os.Getenv("KCONSIST_MISROUTE_TRACE")
	if name == "" {
		return nil
	}
	f, err := openTrace(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, "misroute trace:", err)
		return nil
	}
	return &misrouteTrace{f: f}
}

func (t *misrouteTrace) start(client string, t0 time.Time) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.client, t.t0, t.lines = client, t0, t.lines[:0]
	t.mu.Unlock()
}

func (t *misrouteTrace) frame(r *rejections, fw uint64, fr kafkatest.Frame) {
	now := time.Now()
	r.mu.Lock()
	id := r.conns[[2]uint64{fw, fr.Conn}]
	r.mu.Unlock()
	if id == "" {
		id = fr.ClientID
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.t0.IsZero() || id != t.client {
		return
	}
	dir, extra := "->", ""
	if !fr.Request {
		dir = "<-"
		if fr.Key == 18 {
			if resp, err := fr.ApiVersionsResponse(); err == nil && resp.ErrorCode != 0 {
				extra = " " + kerr.ErrorForCode(resp.ErrorCode).Error()
			}
		}
	}
	t.lines = append(t.lines, fmt.Sprintf("  %8.1fms fw%d conn%d to %s %s key %d v%d%s", float64(now.Sub(t.t0).Microseconds())/1000,
		fw, fr.Conn, fr.Target, dir, fr.Key, fr.Version, extra))
}

func (t *misrouteTrace) end(kind string, tr misrouteTrial, repairAt time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.n++
	fmt.Fprintf(t.f, "trial %d %s %s: repair at %.1fms, recovery %.1fms, detect %.1fms %s\n", t.n, kind, t.client,
		float64(repairAt.Microseconds())/1000, float64(tr.Recovery.Microseconds())/1000, float64(tr.Detect.Microseconds())/1000, tr.Failed)
	for _, l := range t.lines {
		fmt.Fprintln(t.f, l)
	}
	t.t0 = time.Time{}
}
