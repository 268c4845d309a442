//go:build !unix

package main

import "errors"

// reexec is not available here: servers run with Go's default sysmon.
func reexec(string, []string, []string) error { return errors.New("exec not supported") }
