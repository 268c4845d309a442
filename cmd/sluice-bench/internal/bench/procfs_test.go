package bench

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	// Fields after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt
	// cmajflt utime stime …
	tail := " S 1 2 3 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 8 0 1234 1000000 500"
	cases := map[string]struct {
		stat    string
		want    time.Duration
		wantErr string
	}{
		"plain":              {stat: "4242 (sluice)" + tail, want: 2870 * time.Millisecond},
		"spaces and parens":  {stat: "4242 (a) b (c))" + tail, want: 2870 * time.Millisecond},
		"no name":            {stat: "4242 sluice S 1", wantErr: "no command name"},
		"truncated":          {stat: "4242 (sluice) S 1 2 3", wantErr: "fields"},
		"not a number":       {stat: "4242 (sluice) S 1 2 3 0 -1 4194560 100 0 0 0 x 37", wantErr: "utime"},
		"stime not a number": {stat: "4242 (sluice) S 1 2 3 0 -1 4194560 100 0 0 0 1 y", wantErr: "stime"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatCPU([]byte(c.stat))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("parseStatCPU = %s, %v; want %s", got, err, c.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	t.Parallel()
	in := "Name:\tsluice\nThreads:\t9\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\nCpus_allowed_list:\t1,3-4\nVmStk:\tbad\n"
	got := parseStatus([]byte(in))
	want := procStatus{RSS: 1 << 20, PeakRSS: 2 << 20, Threads: 9, CPUs: "1,3-4"}
	if got != want {
		t.Errorf("parseStatus = %+v, want %+v", got, want)
	}
}

// The CPU time read from /proc grows with the work this process does: spinning, it passes
// a few clock ticks long before a generous deadline.
func TestProcCPUOfSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	before, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for x := 0; time.Now().Before(deadline); x++ {
		if x%1_000_000 != 0 {
			continue
		}
		after, err := procCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after-before >= 3*clockTick {
			return
		}
	}
	t.Error("cpu time did not grow by 30ms in 10s of spinning")
}

func TestParseMachineBusy(t *testing.T) {
	t.Parallel()
	got, err := parseMachineBusy([]byte("cpu  100 5 20 9000 40 3 2 1 0 0\ncpu0 50 2 10 4500 20 1 1 0 0 0\n"))
	if want := 126 * clockTick; err != nil || got != want {
		t.Errorf("parseMachineBusy = %s, %v; want %s", got, err, want)
	}
	if _, err := parseMachineBusy([]byte("intr 1 2 3\n")); err == nil {
		t.Error("accepted /proc/stat without a cpu line")
	}
}

func TestParseIOCalls(t *testing.T) {
	t.Parallel()
	in := "rchar: 9000\nwchar: 800\nsyscr: 120\nsyscw: 45\nread_bytes: 0\nwrite_bytes: 4096\n"
	got, err := parseIOCalls([]byte(in))
	if want := (ioCalls{reads: 120, writes: 45}); err != nil || got != want {
		t.Errorf("parseIOCalls = %+v, %v; want %+v", got, err, want)
	}
	for name, bad := range map[string]string{
		"no syscw":     "syscr: 120\n",
		"not a number": "syscr: 120\nsyscw: many\n",
	} {
		if _, err := parseIOCalls([]byte(bad)); err == nil {
			t.Errorf("%s: accepted %q", name, bad)
		}
	}
}

// A write to a pipe is one more write system call of this process in /proc/PID/io.
func TestProcIOCallsOfSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	before, err := procIOCalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const n = 50
	for range n {
		if _, err := w.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	after, err := procIOCalls(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := after.writes - before.writes; got < n {
		t.Errorf("%d write calls counted for %d writes", got, n)
	}
}
