package kafkatest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// WaitISR polls (bounded by ctx) until every partition of topic has exactly
// want in sync and a leader among them, as after a broker left or came back.
// The error names the partitions that were not there yet.
func WaitISR(ctx context.Context, adm *kadm.Client, topic string, want []int32) error {
	want = slices.Sorted(slices.Values(want))
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		m, err := adm.Metadata(ctx, topic)
		if err == nil {
			last = ""
			for _, p := range m.Topics[topic].Partitions.Sorted() {
				isr := slices.Sorted(slices.Values(p.ISR))
				if p.Err != nil || !slices.Equal(isr, want) || !slices.Contains(want, p.Leader) {
					last += fmt.Sprintf(" partition %d: leader %d isr %v err %v;", p.Partition, p.Leader, isr, p.Err)
				}
			}
			if last == "" && len(m.Topics[topic].Partitions) > 0 {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: in-sync replicas of %s never became %v:%s", topic, want, last)
		case <-tick.C:
		}
	}
}

// RequireISR is WaitISR for a test: it waits up to a minute (or ctx) and
// fails t with WaitISR's error.
func RequireISR(ctx context.Context, t testing.TB, adm *kadm.Client, topic string, want []int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := WaitISR(ctx, adm, topic, want); err != nil {
		t.Fatal(err)
	}
}
