package producer

import (
	"context"
	"reflect"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// inflight is one record on its way: the kgo.Record franz-go sends and what
// its outcome needs, in one allocation of 176 bytes, a kgo.Record and 16
// (see TestInflightSize), whatever the caller's context. For every
// buffered record the garbage collector scans these bytes in each cycle,
// and each byte brings the next cycle closer, so nothing goes here that
// can be found elsewhere: what records sent one after another have in
// common (the caller's context, the client they were given to, the
// INCONSISTENT_METADATA clock) is one tag they share.
//
// The promise, one function shared by every record, finds the inflight
// through the record's Context: an inflight is a context.Context that
// answers as the caller's, and franz-go leaves a record's Context alone.
// Hooks that see records may replace it (a tracing hook wraps it), so a
// client with such hooks gets the caller's context on the record and a
// promise of the record's own instead.
type inflight struct {
	rec  kgo.Record
	done func(Result, error)
	// tag is set in the literal that allocates the inflight, so that no
	// store with a write barrier follows, and replaced only when the client
	// or the clock moved before the record was given to a client (prime).
	tag *tag
}

// tag is what a record is made and given to a client with. Records given one
// after another with the same context, to the same client, with no
// INCONSISTENT_METADATA answer between them share one (see tagFor), which
// is never changed; a record sent again after a failure has its own.
type tag struct {
	ctx  context.Context // the caller's; not nil
	seq  uint32          // current.seq of the client the record was given to
	inc0 uint32          // low bits of the INCONSISTENT_METADATA clock then
	// resent marks a record's own tag: it was sent again after a failure,
	// and a flush flushes again until its promise ran (see work).
	resent bool
	kind   ctxKind // what holds may compare ctx by
	// m is the producer that made the record, and ep the epoch of m's
	// that counts it until its outcome is delivered (see pending.go); a
	// record keeps its epoch whatever tag it is given later.
	m  *member
	ep *epoch
}

// ctxKind says how a tag's context may be compared without a call or a
// panic.
type ctxKind uint8

const (
	ctxOther      ctxKind = iota // never compared: its type might panic
	ctxBackground                // context.Background(): compared by type
	ctxPointer                   // a pointer: compared by identity
)

// background is the caller's context of a record produced with a nil one,
// as franz-go takes it.
var background = context.Background()

// backgroundType is background's dynamic type, of which every value is
// context.Background(): comparing a context's type with it costs no call,
// where comparing contexts calls the runtime's interface equality (about
// 3 ns per record).
var backgroundType = reflect.TypeOf(background)

// kindOf returns how ctx may be compared: contexts whose dynamic type might
// panic when compared (a struct holding a slice) are never taken for the
// same, only Background and pointers are.
func kindOf(ctx context.Context) ctxKind {
	switch t := reflect.TypeOf(ctx); {
	case t == backgroundType:
		return ctxBackground
	case t != nil && t.Kind() == reflect.Pointer:
		return ctxPointer
	}
	return ctxOther
}

// holds reports whether t's context is ctx, with no call for Background and
// one pointer comparison for a pointer: the kind was found when t was made.
// (Interfaces whose dynamic types differ compare unequal without calling
// the type's equality, so a ctx of an uncomparable type cannot panic here.)
func (t *tag) holds(ctx context.Context) bool {
	switch t.kind {
	case ctxBackground:
		return reflect.TypeOf(ctx) == backgroundType
	case ctxPointer:
		return t.ctx == ctx
	}
	return false
}

// An inflight is the Context of its record: it answers as the caller's,
// which its tag holds from the start.

func (x *inflight) Deadline() (time.Time, bool) { return x.caller().Deadline() }
func (x *inflight) Done() <-chan struct{}       { return x.caller().Done() }
func (x *inflight) Err() error                  { return x.caller().Err() }
func (x *inflight) Value(key any) any           { return x.caller().Value(key) }

// caller returns the caller's context as the tag holds it.
func (x *inflight) caller() context.Context { return x.tag.ctx }

// ref is a record on its way as the engine holds it: its inflight and the
// caller's context (which the inflight's tag holds too; a ref saves the
// loads).
type ref struct {
	x  *inflight
	cx context.Context // the caller's; not nil
}

// newRef allocates the inflight of a record produced with t.ctx (not nil),
// with its tag, its outcome's callback and the record's fields, its Context
// set to lead back to it. The fields are set in the allocating literal:
// stores into an object just allocated need no write barrier, where stores
// after a call or a branch take one each while the GC marks, which for a
// busy producer is much of the time.
func newRef(t *tag, done func(Result, error), topic string, key, value []byte, headers []kgo.RecordHeader, partition int32, ts time.Time) ref {
	x := &inflight{
		rec:  kgo.Record{Topic: topic, Key: key, Value: value, Headers: headers, Partition: partition, Timestamp: ts},
		done: done,
		tag:  t,
	}
	x.rec.Context = x
	return ref{x: x, cx: t.ctx}
}

// refOf returns the ref whose record's Context is ctx, if it is one.
func refOf(ctx context.Context) (ref, bool) {
	if x, ok := ctx.(*inflight); ok {
		return ref{x: x, cx: x.tag.ctx}, true
	}
	return ref{}, false
}

// ctx returns the caller's context.
func (r ref) ctx() context.Context { return r.cx }

// tagFor returns a tag for a record m produced with ctx, counted in ep, and
// given to the client numbered seq at clock inc: the last one m made when
// it says the same, a new one otherwise. Tags are never changed once made, so
// goroutines producing at once may share any of them. Each producer keeps
// its own last tag: producers sharing a client do not take turns replacing
// one.
func (m *member) tagFor(ctx context.Context, seq, inc uint32, ep *epoch) *tag {
	if t := m.lastTag.Load(); t != nil && t.seq == seq && t.inc0 == inc && t.ep == ep && t.holds(ctx) {
		return t
	}
	t := &tag{ctx: ctx, seq: seq, inc0: inc, kind: kindOf(ctx), m: m, ep: ep}
	m.lastTag.Store(t)
	return t
}

// tagNow returns the tag for a record m produces with ctx (not nil) now:
// for the current client at the current clock, in m's current epoch. prime
// replaces it if the client or the clock moved before the record is given
// to a client.
func (m *member) tagNow(ctx context.Context) *tag {
	return m.tagFor(ctx, m.e.cur.Load().seq, m.e.incNow(), m.eps.current())
}

// client is the seq of the client x was given to.
func (x *inflight) client() uint32 { return x.tag.seq }

// takeResent reports whether x was sent again after a failure, and clears
// the mark: Flush waits for such a record until its outcome is handed on.
func (x *inflight) takeResent() bool {
	if t := x.tag; t.resent {
		t.resent = false
		return true
	}
	return false
}
