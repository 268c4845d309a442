package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/PID/stat: USER_HZ, which Linux fixes at
// 100 for every architecture it reports to user space.
const clockTick = 10 * time.Millisecond

// parseStatCPU returns utime+stime from the contents of /proc/PID/stat: the process's CPU
// time over all its threads. The command name (field 2) is in parentheses and may hold
// spaces and parentheses itself, so fields are counted from the last ')'.
func parseStatCPU(data []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("proc stat: no command name")
	}
	// After ")": state (field 3), ppid (4), … utime (14), stime (15).
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(f))
	}
	utime, err := strconv.ParseInt(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat utime: %w", err)
	}
	stime, err := strconv.ParseInt(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("proc stat stime: %w", err)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// procCPU is a process's CPU time so far (user + system, all threads).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("reading cpu time of %d: %w", pid, err)
	}
	return parseStatCPU(b)
}

// cpuOf sums the CPU time of pids.
func cpuOf(pids []int) (time.Duration, error) {
	var sum time.Duration
	for _, pid := range pids {
		d, err := procCPU(pid)
		if err != nil {
			return 0, err
		}
		sum += d
	}
	return sum, nil
}

// ioCalls are a process's read and write system calls so far (syscr and syscw of
// /proc/PID/io): the read, readv, recvmsg… and write, writev, sendmsg… calls of all its
// threads, whatever they read or wrote.
type ioCalls struct{ reads, writes int64 }

func parseIOCalls(data []byte) (ioCalls, error) {
	var c ioCalls
	var found int
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "syscr" && k != "syscw") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return c, fmt.Errorf("proc io %s: %w", k, err)
		}
		if k == "syscr" {
			c.reads = n
		} else {
			c.writes = n
		}
		found++
	}
	if found != 2 {
		return c, errors.New("proc io: no syscr and syscw")
	}
	return c, nil
}

func procIOCalls(pid int) (ioCalls, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return ioCalls{}, fmt.Errorf("reading system calls of %d: %w", pid, err)
	}
	return parseIOCalls(b)
}

// procStatus is what the benchmarks read from /proc/PID/status.
type procStatus struct {
	RSS     int64  // VmRSS, bytes
	PeakRSS int64  // VmHWM, bytes
	Threads int64  // Threads
	CPUs    string // Cpus_allowed_list, e.g. "1" or "0-1"
}

func parseStatus(data []byte) procStatus {
	var ps procStatus
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if k == "Cpus_allowed_list" {
			ps.CPUs = v
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			ps.RSS = n << 10
		case "VmHWM":
			ps.PeakRSS = n << 10
		case "Threads":
			ps.Threads = n
		}
	}
	return ps
}

func readStatus(path string) (procStatus, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procStatus{}, err
	}
	return parseStatus(b), nil
}

// procMemory reads /proc/PID/status.
func procMemory(pid int) (procStatus, error) {
	return readStatus("/proc/" + strconv.Itoa(pid) + "/status")
}

// threadIDs lists a process's threads.
func threadIDs(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	ids := make([]int, 0, len(entries))
	for _, e := range entries {
		if id, err := strconv.Atoi(e.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// loadAverage is /proc/loadavg's first three fields, or "" where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// selfPID is this process: the load generator.
var selfPID = os.Getpid()

// parseMachineBusy returns the CPU time processes used on the whole machine, from the
// contents of /proc/stat: the first ("cpu") line's user, nice, system and steal ticks. Idle
// and iowait are not busy; guest time is already in user; irq and softirq are left out
// because they are charged to no process, and on loopback they are largely the benchmark's
// own packets.
func parseMachineBusy(data []byte) (time.Duration, error) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("proc stat: no cpu line")
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 8} { // user nice system [idle iowait irq softirq] steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat field %d: %w", i, err)
		}
		busy += n
	}
	return time.Duration(busy) * clockTick, nil
}

// machineBusy is the CPU time every process on the machine has used so far.
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("reading machine cpu time: %w", err)
	}
	return parseMachineBusy(b)
}
