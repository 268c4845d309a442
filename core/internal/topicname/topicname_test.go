package topicname

import "testing"

func TestPartitionIndex(t *testing.T) {
	for name, want := range map[string]int{
		"persistent://public/default/orders-partition-3":        3,
		"orders-partition-0":                                    0,
		"a-partition-x-partition-1":                             1,
		"orders-partition-2147483647":                           2147483647,
		"orders":                                                -1,
		"re-partition-events":                                   -1,
		"orders-partition-":                                     -1,
		"orders-partition-01":                                   -1, // Java: not the int's own text
		"orders-partition-+3":                                   -1,
		"orders-partition--1":                                   -1,
		"orders-partition-2147483648":                           -1, // past an int
		"orders-partition-3-old":                                -1,
		"orders-partition-١":                                    -1, // not an ASCII digit
		"persistent://public/default/x-partition-1/y-partition": -1,
	} {
		if got := PartitionIndex(name); got != want {
			t.Errorf("PartitionIndex(%q) = %d, want %d", name, got, want)
		}
	}
	for name, want := range map[string]string{
		"persistent://public/default/orders-partition-3":  "persistent://public/default/orders",
		"persistent://public/default/orders-partition-03": "persistent://public/default/orders-partition-03",
		"orders": "orders",
	} {
		if got := Base(name); got != want {
			t.Errorf("Base(%q) = %q, want %q", name, got, want)
		}
	}
}

// Read for every message a consumer receives: it allocates nothing.
func TestPartitionIndexAllocatesNothing(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { PartitionIndex("persistent://public/default/orders-partition-1234") }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
