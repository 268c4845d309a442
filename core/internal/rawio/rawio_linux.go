package rawio

import (
	"syscall"
	"unsafe"
)

// Raw reports whether rawio's calls bypass the runtime here.
const Raw = true

// Read reads the socket fd into p with one read(2), retried on EINTR. It returns the errno
// as is, EAGAIN included. (Read and Writev each spell out the call and its retry: a pointer
// converted to uintptr is kept alive and in place only in the argument list of the assembly
// call itself, so the call can not move into a helper.)
func Read(fd uintptr, p []byte) (int, error) {
	for {
		n, _, errno := syscall.RawSyscall(syscall.SYS_READ, fd,
			uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p))) //nolint:gosec // G103: the buffer's address for read(2), converted in the call
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}

// maxIovecs bounds one writev(2)'s buffers (the kernel's UIO_MAXIOV is 1024); the rest go in
// the calls after it.
const maxIovecs = 1024

// Writev writes the first of bufs with one writev(2) (write(2) for one buffer), retried on
// EINTR. Empty buffers are skipped. It returns the errno as is, EAGAIN included.
func Writev(fd uintptr, bufs [][]byte) (int, error) {
	var small [16]syscall.Iovec // beyond it, append moves them to the heap
	iov := small[:0]
	for _, b := range bufs {
		if len(b) == 0 {
			continue
		}
		if len(iov) == maxIovecs {
			break
		}
		v := syscall.Iovec{Base: unsafe.SliceData(b)} //nolint:gosec // G103: a buffer's address for writev(2)
		v.SetLen(len(b))
		iov = append(iov, v)
	}
	if len(iov) == 0 {
		return 0, nil
	}
	for {
		var n uintptr
		var errno syscall.Errno
		if len(iov) == 1 { // write(2) takes no vector to copy in
			n, _, errno = syscall.RawSyscall(syscall.SYS_WRITE, fd,
				uintptr(unsafe.Pointer(iov[0].Base)), uintptr(iov[0].Len)) //nolint:gosec // G103: the buffer's address for write(2), converted in the call
		} else {
			n, _, errno = syscall.RawSyscall(syscall.SYS_WRITEV, fd,
				uintptr(unsafe.Pointer(unsafe.SliceData(iov))), uintptr(len(iov))) //nolint:gosec // G103: the vector's address for writev(2), converted in the call
		}
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}
