//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

var errNoAffinity = errors.New("-cpus needs Linux (sched_setaffinity)")

func pinSelf(cpus cpuList) (func(), error) {
	if len(cpus) > 0 {
		return nil, errNoAffinity
	}
	return func() {}, nil
}

func pinProcess(_ int, cpus cpuList) (func(), error) {
	if len(cpus) > 0 {
		return nil, errNoAffinity
	}
	return func() {}, nil
}

func startPinned(cmd *exec.Cmd, cpus cpuList) error {
	if len(cpus) > 0 {
		return errNoAffinity
	}
	return cmd.Start()
}

const affinitySupported = false
