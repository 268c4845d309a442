package topicname

import (
	"strconv"
	"strings"
	"testing"
	"unicode"
)

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
		"orders-partition-١":                                    1, // Pulsar 4.2.4 reads it so
		"orders-partition-１":                                    1, // a fullwidth digit
		"orders-partition-٤٢":                                   42,
		"orders-partition-٠١":                                   -1, // a leading zero
		"orders-partition-\U0001D7CF":                           -1, // a digit of two UTF-16 code units
		"orders-partition-\u00b9":                               -1, // a superscript, not a decimal digit
		"orders-partition-\xff":                                 -1,
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

// FuzzPartitionIndex: a name designates partition n only when the text after its last
// PartitionSuffix is n's decimal digits, each of some script's, without a leading zero; and a
// name written with ASCII digits as strconv writes them designates its number.
func FuzzPartitionIndex(f *testing.F) {
	for _, s := range []string{"t-partition-3", "t-partition-01", "t-partition-١٢", "t-partition-2147483648", "t-partition-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n := PartitionIndex(name)
		i := strings.LastIndex(name, PartitionSuffix)
		if i < 0 {
			if n != -1 {
				t.Fatalf("PartitionIndex(%q) = %d without %q", name, n, PartitionSuffix)
			}
			return
		}
		digits := name[i+len(PartitionSuffix):]
		if m, err := strconv.ParseUint(digits, 10, 31); err == nil && strconv.FormatUint(m, 10) == digits && n != int(m) {
			t.Fatalf("PartitionIndex(%q) = %d, want %d", name, n, m)
		}
		if n < 0 {
			return
		}
		ascii := strings.Map(func(r rune) rune {
			if !unicode.IsDigit(r) || r > 0xFFFF {
				t.Fatalf("PartitionIndex(%q) = %d, but %q is not a digit of one code unit", name, n, r)
			}
			return '0' + rune(javaDigit(r))
		}, digits)
		if ascii != strconv.Itoa(n) {
			t.Fatalf("PartitionIndex(%q) = %d, but its digits read %s", name, n, ascii)
		}
	})
}
