package factory

import (
	"math/rand/v2"
	"time"
)

// The default wait before the n-th retry of a request: the Java client's
// retry.backoff.ms and retry.backoff.max.ms, so that a misrouted or cut
// connection is tried again no later and no more often than the Java
// client tries it. franz-go's own default starts at 250ms and grows to
// 2.5s, so a client whose broker address had been misrouted for a few
// seconds found it repaired up to 2.5s late.
//
// Why 100ms and not reconnect.backoff.ms (50ms): the Java client counts
// the broker's close as the first failure and waits 50ms before its first
// dial; kgo dials at once and waits only after the refused dial, so its
// n-th retry is the Java client's (n+1)-th reconnect. Starting at 50ms
// made one attempt more than the Java producer in a misroute's first
// seconds and put every later one about 50ms behind; starting at 100ms
// makes as many, each a few ms before the Java producer's (issue 21).
const (
	backoffMin = 100 * time.Millisecond // retry.backoff.ms
	backoffMax = time.Second            // retry.backoff.max.ms, reconnect.backoff.max.ms
)

// javaBackoff is backoffMin doubled per failure in a row up to backoffMax,
// ±20% jitter so that the clients of a fleet do not retry in step, and
// never more than backoffMax: the Java client's ExponentialBackoff, which
// caps after the jitter. At the ceiling it waits 0.8–1s, 1s half the time.
// Jittering after the cap waited 0.8–1.2s: a misrouted address repaired
// after a few seconds was found about 50ms later on average than by the
// Java producer, and up to 200ms (issue 21).
func javaBackoff(fails int) time.Duration {
	d := backoffMax
	if fails <= 1 {
		d = backoffMin
	} else if fails < 32 && backoffMin<<(fails-1) < backoffMax {
		d = backoffMin << (fails - 1)
	}
	return min(time.Duration(float64(d)*(0.8+0.4*rand.Float64())), backoffMax)
}
