package producer

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist"
	"github.com/kconsist/kconsist/consistency"
	"github.com/kconsist/kconsist/internal/link"
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

// attributor says what caused a failure, from what the session observed:
// the INCONSISTENT_METADATA marks and clock (brokers behind the token), and
// the auth watch (a cluster that refuses the client). It is set before the
// engine is used and never changed; it keeps no state of its own.
type attributor struct {
	marks link.InconsistentMarks // nil without marks
	// clock is marks' clock, nil without marks: loaded for every record.
	clock *atomic.Uint64
	auth  link.AuthWatch // nil without an auth watch
}

func newAttributor(marks link.InconsistentMarks, auth link.AuthWatch) attributor {
	a := attributor{marks: marks, auth: auth}
	if marks != nil {
		a.clock = marks.Clock()
	}
	return a
}

// now returns the INCONSISTENT_METADATA clock (0 without one).
func (a *attributor) now() uint64 {
	if n := a.clock; n != nil {
		return n.Load()
	}
	return 0
}

// attribute returns the error to report for x, which failed with err: a
// record whose own partition was answered INCONSISTENT_METADATA while it
// was in flight failed because brokers stayed behind the token, and a
// record franz-go gave up while the cluster refuses the client failed
// because of that.
func (a *attributor) attribute(x *inflight, err error) error {
	if aerr := a.authAttributed(x, err); aerr != nil {
		return aerr
	}
	marks := a.marks
	if marks == nil {
		return err
	}
	// The clock's low 32 bits, compared as a wrapping difference.
	if int32(uint32(marks.At(x.rec.Topic, x.rec.Partition))-x.tag.inc0) > 0 {
		return staleError(err)
	}
	if errors.Is(err, kgo.ErrRecordTimeout) {
		if int32(uint32(a.clock.Load())-x.tag.inc0) > 0 {
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

// authAttributed returns the error to report for x, which franz-go gave up
// with err, if the cluster refuses the client; nil otherwise.
func (a *attributor) authAttributed(x *inflight, err error) error {
	if a.auth == nil || !givenUp(err) {
		return nil
	}
	if cause := a.auth.AuthFailure(); cause != nil {
		return &kconsist.AuthError{Topic: x.rec.Topic, Err: cause, Gave: err}
	}
	return nil
}

// givenUp reports whether err is franz-go giving a record up without a
// broker's answer: what an authentication failure shows as.
func givenUp(err error) bool {
	return errors.Is(err, kgo.ErrAborting) || errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries)
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
// began), that is named as the likely reason it waited, and a failure of
// the cluster to accept the client that holds is named too.
func (a *attributor) gaveUp(ctx context.Context, topic string, clock0 uint64) error {
	err := fmt.Errorf("producer: record to %s not acknowledged before the context ended (it may still be written): %w", topic, context.Cause(ctx))
	if a.auth != nil {
		if cause := a.auth.AuthFailure(); cause != nil {
			err = fmt.Errorf("%w: the cluster refuses the client: %w", err, cause)
		}
	}
	if a.clock != nil && a.clock.Load() != clock0 {
		return fmt.Errorf("%w: %w", err, consistency.ErrInconsistentMetadata)
	}
	return err
}
