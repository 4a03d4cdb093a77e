//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The targets for nodenet (issue 16), at goalScale Services: the
// times and writes are absolute, the RSS is every process together.
const (
	goalScale                 = 10000
	goalFirstSyncSeconds      = 1.5
	goalOneEndpointSeconds    = 0.05
	goalOneMoreServiceSeconds = 0.2
	goalRestartSeconds        = 1
	goalRestartWrites         = 0
	goalRSSMiB                = 150
)

type report struct {
	Date                time.Time `json:"date"`
	Command             string    `json:"command"`
	Kernel              string    `json:"kernel"`
	CPUs                int       `json:"cpus"`
	NFT                 string    `json:"nft"`
	EndpointsPerService int       `json:"endpointsPerService"`
	Reps                int       `json:"reps"`
	MinSyncPeriod       string    `json:"minSyncPeriod"`
	SyncPeriod          string    `json:"syncPeriod"`
	SyncTimeout         string    `json:"syncTimeout"`
	// PlotScale is the scale results.svg shows (-services).
	PlotScale int `json:"plotScale"`
	Goals     struct {
		Scale                 int     `json:"services"`
		FirstSyncSeconds      float64 `json:"firstSyncSeconds"`
		OneEndpointSeconds    float64 `json:"oneEndpointSeconds"`
		OneMoreServiceSeconds float64 `json:"oneMoreServiceSeconds"`
		RestartSeconds        float64 `json:"restartSeconds"`
		RestartWrites         float64 `json:"restartWrites"`
		TotalRSSMiB           float64 `json:"totalPeakRSSMiB"`
	} `json:"goals"`
	Scales []scaleRun `json:"scales"`
}

// scaleRun is every proxy's figures at one number of Services.
type scaleRun struct {
	Services   int         `json:"services"`
	Results    []result    `json:"results"`
	Comparison *comparison `json:"comparison,omitempty"`
}

// comparison is nodenet over kube-proxy, when both finished, and
// nodenet against the absolute targets.
type comparison struct {
	FirstSyncRatio      float64 `json:"firstSyncRatio,omitempty"`
	OneEndpointRatio    float64 `json:"oneEndpointRatio,omitempty"`
	OneMoreServiceRatio float64 `json:"oneMoreServiceRatio,omitempty"`
	TotalRSSRatio       float64 `json:"totalPeakRSSRatio,omitempty"`
	RestartRatio        float64 `json:"restartRatio,omitempty"`
	// Goals met by nodenet (set at the goal scale only).
	Goals map[string]bool `json:"goalsMet,omitempty"`
}

func newReport(ctx context.Context, cfg config) *report {
	r := &report{
		Date: time.Now().UTC().Truncate(time.Second),
		// go run's binary has a temp name; the harness runs from the
		// repository root either way.
		Command:             strings.Join(append([]string{"go run ./bench/proxy"}, os.Args[1:]...), " "),
		CPUs:                runtime.NumCPU(),
		EndpointsPerService: cfg.endpoints,
		Reps:                cfg.reps,
		MinSyncPeriod:       cfg.minSyncPeriod.String(),
		SyncPeriod:          syncPeriod.String(),
		SyncTimeout:         cfg.syncTimeout.String(),
		PlotScale:           cfg.services,
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if out, err := exec.CommandContext(ctx, "nft", "--version").Output(); err == nil {
		r.NFT = strings.TrimSpace(string(out))
	}
	g := &r.Goals
	g.Scale, g.FirstSyncSeconds, g.OneEndpointSeconds, g.OneMoreServiceSeconds = goalScale, goalFirstSyncSeconds, goalOneEndpointSeconds, goalOneMoreServiceSeconds
	g.RestartSeconds, g.RestartWrites, g.TotalRSSMiB = goalRestartSeconds, goalRestartWrites, goalRSSMiB
	return r
}

// find returns proxy's figures, nil when it has none.
func (s *scaleRun) find(proxy string) *result {
	for i := range s.Results {
		if s.Results[i].Proxy == proxy && s.Results[i].DidNotFinish == "" {
			return &s.Results[i]
		}
	}
	return nil
}

// plotRun is the scale results.svg shows: PlotScale if it was measured,
// else the largest.
func (r *report) plotRun() *scaleRun {
	if len(r.Scales) == 0 {
		return nil
	}
	for i := range r.Scales {
		if r.Scales[i].Services == r.PlotScale {
			return &r.Scales[i]
		}
	}
	return &r.Scales[len(r.Scales)-1]
}

func (s *scaleRun) compare() {
	kp, nn := s.find("kube-proxy"), s.find("nodenet")
	if nn == nil {
		return
	}
	c := &comparison{}
	if kp != nil {
		c.FirstSyncRatio = nn.FirstSyncSeconds / kp.FirstSyncSeconds
		c.OneEndpointRatio = nn.OneEndpointSeconds / kp.OneEndpointSeconds
		c.OneMoreServiceRatio = nn.OneMoreServiceSeconds / kp.OneMoreServiceSeconds
		c.TotalRSSRatio = nn.TotalPeakRSSMiB / kp.TotalPeakRSSMiB
		if nn.Restart != nil && kp.Restart != nil && kp.Restart.FirstSyncSeconds > 0 {
			c.RestartRatio = nn.Restart.FirstSyncSeconds / kp.Restart.FirstSyncSeconds
		}
	}
	if s.Services == goalScale {
		c.Goals = map[string]bool{
			"firstSync":      nn.FirstSyncSeconds <= goalFirstSyncSeconds,
			"oneEndpoint":    nn.OneEndpointSeconds <= goalOneEndpointSeconds,
			"oneMoreService": nn.OneMoreServiceSeconds <= goalOneMoreServiceSeconds,
			"totalPeakRSS":   nn.TotalPeakRSSMiB <= goalRSSMiB,
		}
		if rr := nn.Restart; rr != nil && rr.DidNotFinish == "" {
			c.Goals["restart"] = rr.FirstSyncSeconds <= goalRestartSeconds && rr.writes() <= goalRestartWrites
		}
	}
	s.Comparison = c
}

// write puts results.json, results.svg and scaling.svg in dir.
func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	return r.plot(dir)
}

