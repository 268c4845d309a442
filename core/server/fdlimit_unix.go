//go:build unix

package server

import "syscall"

// openFileLimit is the file descriptors the process may open (its soft RLIMIT_NOFILE, which
// the Go runtime raises to the hard limit at start), or 0 when unknown.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return uint64(l.Cur) // int64 on some systems
}
