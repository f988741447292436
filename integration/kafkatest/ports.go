package kafkatest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// Listener ports are free ports outside the kernel's ephemeral range. A
// port picked by binding :0 comes from that range, the one every outgoing
// connection takes its local port from; on a machine busy with loopback
// connections (other test suites) the kernel hands out the whole range in
// seconds, and a port let go by freePorts was taken by some connection in
// the seconds before the JVM bound it: three boots in a row failed with
// "Address already in use" under load. Below the range, only another
// listener can take a port, and bootRetrying's new ports cover that.

// ephemeralRangeFile is where Linux keeps the ephemeral port range.
const ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"

// lowestPort is the lowest port freePorts picks: above the well-known and
// most registered service ports.
const lowestPort = 10000

// freePorts returns count distinct loopback ports that nothing listens on,
// below the ephemeral range when it is known and leaves room, else from
// it (binding :0).
func freePorts(count int) ([]int, error) {
	// All listeners stay open until every port is picked, so no port is
	// handed out twice.
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	lo, hi := portRange(ephemeralRangeFile)
	ports := make([]int, 0, count)
	// Bounded: a port is refused only when something listens on it.
	for try := 0; len(ports) < count && try < 100*count; try++ {
		addr := "127.0.0.1:0"
		if hi > lo {
			addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if hi > lo {
				continue // taken: try another
			}
			return nil, fmt.Errorf("kafkatest: find a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	if len(ports) < count {
		return nil, fmt.Errorf("kafkatest: found %d free loopback ports in [%d, %d), need %d", len(ports), lo, hi, count)
	}
	return ports, nil
}

// portRange returns the ports [lo, hi) freePorts picks from: from
// lowestPort to the start of the ephemeral range that the file at path
// holds ("32768\t60999" on Linux), or 0, 0 when it cannot be read or
// leaves fewer than 1,000 ports below it.
func portRange(path string) (lo, hi int) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	first, err := strconv.Atoi(f[0])
	if err != nil || first-lowestPort < 1000 || first > 65535 {
		return 0, 0
	}
	return lowestPort, first
}
