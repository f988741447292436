package factory

import (
	"fmt"
	"strings"

	"github.com/kconsist/kconsist/consistency"
)

// What WaitApplied reports: each broker's progress, and the error naming
// the brokers still behind when its context ended.

// BrokerProgress is how far one broker is in a WaitApplied.
type BrokerProgress struct {
	// Node is the broker's node id, Addr its host:port.
	Node int32
	Addr string
	// Applied is the offset of the last metadata record the broker said
	// it has applied; -1 before it said.
	Applied int64
	// Done: the broker has applied the token and, with WaitTopics,
	// serves every partition of the topics with a leader.
	Done bool
	// Pending names what the broker does not serve yet with WaitTopics:
	// a topic it does not know, or "topic/partition" without a leader.
	Pending []string
	// Err is why the last question to the broker failed; nil once it
	// answered.
	Err error
}

func (p BrokerProgress) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "broker %d (%s)", p.Node, p.Addr)
	switch {
	case p.Done:
		b.WriteString(" done")
	case p.Applied >= 0:
		fmt.Fprintf(&b, " at offset %d", p.Applied)
	default:
		b.WriteString(" has not answered")
	}
	if len(p.Pending) > 0 {
		fmt.Fprintf(&b, ", not serving %s", strings.Join(p.Pending, ", "))
	}
	if p.Err != nil {
		fmt.Fprintf(&b, " (last error: %v)", p.Err)
	}
	return b.String()
}

// WaitError reports the brokers still behind when a WaitApplied's context
// ended. It matches ErrBrokersBehind, and the context's error
// (context.DeadlineExceeded, context.Canceled), with errors.Is. Behind
// splits in two, each with its own part of the message: the brokers that
// had not applied Token (Unapplied), and those that had (or had no token
// to apply) but did not serve every partition of the WaitTopics topics
// with a leader yet (Unserved).
type WaitError struct {
	// Token is the token waited for; Unknown when only topics were.
	Token consistency.Token
	// Behind lists the brokers not done, by node id.
	Behind []BrokerProgress
	// Brokers is the number of brokers waited for.
	Brokers int
	// Err is why the wait ended: the context's error.
	Err error
}

// Unapplied returns the brokers of Behind that had not applied Token: at
// an offset before it, or not answered how far they are. None when Token
// is Unknown.
func (e *WaitError) Unapplied() []BrokerProgress {
	var out []BrokerProgress
	for _, p := range e.Behind {
		if e.unapplied(p) {
			out = append(out, p)
		}
	}
	return out
}

// Unserved returns the brokers of Behind that had applied Token (or had
// none to apply) but did not serve the topics yet: BrokerProgress.Pending
// names the topics they did not know and the partitions without a
// leader, or Err why their Metadata answer did not come.
func (e *WaitError) Unserved() []BrokerProgress {
	var out []BrokerProgress
	for _, p := range e.Behind {
		if !e.unapplied(p) {
			out = append(out, p)
		}
	}
	return out
}

func (e *WaitError) unapplied(p BrokerProgress) bool {
	return !e.Token.IsUnknown() && p.Applied < e.Token.Offset()
}

func (e *WaitError) Error() string {
	unapplied, unserved := e.Unapplied(), e.Unserved()
	var what []string
	if len(unapplied) > 0 {
		what = append(what, fmt.Sprintf("%d of %d brokers had not applied token %s", len(unapplied), e.Brokers, e.Token))
	}
	if len(unserved) > 0 {
		applied := ""
		if !e.Token.IsUnknown() {
			applied = fmt.Sprintf("had applied token %s but ", e.Token)
			if len(unapplied) > 0 {
				applied = "had applied it but "
			}
		}
		what = append(what, fmt.Sprintf("%d of %d brokers %sdid not serve every partition of the topics with a leader", len(unserved), e.Brokers, applied))
	}
	parts := make([]string, 0, len(e.Behind))
	for _, p := range unapplied {
		s := p.String()
		if p.Applied >= 0 {
			s += fmt.Sprintf(", %d behind", e.Token.Offset()-p.Applied)
		}
		parts = append(parts, s)
	}
	for _, p := range unserved {
		parts = append(parts, p.String())
	}
	return fmt.Sprintf("factory: %s when the wait ended (%v): %s",
		strings.Join(what, ", and "), e.Err, strings.Join(parts, "; "))
}

// Is matches ErrBrokersBehind.
func (e *WaitError) Is(target error) bool { return target == ErrBrokersBehind }

// Unwrap returns the context's error.
func (e *WaitError) Unwrap() error { return e.Err }
