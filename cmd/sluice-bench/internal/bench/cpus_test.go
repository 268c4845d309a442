package bench

import (
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestParsePinning(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		in      string
		ncpu    int
		want    pinning
		wantErr string
	}{
		"empty":          {in: "", ncpu: 2},
		"two":            {in: "server=1,load=0", ncpu: 2, want: pinning{Server: cpuList{1}, Load: cpuList{0}}},
		"lists":          {in: "load=0,1,server=3,2", ncpu: 4, want: pinning{Server: cpuList{2, 3}, Load: cpuList{0, 1}}},
		"range":          {in: "server=2-3,load=0", ncpu: 4, want: pinning{Server: cpuList{2, 3}, Load: cpuList{0}}},
		"server only":    {in: "server=1", ncpu: 2, want: pinning{Server: cpuList{1}}},
		"overlap":        {in: "server=1,load=1", ncpu: 2, wantErr: "disjoint"},
		"too high":       {in: "server=2,load=0", ncpu: 2, wantErr: "CPUs 0-1"},
		"unknown role":   {in: "broker=1", ncpu: 2, wantErr: "unknown role"},
		"no role":        {in: "1,2", ncpu: 4, wantErr: "must start"},
		"bad number":     {in: "server=x", ncpu: 2, wantErr: "bad CPU"},
		"bad range":      {in: "server=3-1", ncpu: 4, wantErr: "bad CPU range"},
		"twice":          {in: "server=1,server=0", ncpu: 2, wantErr: "twice"},
		"repeats merged": {in: "server=1,1", ncpu: 2, want: pinning{Server: cpuList{1}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := parsePinning(c.in, c.ncpu)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got.String() != c.want.String() {
				t.Fatalf("parsePinning(%q) = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}

// A child started pinned runs on the given CPU only, from its first thread on, and the
// starting process's own threads keep their mask.
func TestStartPinned(t *testing.T) {
	if !affinitySupported {
		t.Skip("no sched_setaffinity here")
	}
	own, err := readStatus("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	cpu := cpuList{runtime.NumCPU() - 1}
	cmd := exec.Command("sleep", "10")
	if err := startPinned(cmd, cpu); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := checkPinned(cmd.Process.Pid, cpu); err != nil {
		t.Error(err)
	}
	if runtime.NumCPU() > 1 {
		if err := checkPinned(cmd.Process.Pid, cpuList{0, 1}); err == nil {
			t.Error("checkPinned accepted a mask the child does not have")
		}
	}
	ids, err := threadIDs(selfPID)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		st, err := readStatus(fmt.Sprintf("/proc/self/task/%d/status", id))
		if err == nil && st.CPUs != own.CPUs {
			t.Errorf("thread %d of this process now runs on %q, was %q", id, st.CPUs, own.CPUs)
		}
	}
}

// pinSelf moves every thread, and its restore puts them back.
func TestPinSelf(t *testing.T) {
	if !affinitySupported {
		t.Skip("no sched_setaffinity here")
	}
	own, err := readStatus("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	restore, err := pinSelf(cpuList{0})
	if err != nil {
		t.Fatal(err)
	}
	err = checkPinned(selfPID, cpuList{0})
	gotProcs := runtime.GOMAXPROCS(0)
	restore()
	if err != nil {
		t.Error(err)
	}
	if gotProcs != 1 {
		t.Errorf("GOMAXPROCS %d while pinned to one CPU, want 1", gotProcs)
	}
	if got := runtime.GOMAXPROCS(0); got != procs {
		t.Errorf("GOMAXPROCS %d after restore, want %d", got, procs)
	}
	after, err := readStatus("/proc/self/status")
	if err != nil || after.CPUs != own.CPUs {
		t.Errorf("after restore the process runs on %q (%v), want %q", after.CPUs, err, own.CPUs)
	}
}
