// Package memprofile reads the runtime's memory profile for tests that attribute allocations
// by their stack (with runtime.MemProfileRate = 1, every allocation is recorded).
package memprofile

import "runtime"

// Records returns every record of the memory profile, after the collections that publish the
// allocations made so far: the profile is published a cycle or two late.
func Records() []runtime.MemProfileRecord {
	runtime.GC()
	runtime.GC()
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs := make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			return recs[:n]
		}
	}
}
