package admin

import (
	"testing"

	"github.com/sluicehq/sluice/core/wsapi"
)

// A route removed from the table keeps its series while one of its sessions is open, and loses
// them once none is.
func TestPruneRemovedRoutes(t *testing.T) {
	t.Parallel()
	src := &countingSource{}
	m := NewMetrics(src, "test")
	old, kept := m.RouteMetrics("old"), m.RouteMetrics("kept")
	old.Sessions[wsapi.Producer].Inc()
	old.BytesIn.Add(10)
	kept.BytesIn.Add(10)
	series := func(route string) int {
		t.Helper()
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "route" && l.GetValue() == route {
						n++
					}
				}
			}
		}
		return n
	}
	m.Prune([]string{"kept"})
	if series("old") == 0 {
		t.Fatal("a removed route's series went while its session was open")
	}
	old.Sessions[wsapi.Producer].Dec()
	m.Prune([]string{"kept"})
	if n := series("old"); n != 0 {
		t.Errorf("%d series of the removed route after its last session closed, want 0", n)
	}
	if series("kept") == 0 {
		t.Error("the live route's series went too")
	}
}
