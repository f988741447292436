package kafkatest

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFreePortsBelowEphemeral: listener ports come from below the kernel's
// ephemeral range, where no outgoing connection takes its local port, and
// each can be bound.
func TestFreePortsBelowEphemeral(t *testing.T) {
	lo, hi := portRange(ephemeralRangeFile)
	if hi == 0 {
		t.Skipf("no ephemeral port range in %s on this system", ephemeralRangeFile)
	}
	ports, err := freePorts(12)
	require.NoError(t, err)
	require.Len(t, ports, 12)
	seen := map[int]bool{}
	for _, p := range ports {
		require.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		require.GreaterOrEqual(t, p, lo)
		require.Less(t, p, hi, "port %d is in the ephemeral range", p)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err)
		l.Close()
	}
}

// TestPortRange: the range file is read as Linux writes it; anything else
// falls back to ports from the ephemeral range (0, 0).
func TestPortRange(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string][2]int{
		"32768\t60999\n": {lowestPort, 32768},
		"49152 65535":    {lowestPort, 49152},
		"10500 60999":    {0, 0}, // too little room below
		"1024 65535":     {0, 0},
		"abc 60999":      {0, 0},
		"32768":          {0, 0},
		"":               {0, 0},
		"70000 80000":    {0, 0},
	} {
		path := filepath.Join(dir, "range")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		lo, hi := portRange(path)
		require.Equal(t, want, [2]int{lo, hi}, "%q", content)
	}
	lo, hi := portRange(filepath.Join(dir, "missing"))
	require.Zero(t, lo+hi)
}