// plot writes the two SVGs.
func (r *report) plot(dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "results.svg"), []byte(r.svg()), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "scaling.svg"), []byte(r.scalingSVG()), 0o644)
}

// replot redraws the plot of a finished run.
func replot(_ context.Context, cfg config) error {
	data, err := os.ReadFile(filepath.Join(cfg.out, "results.json"))
	if err != nil {
		return err
	}
	var r report
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("parse results.json: %w", err)
	}
	if err := r.plot(cfg.out); err != nil {
		return err
	}
	fmt.Print(r.table())
	return nil
}

// table is the human summary printed at the end.
func (r *report) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d endpoints per Service, kernel %s, %d CPUs, %s\n",
		r.EndpointsPerService, r.Kernel, r.CPUs, r.NFT)
	fmt.Fprintf(&b, "\n%8s %-11s %10s %10s %10s %12s %10s %10s %10s\n", "services", "proxy", "first (s)",
		"1 ep (s)", "1 svc (s)", "restart (s)", "writes", "RSS (MiB)", "nft (MiB)")
	for _, sr := range r.Scales {
		for _, res := range sr.Results {
			if res.DidNotFinish != "" {
				fmt.Fprintf(&b, "%8d %-11s %s\n", sr.Services, res.Proxy, res.DidNotFinish)
				continue
			}
			restart, writes := "-", "-"
			if rr := res.Restart; rr != nil {
				restart = rr.DidNotFinish
				if restart == "" {
					restart = fmt.Sprintf("%.2f", rr.FirstSyncSeconds)
					writes = fmt.Sprintf("%.0f", rr.writes())
				}
			}
			fmt.Fprintf(&b, "%8d %-11s %10.2f %10.3f %10.3f %12s %10s %10.0f %10.0f\n", sr.Services, res.Proxy,
				res.FirstSyncSeconds, res.OneEndpointSeconds, res.OneMoreServiceSeconds, restart, writes,
				res.TotalPeakRSSMiB, res.NFTPeakRSSMiB)
		}
		if c := sr.Comparison; c != nil && c.FirstSyncRatio > 0 {
			fmt.Fprintf(&b, "%8s nodenet/kube-proxy: first sync %.2f×, one endpoint %.2f×, one more service %.2f×, restart %.2f×, total RSS %.2f×\n",
				"", c.FirstSyncRatio, c.OneEndpointRatio, c.OneMoreServiceRatio, c.RestartRatio, c.TotalRSSRatio)
		}
		if c := sr.Comparison; c != nil && c.Goals != nil {
			fmt.Fprintf(&b, "%8s goals at %d (first sync ≤ %.1f s, one endpoint ≤ %.2f s, one more service ≤ %.1f s, restart ≤ %d s with %d writes, total RSS ≤ %d MiB): %v\n",
				"", goalScale, goalFirstSyncSeconds, goalOneEndpointSeconds, goalOneMoreServiceSeconds,
				goalRestartSeconds, goalRestartWrites, goalRSSMiB, c.Goals)
		}
	}
	return b.String()
}
