//go:build !unix

package testkit

import "time"

// ProcessCPU is the CPU time, user and system, this process has used; false where the system
// does not tell, as here.
func ProcessCPU() (time.Duration, bool) { return 0, false }
