package bench

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/cmd/sluice-bench/internal/bench/loadgen"
)

func testChart() *chart {
	return &chart{
		title: "a <chart> & more", xLabel: "seconds",
		panels: []panel{
			{title: "rate", series: []series{
				{name: "edge", points: []point{{0.5, 100}, {1, 120}, {1.5, math.NaN()}, {2, 90}}},
				{name: "single@old", points: []point{{0.5, 50}, {1, 55}}},
			}},
			{title: "latency", series: []series{
				{name: "edge", points: []point{{1, 3}}},
				{name: "bound", dashed: true, points: []point{{0, 7}, {2, 7}}},
				{name: "empty"},
			}},
		},
	}
}

// The chart is well-formed XML with one polyline per series that has points, every series in
// the legend once, and text escaped.
func TestChartSVG(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := testChart().writeSVG(&b); err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	polylines, texts := 0, map[string]int{}
	var inText bool
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, b.String())
		}
		switch el := tok.(type) {
		case xml.StartElement:
			if el.Name.Local == "polyline" {
				polylines++
				for _, a := range el.Attr {
					if a.Name.Local == "points" && strings.Contains(a.Value, "NaN") {
						t.Errorf("a NaN point was drawn: %s", a.Value)
					}
				}
			}
			inText = el.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts[string(el)]++
			}
		case xml.EndElement:
			inText = false
		}
	}
	if polylines != 4 {
		t.Errorf("%d polylines, want 4 (series without points are not drawn)", polylines)
	}
	for _, name := range []string{"edge", "single@old", "bound", "empty"} {
		if texts[name] != 1 {
			t.Errorf("legend has %q %d times, want once", name, texts[name])
		}
	}
	if texts["a <chart> & more"] != 1 {
		t.Errorf("title not found unescaped in the text nodes: %v", texts)
	}
}

func TestNiceStep(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]float64{0: 1, 0.3: 0.5, 1: 1, 1.2: 2, 3: 5, 7: 10, 2400: 5000, -1: 1} {
		if got := niceStep(in); math.Abs(got-want) > 1e-9 {
			t.Errorf("niceStep(%v) = %v, want %v", in, got, want)
		}
	}
}

// writeDir writes the three files; results.json holds the report's exported fields.
func TestReportFiles(t *testing.T) {
	t.Parallel()
	r := &report{
		Mode: "throughput", Command: "sluice-bench throughput -rounds 1", Machine: newMachine(pinning{Server: cpuList{1}, Load: cpuList{0}}),
		Settings: throughputSettings{Connections: 16, Window: 64},
		Results:  []*tpResult{{Name: "edge", Rate: 1234, PerServerCPU: 2000, Rounds: []tpRound{{Round: 1, Rate: 1234}}}},
		tables:   []*table{{title: "t", header: []string{"configuration", "acked msgs/s"}, rows: [][]string{{"edge", "1234"}}}},
		notes:    []string{"a note"},
		chart:    testChart(),
	}
	dir := filepath.Join(t.TempDir(), "out")
	if err := r.writeDir(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"$ sluice-bench throughput -rounds 1", "| configuration | acked msgs/s |", "| edge | 1234 |", "a note", "chart.svg", "server processes on CPU 1"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("results.md lacks %q:\n%s", want, md)
		}
	}
	var got struct {
		Mode     string
		Machine  machine
		Settings throughputSettings
		Results  []tpResult
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	if got.Mode != "throughput" || got.Settings.Window != 64 || len(got.Results) != 1 || got.Results[0].PerServerCPU != 2000 ||
		got.Machine.Pinning.Server.String() != "1" {
		t.Errorf("results.json decoded to %+v\n%s", got, js)
	}
	if _, err := os.Stat(filepath.Join(dir, "chart.svg")); err != nil {
		t.Error(err)
	}
}

func TestFirstLastMinute(t *testing.T) {
	t.Parallel()
	iv := func(ok int64, d time.Duration) loadgen.Interval { return loadgen.Interval{OK: ok, Length: d} }
	// 3 minutes of 10 s windows: 1000/s in the first minute, 500/s in the last.
	var long []loadgen.Interval
	for i := range 18 {
		n := int64(10_000)
		if i >= 12 {
			n = 5000
		}
		long = append(long, iv(n, 10*time.Second))
	}
	span, first, last := firstLastMinute(long)
	if span != 60 || first != 1000 || last != 500 {
		t.Errorf("3 min: span %v first %v last %v; want 60, 1000, 500", span, first, last)
	}
	// 35 s: halves, in whole windows (the last one cut short): 20 s from the start, 25 s
	// from the end.
	short := []loadgen.Interval{iv(100, 10*time.Second), iv(100, 10*time.Second), iv(50, 10*time.Second), iv(20, 5*time.Second)}
	span, first, last = firstLastMinute(short)
	if span != 17.5 || first != 10 || last != 6.8 {
		t.Errorf("35 s: span %v first %v last %v; want 17.5, 10, 6.8", span, first, last)
	}
	if _, f, l := firstLastMinute(nil); f != 0 || l != 0 {
		t.Error("no intervals gave rates")
	}
}

