package admin_test

import (
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kconsist/kconsist/admin"
)

// filledFirst returns a value of fn's first parameter, a type it cannot
// name, with its exported field named field set to v by reflection: how
// code outside this module could hand admin.New a client of its own,
// which carries no consistency token. This file imports no internal
// package, as such code could not.
func filledFirst[L, R any](t *testing.T, fn func(L) (R, error), field string, v any) L {
	t.Helper()
	var l L
	f := reflect.ValueOf(&l).Elem().FieldByName(field)
	require.True(t, f.CanSet(), "field %s of %T", field, l)
	f.Set(reflect.ValueOf(v))
	return l
}

// TestNewRefusesAValueNotMadeByTheFactory: admin.New given a link.Admin
// that code outside this module filled with its own franz-go client is
// refused (before, it returned a working admin client that stamped no
// token), and the mark the factory sets cannot be set by reflection nor
// through a method.
func TestNewRefusesAValueNotMadeByTheFactory(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	require.NoError(t, err)
	defer cl.Close()
	l := filledFirst(t, admin.New, "Client", cl)
	c, err := admin.New(l)
	require.ErrorContains(t, err, "admin: New is for factory.Factory.Admin: the link.Admin given was not made by a factory")
	require.Nil(t, c)

	v := reflect.ValueOf(&l).Elem()
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			require.False(t, v.Field(i).CanSet(), "the unexported field %s", v.Type().Field(i).Name)
		}
	}
	_, settable := any(&l).(interface{ set() })
	require.False(t, settable, "a method of this package's cannot be the seal's")
}
