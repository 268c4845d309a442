package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// report is one benchmark's outcome: what -json prints and results.json holds (the exported
// fields), and the tables, notes and chart the text and markdown forms show.
type report struct {
	Mode     string  `json:"mode"`
	Command  string  `json:"command"`
	Machine  machine `json:"machine"`
	Settings any     `json:"settings"`
	Results  any     `json:"results"`

	tables []*table
	notes  []string
	chart  *chart
}

// machine describes where and when a benchmark ran.
type machine struct {
	CPUs        int            `json:"cpus"`
	GOMAXPROCS  int            `json:"gomaxprocs"`
	GoVersion   string         `json:"go_version"`
	OS          string         `json:"os"`
	Arch        string         `json:"arch"`
	Started     time.Time      `json:"started"`
	LoadAverage string         `json:"load_average,omitempty"`
	Pinning     pinning        `json:"pinning"`
	Binaries    []binaryReport `json:"binaries,omitempty"`
}

// binaryReport names a sluice binary the benchmark ran as a server.
type binaryReport struct {
	Label   string `json:"label"`
	Path    string `json:"path"`
	Version string `json:"version"`
}

func newMachine(p pinning) machine {
	return machine{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, Started: time.Now().UTC().Truncate(time.Second),
		LoadAverage: loadAverage(), Pinning: p,
	}
}

func (m machine) String() string {
	s := fmt.Sprintf("%d CPUs, %s, %s/%s, %s", m.CPUs, m.GoVersion, m.OS, m.Arch, m.Started.Format("2006-01-02 15:04 UTC"))
	if m.LoadAverage != "" {
		s += ", load average " + m.LoadAverage + " at the start"
	}
	s += "; " + m.Pinning.String()
	for _, b := range m.Binaries {
		s += fmt.Sprintf("; %s: %s (%s)", b.Label, b.Path, b.Version)
	}
	return s
}

type table struct {
	title  string
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer, markdown bool) {
	if markdown {
		if t.title != "" {
			fmt.Fprintf(w, "**%s**\n\n", t.title)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(t.header, " | "))
		seps := make([]string, len(t.header))
		for i := range seps {
			seps[i] = "---"
			if i > 0 {
				seps[i] = "---:"
			}
		}
		fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
		for _, r := range t.rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		fmt.Fprintln(w)
		return
	}
	if t.title != "" {
		fmt.Fprintln(w, t.title)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, strings.Join(t.header, "\t")+"\t")
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
}

// writeText writes the report as text tables, or as markdown.
func (r *report) writeText(w io.Writer, markdown bool) {
	if markdown {
		fmt.Fprintf(w, "```\n$ %s\n```\n\n%s\n\n", r.Command, r.Machine)
	} else {
		fmt.Fprintf(w, "$ %s\n%s\n\n", r.Command, r.Machine)
	}
	for _, t := range r.tables {
		t.write(w, markdown)
	}
	for _, n := range r.notes {
		fmt.Fprintln(w, n)
	}
	if markdown && r.chart != nil {
		fmt.Fprintln(w, "\n![chart](chart.svg)")
	}
}

func (r *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// writeDir writes results.md, results.json and, when the report has one, chart.svg.
func (r *report) writeDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: a report for people to read
		return err
	}
	var md strings.Builder
	r.writeText(&md, true)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md.String()), 0o644); err != nil { //nolint:gosec // G306: a report for people to read
		return err
	}
	var js strings.Builder
	if err := r.writeJSON(&js); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), []byte(js.String()), 0o644); err != nil { //nolint:gosec // G306: a report for people to read
		return err
	}
	if r.chart == nil {
		return nil
	}
	f, err := os.Create(filepath.Join(dir, "chart.svg"))
	if err != nil {
		return err
	}
	if err := r.chart.writeSVG(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// Formatting helpers for table cells.

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/(1<<10)) }

func msec(us float64) string { return fmt.Sprintf("%.2f ms", us/1000) }

func count(n int64) string { return strconv.FormatInt(n, 10) }

func rate(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }

func ratio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f×", a/b)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// runID keeps topic names of successive runs apart.
func runID() string { return strconv.FormatInt(time.Now().UnixNano()%1e9, 36) }

// seconds is a duration in seconds, for JSON.
func seconds(d time.Duration) float64 { return d.Seconds() }
