//go:build !unix

package server

// openFileLimit is unknown on this platform.
func openFileLimit() uint64 { return 0 }
