//go:build unix

package main

import "syscall"

func reexec(exe string, argv, env []string) error { return syscall.Exec(exe, argv, env) } //nolint:gosec // G204: this program's own executable, re-executed
