package consistency

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cluster string
		offset  int64
		wantErr bool
	}{
		{"valid", "abc", 0, false},
		{"max offset", "abc", 1<<63 - 1, false},
		{"empty cluster", "", 3, true},
		{"negative offset", "abc", -1, true},
		{"long cluster", strings.Repeat("x", MaxClusterIDLen+1), 1, true},
		{"longest cluster", strings.Repeat("x", MaxClusterIDLen), 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Of(tc.cluster, tc.offset)
			if tc.wantErr {
				require.ErrorIs(t, err, ErrInvalidToken)
				require.True(t, c.IsUnknown())
				return
			}
			require.NoError(t, err)
			require.False(t, c.IsUnknown())
			require.Equal(t, tc.cluster, c.ClusterID())
			require.Equal(t, tc.offset, c.Offset())
		})
	}
}

func TestUnknown(t *testing.T) {
	u := Unknown()
	require.True(t, u.IsUnknown())
	require.Equal(t, int64(-1), u.Offset())
	require.Equal(t, "", u.ClusterID())
	require.True(t, u.Equal(Token{}), "the zero value is Unknown")
	require.Equal(t, "unknown", u.String())
	require.Equal(t, "a@7", MustOf("a", 7).String())
	require.Panics(t, func() { MustOf("", 1) })
}

func TestLater(t *testing.T) {
	a5, a9, b1 := MustOf("a", 5), MustOf("a", 9), MustOf("b", 1)
	for _, tc := range []struct {
		name     string
		x, y     Token
		want     Token
		mismatch bool
	}{
		{"greater wins", a5, a9, a9, false},
		{"greater wins reversed", a9, a5, a9, false},
		{"equal", a5, a5, a5, false},
		{"unknown left", Unknown(), a5, a5, false},
		{"unknown right", a5, Unknown(), a5, false},
		{"both unknown", Unknown(), Unknown(), Unknown(), false},
		{"other cluster", a5, b1, a5, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.x.Later(tc.y)
			if tc.mismatch {
				require.ErrorIs(t, err, ErrClusterMismatch)
				require.Contains(t, err.Error(), `"a"`)
				require.Contains(t, err.Error(), `"b"`)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// randToken draws from a small space so equal offsets and the unknown
// token occur often.
func randToken(r *rand.Rand, cluster string) Token {
	if r.IntN(4) == 0 {
		return Unknown()
	}
	return MustOf(cluster, r.Int64N(8))
}

func TestLaterProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	later := func(x, y Token) Token {
		z, err := x.Later(y)
		require.NoError(t, err)
		return z
	}
	for i := 0; i < 5000; i++ {
		x, y, z := randToken(r, "c"), randToken(r, "c"), randToken(r, "c")
		require.Equal(t, later(x, y), later(y, x), "commutative: %v %v", x, y)
		require.Equal(t, later(later(x, y), z), later(x, later(y, z)), "associative: %v %v %v", x, y, z)
		require.Equal(t, x, later(x, x), "idempotent: %v", x)
		require.Equal(t, x, later(x, Unknown()), "identity: %v", x)
		require.Equal(t, x, later(Unknown(), x), "identity: %v", x)
		m := later(x, y)
		require.GreaterOrEqual(t, m.Offset(), x.Offset())
		require.GreaterOrEqual(t, m.Offset(), y.Offset())
	}
	// Mismatch is symmetric too.
	_, e1 := MustOf("a", 1).Later(MustOf("b", 1))
	_, e2 := MustOf("b", 1).Later(MustOf("a", 1))
	require.True(t, errors.Is(e1, ErrClusterMismatch) && errors.Is(e2, ErrClusterMismatch))
}

func BenchmarkLater(b *testing.B) {
	x, y := MustOf("MkU3OEVBNTcwNTJENDM2Qk", 41), MustOf("MkU3OEVBNTcwNTJENDM2Qk", 42)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Later(y); err != nil {
			b.Fatal(err)
		}
	}
}
