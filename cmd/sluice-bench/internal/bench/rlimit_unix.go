//go:build unix

package bench

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// raiseFileLimit raises this process's soft limit on open files to the hard limit, and fails
// when even that is below need. (Children get the limit they inherit; Go programs raise
// their own soft limit at start.)
func raiseFileLimit(need int) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("reading the open-file limit: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			return fmt.Errorf("raising the open-file limit to %d: %w", lim.Max, err)
		}
	}
	// Cur is int64 on some systems.
	if uint64(lim.Cur) < uint64(need) { //nolint:gosec // G115: a count of files, not negative
		return fmt.Errorf("need %d open files, the hard limit is %d (ulimit -Hn)", need, lim.Max)
	}
	return nil
}
