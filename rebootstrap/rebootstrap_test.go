package rebootstrap

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseStrategy(t *testing.T) {
	for in, want := range map[string]Strategy{"rebootstrap": Rebootstrap, "NONE": None, " None ": None} {
		got, err := ParseStrategy(in)
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	_, err := ParseStrategy("sometimes")
	require.ErrorContains(t, err, "metadata.recovery.strategy")
	require.Equal(t, "none", None.String())
	require.Equal(t, "rebootstrap", Rebootstrap.String())
}

func TestClusterChangedError(t *testing.T) {
	err := error(&ClusterChangedError{From: "a", To: "b"})
	require.ErrorIs(t, err, ErrClusterChanged)
	require.EqualError(t, err, `rebootstrap: cluster changed from "a" to "b"`)
}
