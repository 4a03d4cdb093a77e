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

// svg draws the figures as three bar panels: first sync, one more service
// (each with the goal at half kube-proxy's time) and peak RSS (with the
// 150 MiB goal). Plain SVG, so it needs nothing to render.
func (r *report) svg() string {
	panels := r.panels()
	width := panelW * len(panels)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, panelH+40)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15">%s</text>`+"\n", width/2,
		html.EscapeString(fmt.Sprintf("Service proxies, nftables: %d services × %d endpoints (%s, kernel %s, %d CPUs)",
			r.Services, r.EndpointsPerService, r.Date.Format("2006-01-02"), r.Kernel, r.CPUs)))
	for i, p := range panels {
		p.draw(&b, i*panelW+40)
	}
	// Legend.
	lx := 40
	for _, res := range r.Results {
		colour := proxyColours[res.Proxy]
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="12" fill="%s"/>`+"\n", lx, panelH+14, colour)
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", lx+16, panelH+24, html.EscapeString(res.Proxy+" ("+res.Version+")"))
		lx += 300
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// panels are the figures to draw, one bar per proxy.
func (r *report) panels() []panel {
	times := func(title string, v func(result) float64) panel {
		p := panel{title: title, format: "%.2f s"}
		g := barGroup{}
		for _, res := range r.Results {
			g.bars = append(g.bars, bar{res.Proxy, v(res)})
		}
		p.groups = []barGroup{g}
		if kp := r.find("kube-proxy"); kp != nil {
			p.goal = v(*kp) * goalTimeRatio
			p.goalLabel = fmt.Sprintf("goal %.2f s", p.goal)
		}
		return p
	}
	rss := panel{title: "Peak RSS (MiB)", format: "%.0f", goal: goalRSSMiB, goalLabel: fmt.Sprintf("goal %d MiB", goalRSSMiB)}
	for _, kind := range []string{"proxy", "nft"} {
		g := barGroup{label: kind}
		for _, res := range r.Results {
			v := res.ProxyPeakRSSMiB
			if kind == "nft" {
				v = res.NFTPeakRSSMiB
			}
			g.bars = append(g.bars, bar{res.Proxy, v})
		}
		rss.groups = append(rss.groups, g)
	}
	return []panel{
		times("First sync (s)", func(r result) float64 { return r.FirstSyncSeconds }),
		times("One more service (s)", func(r result) float64 { return r.OneMoreServiceSeconds }),
		rss,
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
