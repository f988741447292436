//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package wire

import (
	"net"
	"syscall"
)

// peeker looks at a socket without blocking or consuming. Made once per
// connection, so that a check allocates nothing.
type peeker struct {
	rc    syscall.RawConn
	fn    func(fd uintptr)
	state int
	buf   [1]byte
}

func newPeeker(c net.Conn) *peeker {
	sc, ok := socketOf(c).(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &peeker{rc: rc}
	p.fn = p.peek
	return p
}

// peek is called with the socket: a read of 0 bytes is the peer's FIN,
// ECONNRESET its reset; pending bytes or EAGAIN mean the connection is
// open as far as the kernel knows. It never waits for readability.
func (p *peeker) peek(fd uintptr) {
	n, _, err := syscall.Recvfrom(int(fd), p.buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	switch {
	case err == nil && n == 0:
		p.state = peerGone
	case err == syscall.ECONNRESET:
		p.state = peerGone
	default:
		p.state = peerUnknown
	}
}

func (p *peeker) check() int {
	if p == nil {
		return peerUnknown
	}
	// Control, not Read: Read takes the socket's read lock, which a
	// goroutine blocked in a read holds (kgo's discard reader on an acks=0
	// produce connection does from the connection's start), and would wait
	// for it. The peek never blocks and consumes nothing, so it needs no
	// lock.
	if err := p.rc.Control(p.fn); err != nil {
		return peerUnknown
	}
	return p.state
}
