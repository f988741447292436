package consistency

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTextToken(t *testing.T) {
	for _, tc := range []struct {
		c    Token
		text string
	}{
		{Unknown(), "kc1.unknown"},
		{MustOf("a", 0), "kc1.0.YQ"},
		{MustOf("MkU3OEVBNTcwNTJENDM2Qk", 1234), "kc1.1234.TWtVM09FVkJOVGN3TlRKRU5ETTJRaw"},
		{MustOf("a", 1<<63-1), "kc1.9223372036854775807.YQ"},
	} {
		got, err := tc.c.MarshalText()
		require.NoError(t, err)
		require.Equal(t, tc.text, string(got))
		require.Equal(t, tc.text, tc.c.Encode())
		back, err := ParseToken(tc.text)
		require.NoError(t, err)
		require.Equal(t, tc.c, back)
	}
}

func TestTextTokenMalformed(t *testing.T) {
	for _, bad := range []string{
		"", "kc1", "kc1.", "kc2.1.YQ", "KC1.1.YQ", "kc1.unknown ", " kc1.1.YQ",
		"kc1.1", "kc1.1.", "kc1..YQ", "kc1.01.YQ", "kc1.-1.YQ", "kc1.+1.YQ", "kc1.1a.YQ",
		"kc1.9223372036854775808.YQ", "kc1.99999999999999999999.YQ",
		"kc1.1.YQ==", "kc1.1.Y", "kc1.1.YR", "kc1.1.Y+", "kc1.1.a.b",
		"kc1.1." + strings.Repeat("YWFh", 100),
	} {
		c := MustOf("keep", 3)
		err := c.UnmarshalText([]byte(bad))
		require.ErrorIs(t, err, ErrMalformedToken, "input %q", bad)
		require.Equal(t, MustOf("keep", 3), c, "a failed parse leaves the token unchanged")
	}
}

func TestJSON(t *testing.T) {
	type msg struct {
		Token Token `json:"token"`
	}
	in := msg{MustOf("cluster-x", 77)}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	require.JSONEq(t, `{"token":"kc1.77.Y2x1c3Rlci14"}`, string(b))
	var out msg
	require.NoError(t, json.Unmarshal(b, &out))
	require.Equal(t, in, out)
	require.ErrorIs(t, json.Unmarshal([]byte(`{"token":"nope"}`), &out), ErrMalformedToken)
}

func TestBinaryToken(t *testing.T) {
	for _, tc := range []struct {
		c   Token
		bin []byte
	}{
		{Unknown(), []byte{1, 0}},
		{MustOf("a", 0), []byte{1, 1, 'a', 0}},
		{MustOf("ab", 300), []byte{1, 2, 'a', 'b', 0xac, 0x02}},
	} {
		got, err := tc.c.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, tc.bin, got)
		var back Token
		require.NoError(t, back.UnmarshalBinary(tc.bin))
		require.Equal(t, tc.c, back)
	}
}

func TestBinaryTokenMalformed(t *testing.T) {
	for name, bad := range map[string][]byte{
		"empty":              {},
		"bad version":        {2, 0},
		"no length":          {1},
		"trailing unknown":   {1, 0, 0},
		"truncated id":       {1, 3, 'a'},
		"no offset":          {1, 1, 'a'},
		"truncated offset":   {1, 1, 'a', 0x80},
		"non-minimal offset": {1, 1, 'a', 0x80, 0x00},
		"non-minimal length": {1, 0x81, 0x00, 'a', 0},
		"trailing":           {1, 1, 'a', 0, 0},
		"offset overflow":    {1, 1, 'a', 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"huge length":        {1, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"long id":            append([]byte{1, 0x80, 0x02}, make([]byte, 257)...),
	} {
		c := MustOf("keep", 3)
		err := c.UnmarshalBinary(bad)
		require.ErrorIs(t, err, ErrMalformedToken, name)
		require.Equal(t, MustOf("keep", 3), c, name)
	}
}

// FuzzUnmarshalText checks that the parser never panics and that whatever it
// accepts is canonical: encoding the result gives back the input.
func FuzzUnmarshalText(f *testing.F) {
	for _, s := range []string{"kc1.unknown", "kc1.0.YQ", "kc1.1234.TWtVM09FVkJOVGN3TlRKRU5ETTJRaw", "kc1.01.YQ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var c Token
		if err := c.UnmarshalText([]byte(s)); err != nil {
			require.ErrorIs(t, err, ErrMalformedToken)
			return
		}
		require.Equal(t, s, c.Encode())
	})
}

func FuzzUnmarshalBinary(f *testing.F) {
	for _, b := range [][]byte{{1, 0}, {1, 1, 'a', 0}, {1, 2, 'a', 'b', 0xac, 0x02}, {1, 1, 'a', 0x80, 0}} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c Token
		if err := c.UnmarshalBinary(b); err != nil {
			require.ErrorIs(t, err, ErrMalformedToken)
			return
		}
		out, err := c.MarshalBinary()
		require.NoError(t, err)
		require.Equal(t, b, out)
	})
}

// FuzzRoundTrip checks decode(encode(x)) == x for arbitrary valid tokens.
func FuzzRoundTrip(f *testing.F) {
	f.Add("a", int64(0))
	f.Add("MkU3OEVBNTcwNTJENDM2Qk", int64(1<<40))
	f.Fuzz(func(t *testing.T, cluster string, offset int64) {
		c, err := Of(cluster, offset)
		if err != nil {
			return
		}
		got, err := ParseToken(c.Encode())
		require.NoError(t, err)
		require.Equal(t, c, got)
		bin, _ := c.MarshalBinary()
		var back Token
		require.NoError(t, back.UnmarshalBinary(bin))
		require.Equal(t, c, back)
	})
}
