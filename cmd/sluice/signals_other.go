//go:build !unix

package main

import (
	"os"
	"syscall"
)

// lameDuckSignal is nil where there is no SIGUSR2: no signal drains in lame-duck mode, the
// drain on SIGTERM and SIGINT is the same.
var lameDuckSignal os.Signal

// handledSignals are the signals serve handles: SIGTERM and SIGINT drain, SIGHUP reloads.
var handledSignals = []os.Signal{syscall.SIGTERM, os.Interrupt, syscall.SIGHUP}
