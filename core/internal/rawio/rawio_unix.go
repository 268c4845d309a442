//go:build unix && !linux

package rawio

import "syscall"

// Raw reports whether rawio's calls bypass the runtime here: not outside Linux, where they go
// through the syscall package as usual.
const Raw = false

// Read reads the socket fd into p with one read(2), retried on EINTR. It returns the errno
// as is, EAGAIN included.
func Read(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err != syscall.EINTR { //nolint:errorlint // a raw errno
			return max(n, 0), err
		}
	}
}

// Writev writes the first non-empty buffer of bufs with one write(2), retried on EINTR. It
// returns the errno as is, EAGAIN included.
func Writev(fd uintptr, bufs [][]byte) (int, error) {
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		for {
			n, err := syscall.Write(int(fd), b)
			if err != syscall.EINTR { //nolint:errorlint // a raw errno
				return max(n, 0), err
			}
		}
	}
	return 0, nil
}
