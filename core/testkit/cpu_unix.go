//go:build unix

package testkit

import (
	"syscall"
	"time"
)

// ProcessCPU is the CPU time, user and system, this process has used; false where the system
// does not tell.
func ProcessCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
