//go:build linux

package main

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// One colour per proxy, in run order.
var proxyColours = map[string]string{"kube-proxy": "#7f8c8d", "nodenet": "#2e86de"}

type bar struct {
	label string // proxy
	value float64
}

type barGroup struct {
	label string
	bars  []bar
}

type panel struct {
	title     string
	format    string // value label format
	groups    []barGroup
	goal      float64 // dashed line; 0 for none
	goalLabel string
}

// Layout of the plot, in pixels.
const (
	panelW, panelH = 300, 320 // one panel
	plotTop        = 60       // the panels' plot areas start here
	plotH          = 220
)

// svg draws the figures at the plot scale as bar panels: first sync, one
// endpoint added, one more service, restart onto a correct table (each
// with nodenet's target) and peak RSS (proxy, nft children, all
// together, with the 150 MiB target). Plain SVG, so it needs nothing to
// render.
func (r *report) svg() string {
	sr := r.plotRun()
	if sr == nil {
		return emptySVG
	}
	panels := r.panels(sr)
	width := panelW * len(panels)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, panelH+40)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15">%s</text>`+"\n", width/2,
		html.EscapeString(fmt.Sprintf("Service proxies, nftables: %d services × %d endpoints (%s, kernel %s, %d CPUs)",
			sr.Services, r.EndpointsPerService, r.Date.Format("2006-01-02"), r.Kernel, r.CPUs)))
	for i, p := range panels {
		p.draw(&b, i*panelW+40)
	}
	legend(&b, sr.Results, panelH+14)
	b.WriteString("</svg>\n")
	return b.String()
}

const emptySVG = `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>` + "\n"

// legend draws one swatch per proxy at y.
func legend(b *strings.Builder, results []result, y int) {
	lx := 40
	for _, res := range results {
		colour := proxyColours[res.Proxy]
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, y, colour)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", lx+16, y+10, html.EscapeString(res.Proxy+" ("+res.Version+")"))
		lx += 300
	}
}

// panels are the figures to draw, one bar per proxy that finished.
func (r *report) panels(sr *scaleRun) []panel {
	goalAt := func(v float64) float64 {
		if sr.Services == goalScale {
			return v
		}
		return 0
	}
	times := func(title string, goal float64, v func(result) (float64, bool)) panel {
		p := panel{title: title, format: "%.2f s", goal: goalAt(goal)}
		if p.goal > 0 {
			p.goalLabel = fmt.Sprintf("target %s s", trimFloat(goal))
		}
		g := barGroup{}
		for _, res := range sr.Results {
			if x, ok := v(res); ok && res.DidNotFinish == "" {
				g.bars = append(g.bars, bar{res.Proxy, x})
			}
		}
		p.groups = []barGroup{g}
		return p
	}
	always := func(f func(result) float64) func(result) (float64, bool) {
		return func(r result) (float64, bool) { return f(r), true }
	}
	rss := panel{title: "Peak RSS (MiB)", format: "%.0f", goal: goalAt(goalRSSMiB)}
	if rss.goal > 0 {
		rss.goalLabel = fmt.Sprintf("target %d MiB (all)", goalRSSMiB)
	}
	for _, kind := range []string{"proxy", "nft", "all"} {
		g := barGroup{label: kind}
		for _, res := range sr.Results {
			if res.DidNotFinish != "" {
				continue
			}
			v := map[string]float64{"proxy": res.ProxyPeakRSSMiB, "nft": res.NFTPeakRSSMiB, "all": res.TotalPeakRSSMiB}[kind]
			g.bars = append(g.bars, bar{res.Proxy, v})
		}
		rss.groups = append(rss.groups, g)
	}
	return []panel{
		times("First sync (s)", goalFirstSyncSeconds, always(func(r result) float64 { return r.FirstSyncSeconds })),
		times("One endpoint added (s)", goalOneEndpointSeconds, always(func(r result) float64 { return r.OneEndpointSeconds })),
		times("One more service (s)", goalOneMoreServiceSeconds, always(func(r result) float64 { return r.OneMoreServiceSeconds })),
		times("Restart onto its table (s)", goalRestartSeconds, func(r result) (float64, bool) {
			if r.Restart == nil || r.Restart.DidNotFinish != "" {
				return 0, false
			}
			return r.Restart.FirstSyncSeconds, true
		}),
		rss,
	}
}

