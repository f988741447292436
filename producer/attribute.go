package producer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/consistency"
)

// heldMetadataLead is how long before a record was produced a Metadata
// answer that held its topic back (INCONSISTENT_METADATA) still counts as
// what kept the record from a partition, when the record then times out
// with no such answer while it was in flight.
//
// A producer client asks for a topic's metadata when the first record for
// it comes, and records that come while that load is refused wait for the
// next one: franz-go retries a topic it could not load after its retry
// backoff, which starts at 250ms and grows with every failed load. The
// records of a burst produced within a second of the refusal waited on it
// (or on the retries that followed, each of which moves the clock and is
// seen anyway); a record produced later found the metadata loaded or asked
// for it again. The lead is measured against the record's Timestamp, which
// franz-go stamps at Produce when the caller leaves it zero.
const heldMetadataLead = time.Second

// attribute returns the error to report for x, which failed with err: a
// record whose own partition was answered INCONSISTENT_METADATA while it
// was in flight failed because brokers stayed behind the token.
func (e *engine) attribute(x *inflight, err error) error {
	if aerr := e.authAttributed(x, err); aerr != nil {
		return aerr
	}
	marks := e.sess.Marks
	if marks == nil {
		return err
	}
	// The clock's low 32 bits, compared as a wrapping difference.
	if int32(uint32(marks.At(x.rec.Topic, x.rec.Partition))-x.tag.inc0) > 0 {
		return staleError(err)
	}
	if errors.Is(err, kgo.ErrRecordTimeout) {
		if int32(uint32(e.clock.Load())-x.tag.inc0) > 0 {
			return staleError(err)
		}
		// Its topic's metadata may have been held back just before the
		// record came (the client's first metadata request).
		if at := marks.TopicHeldAt(x.rec.Topic); !at.IsZero() && at.After(x.rec.Timestamp.Add(-heldMetadataLead)) {
			return staleError(err)
		}
	}
	return err
}

// staleError marks the error of a record that failed while brokers kept
// answering INCONSISTENT_METADATA. The wire layer turns such produce
// answers into NOT_ENOUGH_REPLICAS so that franz-go retries them with exact
// sequence numbers; once its budget is spent, franz-go reports that code,
// ErrRecordRetries or ErrRecordTimeout, and this puts the real cause first.
func staleError(err error) error {
	if errors.Is(err, consistency.ErrInconsistentMetadata) {
		return err
	}
	if errors.Is(err, kerr.NotEnoughReplicas) || errors.Is(err, kgo.ErrRecordRetries) || errors.Is(err, kgo.ErrRecordTimeout) {
		return fmt.Errorf("%w: %w", consistency.ErrInconsistentMetadata, err)
	}
	return err
}

// gaveUp is the error of a Produce whose caller's context ended before the
// record's outcome; the record itself may still be written. When brokers
// answered INCONSISTENT_METADATA since clock0 (the clock when Produce
// began), that is named as the likely reason it waited.
func (e *engine) gaveUp(ctx context.Context, topic string, clock0 uint64) error {
	err := fmt.Errorf("producer: record to %s not acknowledged before the context ended (it may still be written): %w", topic, context.Cause(ctx))
	err = e.authCause(err)
	if e.clock != nil && e.clock.Load() != clock0 {
		return fmt.Errorf("%w: %w", err, consistency.ErrInconsistentMetadata)
	}
	return err
}
