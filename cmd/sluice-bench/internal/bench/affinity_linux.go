package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"golang.org/x/sys/unix"
)

func cpuSet(l cpuList) *unix.CPUSet {
	var s unix.CPUSet
	for _, c := range l {
		s.Set(c)
	}
	return &s
}

// pinSelf moves every thread of this process onto cpus and sets GOMAXPROCS to match;
// threads started later inherit the mask from the thread that starts them. The returned
// function puts the old mask and GOMAXPROCS back.
func pinSelf(cpus cpuList) (restore func(), err error) {
	if len(cpus) == 0 {
		return func() {}, nil
	}
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, fmt.Errorf("reading cpu affinity: %w", err)
	}
	if err := setAllThreads(os.Getpid(), cpuSet(cpus)); err != nil {
		return nil, err
	}
	procs := runtime.GOMAXPROCS(len(cpus))
	return func() {
		_ = setAllThreads(os.Getpid(), &old)
		runtime.GOMAXPROCS(procs)
	}, nil
}

// pinProcess moves every thread of process pid, one this run did not start (a Java server
// started by a script, say), onto cpus; threads it starts later inherit the mask. The
// returned function gives every thread the process's mask from before.
func pinProcess(pid int, cpus cpuList) (restore func(), err error) {
	if len(cpus) == 0 {
		return func() {}, nil
	}
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &old); err != nil {
		return nil, fmt.Errorf("reading cpu affinity of %d: %w", pid, err)
	}
	if err := setAllThreads(pid, cpuSet(cpus)); err != nil {
		_ = setAllThreads(pid, &old)
		return nil, err
	}
	return func() { _ = setAllThreads(pid, &old) }, nil
}

// setAllThreads sets the mask of every thread of pid, again until no thread appeared
// meanwhile.
func setAllThreads(pid int, set *unix.CPUSet) error {
	done := map[int]bool{}
	for range 10 {
		ids, err := threadIDs(pid)
		if err != nil {
			return fmt.Errorf("listing threads: %w", err)
		}
		fresh := false
		for _, id := range ids {
			if done[id] {
				continue
			}
			fresh = true
			if err := unix.SchedSetaffinity(id, set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("setting cpu affinity of thread %d: %w", id, err)
			}
			done[id] = true
		}
		if !fresh {
			return nil
		}
	}
	return nil
}

// startPinned starts cmd with its CPU mask set to cpus from its first instruction: the
// child is forked from this goroutine's thread, locked and given that mask for the moment,
// and inherits it (as taskset does by setting its own mask before exec).
func startPinned(cmd *exec.Cmd, cpus cpuList) error {
	if len(cpus) == 0 {
		return cmd.Start()
	}
	runtime.LockOSThread()
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("reading cpu affinity: %w", err)
	}
	if err := unix.SchedSetaffinity(0, cpuSet(cpus)); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("setting cpu affinity: %w", err)
	}
	startErr := cmd.Start()
	if err := unix.SchedSetaffinity(0, &old); err != nil {
		// Leave the thread locked to this goroutine, so that no other goroutine runs on a
		// thread with the server's mask.
		return fmt.Errorf("restoring cpu affinity: %w", err)
	}
	runtime.UnlockOSThread()
	return startErr
}

const affinitySupported = true
