package bench

import "testing"

// The /proc parsers never panic, and a CPU time they return is never negative.
func FuzzParseStatCPU(f *testing.F) {
	f.Add([]byte("4242 (sluice) S 1 2 3 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 8 0 1234 1000000 500"))
	f.Add([]byte("1 (a) b) R 0"))
	f.Add([]byte("cpu  100 5 20 9000 40 3 2 1 0 0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if d, err := parseStatCPU(data); err == nil && d < 0 {
			t.Errorf("parseStatCPU(%q) = %s", data, d)
		}
		_, _ = parseMachineBusy(data)
		_ = parseStatus(data)
	})
}

// -cpus parsing never panics, and what it accepts is disjoint, sorted and in range.
func FuzzParsePinning(f *testing.F) {
	for _, s := range []string{"server=1,load=0", "server=2-3,load=0,1", "load=0", "server=1-0", "x=1", ",,="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePinning(s, 8)
		if err != nil {
			return
		}
		for _, l := range []cpuList{p.Server, p.Load} {
			for i, c := range l {
				if c < 0 || c >= 8 || (i > 0 && l[i-1] >= c) {
					t.Fatalf("parsePinning(%q) = %v", s, p)
				}
			}
		}
		for _, c := range p.Server {
			for _, d := range p.Load {
				if c == d {
					t.Fatalf("parsePinning(%q) shares CPU %d", s, c)
				}
			}
		}
	})
}
