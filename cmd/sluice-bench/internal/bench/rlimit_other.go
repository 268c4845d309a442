//go:build !unix

package bench

func raiseFileLimit(int) error { return nil }