func TestPairResults(t *testing.T) {
	t.Parallel()
	mk := func(name, kind, bin string, rates ...float64) *tpResult {
		r := &tpResult{Name: name, Kind: kind, Binary: bin}
		for _, x := range rates {
			r.Rounds = append(r.Rounds, tpRound{Rate: x})
		}
		return r
	}
	res := []*tpResult{
		mk("edge@new", "edge", "new", 110, 200, 90),
		mk("edge@old", "edge", "old", 100, 100, 100),
		mk("hybrid@new", "hybrid", "new", 50, 50, 50),
		mk("none@new", "none", "new", 100, 100, 100),
	}
	pairResults(res, []*binSet{{label: "new"}, {label: "old"}})
	if got := res[0].Paired["edge@old"]; got != 1.1 {
		t.Errorf("edge@new vs edge@old %v, want the median ratio 1.1", got)
	}
	if res[1].Paired != nil {
		t.Errorf("the old binary's result got ratios %v", res[1].Paired)
	}
	if got := res[2].Paired["none@new"]; got != 0.5 {
		t.Errorf("hybrid vs none %v, want 0.5", got)
	}
}

// Over two rounds every configuration runs right after each of its neighbours once in each
// direction, and every round runs each configuration once.
func TestRoundOrder(t *testing.T) {
	t.Parallel()
	for n := 1; n <= 5; n++ {
		follows := map[[2]int]int{}
		for r := range 2 * n {
			order := roundOrder(n, r)
			seen := map[int]bool{}
			for j, i := range order {
				seen[i] = true
				if j > 0 {
					follows[[2]int{order[j-1], i}]++
				}
			}
			if len(seen) != n {
				t.Fatalf("n %d round %d: order %v misses configurations", n, r, order)
			}
		}
		for pair, k := range follows {
			if back := follows[[2]int{pair[1], pair[0]}]; back == 0 {
				t.Errorf("n %d: %d ran after %d %d times, never the other way round", n, pair[1], pair[0], k)
			}
		}
	}
}

// The system calls of the front process are summed over rounds and divided by every ok ack;
// a configuration without a front process (direct) has no row.
func TestSyscallTable(t *testing.T) {
	t.Parallel()
	mk := func(name string, rounds ...roundCPU) *tpResult {
		r := &tpResult{Name: name, hist: loadgen.NewHistogram()}
		for _, c := range rounds {
			r.Rounds = append(r.Rounds, tpRound{Rate: 1, OK: 1000, roundCPU: c})
		}
		r.summarise()
		return r
	}
	single := mk("single", roundCPU{FrontReads: 300, FrontWrites: 100}, roundCPU{FrontReads: 500, FrontWrites: 150})
	direct := mk("direct", roundCPU{}, roundCPU{})
	if single.ReadsPerMsg != 0.4 || single.WritesPerMsg != 0.125 {
		t.Fatalf("per message %v reads, %v writes; want 0.4 and 0.125", single.ReadsPerMsg, single.WritesPerMsg)
	}
	if direct.WritesPerMsg != 0 {
		t.Fatalf("direct: %v writes per message without a front process", direct.WritesPerMsg)
	}
	tab := syscallTable([]*tpResult{single, direct})
	if tab == nil || len(tab.rows) != 1 {
		t.Fatalf("table %+v, want one row", tab)
	}
	if got, want := strings.Join(tab.rows[0], " "), "single 0.400 0.125 8.0"; got != want {
		t.Errorf("row %q, want %q", got, want)
	}
	if syscallTable([]*tpResult{direct}) != nil {
		t.Error("a table without any front process")
	}
}

// A round counts the front process's system calls only when both of its samples read them:
// a process whose /proc/PID/io may not be read leaves the counts out, not negative.
func TestUntilFrontCalls(t *testing.T) {
	t.Parallel()
	at := time.Now()
	before := cpuSample{at: at, front: &ioCalls{reads: 10, writes: 4}}
	after := cpuSample{at: at.Add(time.Second), front: &ioCalls{reads: 110, writes: 29}}
	if c := before.until(after); c.FrontReads != 100 || c.FrontWrites != 25 {
		t.Errorf("counted %d reads and %d writes, want 100 and 25", c.FrontReads, c.FrontWrites)
	}
	unread := cpuSample{at: at.Add(time.Second)}
	if c := before.until(unread); c.FrontReads != 0 || c.FrontWrites != 0 {
		t.Errorf("counted %d reads and %d writes without the second sample", c.FrontReads, c.FrontWrites)
	}
}

// The Pulsar table gives what a connection cost the proxy: its RSS growth over the connections;
// a configuration with no proxy process (direct) has none.
func TestPulsarTableRSSAConnection(t *testing.T) {
	results := []*pulsarResult{
		{tpResult: &tpResult{Name: "sluice"}, ProxyCPUS: 1, RSSBefore: 20 << 20, PeakRSS: 84 << 20},
		{tpResult: &tpResult{Name: "direct"}},
	}
	tbl := pulsarTable(results, 1000, "t")
	col := slices.Index(tbl.header, "RSS a connection")
	if col < 0 {
		t.Fatalf("no RSS a connection column in %q", tbl.header)
	}
	if got := tbl.rows[0][col]; got != "65.5 KiB" {
		t.Errorf("sluice: %s, want 65.5 KiB (64 MiB over 1,000 connections)", got)
	}
	if got := tbl.rows[1][col]; got != "–" {
		t.Errorf("direct: %s, want –", got)
	}
}
