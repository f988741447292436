//go:build linux

package kafkatest

import "syscall"

// procAttr makes the kernel kill a broker when the test binary dies without
// running its cleanups (e.g. a go test -timeout panic), so no JVM outlives
// the run.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
