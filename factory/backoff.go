package factory

import (
	"math/rand/v2"
	"time"
)

// The default wait before the n-th retry of a request or connection: the
// Java client's, so that a misrouted or cut connection is tried again as
// soon as the Java client would try it. franz-go's own default starts at
// 250ms and grows to 2.5s, so a client whose broker address had been
// misrouted for a few seconds found it repaired up to 2.5s late, where
// the Java client's 1s ceiling found it within a second.
const (
	backoffMin = 50 * time.Millisecond // reconnect.backoff.ms
	backoffMax = time.Second           // reconnect.backoff.max.ms, retry.backoff.max.ms
)

// javaBackoff is backoffMin doubled per failure in a row up to backoffMax,
// ±20% jitter (the Java client's ExponentialBackoff), so that the clients
// of a fleet do not retry in step.
func javaBackoff(fails int) time.Duration {
	d := backoffMax
	if fails <= 1 {
		d = backoffMin
	} else if fails < 32 && backoffMin<<(fails-1) < backoffMax {
		d = backoffMin << (fails - 1)
	}
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}