// scalingSVG draws first sync and total peak RSS against the number of
// Services, one line per proxy; a scale where a proxy did not finish is a
// cross at the top of the panel, labelled.
func (r *report) scalingSVG() string {
	if len(r.Scales) == 0 {
		return emptySVG
	}
	const w, h = 460, 360
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", 2*w, h+40)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15">%s</text>`+"\n", w,
		html.EscapeString(fmt.Sprintf("How cost grows: Services × %d endpoints (%s, kernel %s, %d CPUs, timeout %s)",
			r.EndpointsPerService, r.Date.Format("2006-01-02"), r.Kernel, r.CPUs, r.SyncTimeout)))
	r.linePanel(&b, 60, w-90, h, "First sync (s)", func(res result) float64 { return res.FirstSyncSeconds })
	r.linePanel(&b, w+60, w-90, h, "Peak RSS, all processes (MiB)", func(res result) float64 { return res.TotalPeakRSSMiB })
	legend(&b, r.Scales[len(r.Scales)-1].Results, h+14)
	b.WriteString("</svg>\n")
	return b.String()
}

// linePanel draws one figure against the scale, x from x0 over plotW.
func (r *report) linePanel(b *strings.Builder, x0, plotW, h int, title string, v func(result) float64) {
	plotH := h - plotTop - 50
	maxX := float64(r.Scales[len(r.Scales)-1].Services)
	maxY := 0.0
	for _, sr := range r.Scales {
		for _, res := range sr.Results {
			if res.DidNotFinish == "" {
				maxY = max(maxY, v(res))
			}
		}
	}
	maxY = niceCeil(maxY * 1.1)
	maxX = niceCeil(maxX)
	x := func(n float64) float64 { return float64(x0) + n/maxX*float64(plotW) }
	y := func(v float64) float64 { return float64(plotTop+plotH) - v/maxY*float64(plotH) }
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" font-size="13" font-weight="bold">%s</text>`+"\n",
		x0+plotW/2, plotTop-16, html.EscapeString(title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, plotTop, x0, plotTop+plotH)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, plotTop+plotH, x0+plotW, plotTop+plotH)
	for t := 0; t <= 5; t++ {
		yv, xv := maxY*float64(t)/5, maxX*float64(t)/5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", x0+1, y(yv), x0+plotW, y(yv))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-4, y(yv)+4, trimFloat(yv))
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(xv), plotTop+plotH+16, trimFloat(xv))
	}
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle">Services</text>`+"\n", x0+plotW/2, plotTop+plotH+34)
	for _, proxy := range []string{"kube-proxy", "nodenet"} {
		colour := proxyColours[proxy]
		var points []string
		for _, sr := range r.Scales {
			for _, res := range sr.Results {
				if res.Proxy != proxy {
					continue
				}
				px := x(float64(sr.Services))
				if res.DidNotFinish != "" {
					if !strings.HasPrefix(res.DidNotFinish, "not run") {
						fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle" fill="%s" font-weight="bold">✗</text>`+"\n", px, plotTop+4, colour)
						fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="end" fill="%s">%s</text>`+"\n", px-6, plotTop+4, colour,
							html.EscapeString("did not finish in "+r.SyncTimeout))
					}
					continue
				}
				py := y(v(res))
				points = append(points, fmt.Sprintf("%.1f,%.1f", px, py))
				fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>`+"\n", px, py, colour)
				fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="%s">%s</text>`+"\n", px, py-7, colour, trimFloat(v(res)))
			}
		}
		if len(points) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(points, " "), colour)
		}
	}
}

// draw draws p with its y axis at x0: the title, the axis with five
// ticks, the bars and the goal line.
func (p panel) draw(b *strings.Builder, x0 int) {
	plotW := panelW - 60
	maxV := p.goal
	for _, g := range p.groups {
		for _, br := range g.bars {
			maxV = max(maxV, br.value)
		}
	}
	maxV = niceCeil(maxV * 1.1)
	y := func(v float64) float64 { return plotTop + plotH - v/maxV*plotH }
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="middle" font-size="13" font-weight="bold">%s</text>`+"\n",
		x0+plotW/2, plotTop-16, html.EscapeString(p.title))
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, plotTop, x0, plotTop+plotH)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, plotTop+plotH, x0+plotW, plotTop+plotH)
	for t := 0; t <= 5; t++ {
		v := maxV * float64(t) / 5
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", x0+1, y(v), x0+plotW, y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", x0-4, y(v)+4, trimFloat(v))
	}
	groupW := float64(plotW) / float64(len(p.groups))
	for gi, g := range p.groups {
		barW := groupW * 0.7 / float64(max(len(g.bars), 1))
		gx := float64(x0) + groupW*float64(gi) + groupW*0.15
		for bi, br := range g.bars {
			bx := gx + barW*float64(bi)
			colour := proxyColours[br.label]
			if colour == "" {
				colour = "#999"
			}
			fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
				bx+2, y(br.value), barW-4, plotTop+plotH-y(br.value), colour)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
				bx+barW/2, y(br.value)-4, html.EscapeString(fmt.Sprintf(p.format, br.value)))
			if g.label == "" {
				fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
					bx+barW/2, plotTop+plotH+16, html.EscapeString(br.label))
			}
		}
		if g.label != "" {
			fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
				gx+groupW*0.35, plotTop+plotH+16, html.EscapeString(g.label))
		}
	}
	if p.goal > 0 {
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#c0392b" stroke-dasharray="6,4"/>`+"\n",
			x0, y(p.goal), x0+plotW, y(p.goal))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#c0392b" stroke="white" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
			x0+plotW, y(p.goal)-4, html.EscapeString(p.goalLabel))
	}
}

// niceCeil rounds v up to a round axis maximum whose fifths are round too.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
