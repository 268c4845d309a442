//go:build unix

package main

import (
	"os"
	"syscall"
)

// lameDuckSignal drains the edge in lame-duck mode (docs/operations.md).
const lameDuckSignal = syscall.SIGUSR2

// handledSignals are the signals serve handles: SIGTERM and SIGINT drain, SIGHUP reloads.
var handledSignals = []os.Signal{syscall.SIGTERM, os.Interrupt, syscall.SIGHUP, lameDuckSignal}
