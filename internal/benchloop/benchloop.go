// Package benchloop holds the timing loop the producer benchmarks share.
// Only tests import it.
package benchloop

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
)

// Buffered times b.N calls of produce, the caller's side of an async
// produce alone: every per records the timer stops while flush sends what
// the client buffered (and the garbage collector runs), so neither the
// network nor the broker is timed. One untimed record goes first. produce
// must call done once with the record's outcome; the benchmark fails if
// any record failed.
func Buffered(b *testing.B, per int, produce func(done func(error)), flush func(context.Context) error) {
	ctx := context.Background()
	var failed atomic.Int64
	done := func(err error) {
		if err != nil {
			failed.Add(1)
		}
	}
	flushNow := func() {
		b.StopTimer()
		if err := flush(ctx); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		b.StartTimer()
	}
	produce(done)
	flushNow()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		produce(done)
		if i%per == per-1 {
			flushNow()
		}
	}
	b.StopTimer()
	if err := flush(ctx); err != nil {
		b.Fatal(err)
	}
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d records failed", n)
	}
}
