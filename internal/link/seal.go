package link

import "github.com/twmb/franz-go/pkg/kgo"

// seal marks a value of this package as made by the factory. The public
// constructors (admin.New, consumer.New, producer.New,
// producer.NewGroupTransactSession) refuse a value without it.
//
// A type of an internal package cannot be named outside its module, but
// it can still be reached: type inference gives any caller the zero value
// of a constructor's first parameter (func zero[L, R any](func(L) R) L),
// and reflection can fill its exported fields with clients of the
// caller's own. Neither can set an unexported field, and only Seal sets
// this one, so only code in this module (package factory) can make a
// value the constructors take.
type seal struct{ made bool }

// Sealed reports whether the value was sealed by Seal.
func (s seal) Sealed() bool { return s.made }

func (s *seal) set() { s.made = true }

// Sealable is a value Seal marks: Admin, Consumer, Producer,
// GroupTransact. The unexported method keeps other types out.
type Sealable[T any] interface {
	*T
	set()
}

// Seal returns v marked as made by the factory, for a public constructor.
func Seal[T any, P Sealable[T]](v T) T {
	P(&v).set()
	return v
}

// GroupTransact is what a GroupTransactSession is made of: the argument of
// producer.NewGroupTransactSession, which factory.NewGroupTransactSession
// fills with the franz-go session the factory's session built and the
// link.Producer it produces through (its Watch ends the session at a
// cluster change; Share, Clients and Pin are not used).
type GroupTransact struct {
	// Producer is how the session's producer meets the factory's session.
	Producer Producer
	// Session is franz-go's consume-transform-produce session, built by
	// the factory's session: its client stamps the factory's token.
	Session *kgo.GroupTransactSession

	seal
}
