//go:build !unix

package rawio

import "errors"

// Raw reports whether rawio's calls bypass the runtime here: not outside Unix, where sockets
// are read and written through the net package alone.
const Raw = false

// Read is not available outside Unix: nothing reads a socket by its descriptor there.
func Read(uintptr, []byte) (int, error) { return 0, errors.ErrUnsupported }

// Writev is not available outside Unix: nothing writes a socket by its descriptor there.
func Writev(uintptr, [][]byte) (int, error) { return 0, errors.ErrUnsupported }
