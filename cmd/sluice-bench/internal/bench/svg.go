package bench

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// chart is a stack of line-chart panels sharing one x axis (seconds) and one legend: each
// series keeps its colour in every panel. It is written as plain SVG.
type chart struct {
	title  string
	xLabel string
	panels []panel
}

type panel struct {
	title  string // e.g. "acked msgs/s"
	series []series
}

type series struct {
	name   string
	points []point
	dashed bool // a reference line, e.g. a bound
}

type point struct{ X, Y float64 }

// Layout, in SVG user units.
const (
	svgWidth     = 960
	panelHeight  = 260
	marginLeft   = 80
	marginRight  = 24
	marginTop    = 28 // above each panel's plot: its title
	marginBottom = 36 // below each panel's plot: the x labels
	legendRow    = 18
)

// palette is a colour-blind-safe set (Okabe–Ito); series beyond it reuse colours.
var palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"}

func (c *chart) writeSVG(w io.Writer) error {
	names := c.seriesNames()
	colour := make(map[string]string, len(names))
	for i, n := range names {
		colour[n] = palette[i%len(palette)]
	}
	perRow := 4
	legendRows := (len(names) + perRow - 1) / perRow
	top := 36 + legendRows*legendRow
	height := top + len(c.panels)*(panelHeight+marginTop+marginBottom)
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, esc(c.title))
	for i, n := range names {
		x := marginLeft + (i%perRow)*210
		y := 36 + (i/perRow)*legendRow
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>`, x, y-4, x+20, y-4, colour[n])
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", x+26, y, esc(n))
	}
	xMax := c.xMax()
	for i, p := range c.panels {
		y0 := top + i*(panelHeight+marginTop+marginBottom) + marginTop
		p.write(&b, y0, xMax, c.xLabel, colour)
	}
	b.WriteString("</svg>\n")
	_, err := w.Write(b.Bytes())
	return err
}

func (c *chart) seriesNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, p := range c.panels {
		for _, s := range p.series {
			if !seen[s.name] {
				seen[s.name] = true
				names = append(names, s.name)
			}
		}
	}
	return names
}

func (c *chart) xMax() float64 {
	m := 0.0
	for _, p := range c.panels {
		for _, s := range p.series {
			for _, pt := range s.points {
				m = max(m, pt.X)
			}
		}
	}
	if m <= 0 {
		m = 1
	}
	return m
}

func (p panel) write(b *bytes.Buffer, y0 int, xMax float64, xLabel string, colour map[string]string) {
	plotW := float64(svgWidth - marginLeft - marginRight)
	plotH := float64(panelHeight)
	yMax := 0.0
	for _, s := range p.series {
		for _, pt := range s.points {
			if !math.IsNaN(pt.Y) && !math.IsInf(pt.Y, 0) {
				yMax = max(yMax, pt.Y)
			}
		}
	}
	yStep := niceStep(yMax / 5)
	yTop := math.Ceil(yMax/yStep) * yStep
	if yTop <= 0 {
		yTop = yStep
	}
	xStep := niceStep(xMax / 8)
	sx := func(x float64) float64 { return marginLeft + x/xMax*plotW }
	sy := func(y float64) float64 { return float64(y0) + plotH - y/yTop*plotH }

	fmt.Fprintf(b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", marginLeft, y0-8, esc(p.title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#999"/>`+"\n", marginLeft, y0, plotW, plotH)
	for y := 0.0; y <= yTop*1.0001; y += yStep {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e5e5e5"/>`, marginLeft, sy(y), marginLeft+plotW, sy(y))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginLeft-6, sy(y)+4, esc(tickLabel(y)))
	}
	for x := 0.0; x <= xMax*1.0001; x += xStep {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.0f" stroke="#999"/>`, sx(x), y0+panelHeight, sx(x), float64(y0)+plotH+4)
		fmt.Fprintf(b, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", sx(x), float64(y0)+plotH+17, esc(tickLabel(x)))
	}
	fmt.Fprintf(b, `<text x="%.0f" y="%.0f" text-anchor="middle" fill="#555">%s</text>`+"\n", marginLeft+plotW/2, float64(y0)+plotH+31, esc(xLabel))
	for _, s := range p.series {
		if len(s.points) == 0 {
			continue
		}
		var pts strings.Builder
		for i, pt := range s.points {
			if math.IsNaN(pt.Y) || math.IsInf(pt.Y, 0) {
				continue
			}
			if i > 0 {
				pts.WriteByte(' ')
			}
			fmt.Fprintf(&pts, "%.1f,%.1f", sx(pt.X), sy(pt.Y))
		}
		dash := ""
		if s.dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"><title>%s</title></polyline>`+"\n",
			colour[s.name], dash, pts.String(), esc(s.name))
	}
}

// niceStep rounds v up to 1, 2 or 5 times a power of ten.
func niceStep(v float64) float64 {
	if v <= 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 1
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*exp >= v {
			return m * exp
		}
	}
	return 10 * exp
}

func tickLabel(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 3, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(v/1e3, 'g', 3, 64) + "k"
	default:
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
