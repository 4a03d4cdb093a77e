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

// The goals for nodenet against kube-proxy.
const (
	goalTimeRatio = 0.5
	goalRSSMiB    = 150
)

type report struct {
	Date                time.Time `json:"date"`
	Command             string    `json:"command"`
	Kernel              string    `json:"kernel"`
	CPUs                int       `json:"cpus"`
	NFT                 string    `json:"nft"`
	Services            int       `json:"services"`
	EndpointsPerService int       `json:"endpointsPerService"`
	Reps                int       `json:"oneMoreServiceReps"`
	MinSyncPeriod       string    `json:"minSyncPeriod"`
	SyncPeriod          string    `json:"syncPeriod"`
	Goals               struct {
		TimeRatio float64 `json:"timeRatioVsKubeProxy"`
		RSSMiB    float64 `json:"peakRSSMiB"`
	} `json:"goals"`
	Results    []result    `json:"results"`
	Comparison *comparison `json:"comparison,omitempty"`
}

// comparison is nodenet over kube-proxy, when both ran.
type comparison struct {
	FirstSyncRatio      float64 `json:"firstSyncRatio"`
	OneMoreServiceRatio float64 `json:"oneMoreServiceRatio"`
	TimeGoalMet         bool    `json:"timeGoalMet"`
	ProxyRSSGoalMet     bool    `json:"proxyRSSGoalMet"`
	NFTRSSGoalMet       bool    `json:"nftRSSGoalMet"`
}

func newReport(ctx context.Context, cfg config) *report {
	r := &report{
		Date: time.Now().UTC().Truncate(time.Second),
		// go run's binary has a temp name; the harness runs from the
		// repository root either way.
		Command:             strings.Join(append([]string{"go run ./bench/proxy"}, os.Args[1:]...), " "),
		CPUs:                runtime.NumCPU(),
		Services:            cfg.services,
		EndpointsPerService: cfg.endpoints,
		Reps:                cfg.reps,
		MinSyncPeriod:       cfg.minSyncPeriod.String(),
		SyncPeriod:          syncPeriod.String(),
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		r.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if out, err := exec.CommandContext(ctx, "nft", "--version").Output(); err == nil {
		r.NFT = strings.TrimSpace(string(out))
	}
	r.Goals.TimeRatio, r.Goals.RSSMiB = goalTimeRatio, goalRSSMiB
	return r
}

func (r *report) find(proxy string) *result {
	for i := range r.Results {
		if r.Results[i].Proxy == proxy {
			return &r.Results[i]
		}
	}
	return nil
}

func (r *report) compare() {
	kp, nn := r.find("kube-proxy"), r.find("nodenet")
	if kp == nil || nn == nil {
		return
	}
	c := &comparison{
		FirstSyncRatio:      nn.FirstSyncSeconds / kp.FirstSyncSeconds,
		OneMoreServiceRatio: nn.OneMoreServiceSeconds / kp.OneMoreServiceSeconds,
		ProxyRSSGoalMet:     nn.ProxyPeakRSSMiB <= goalRSSMiB,
		NFTRSSGoalMet:       nn.NFTPeakRSSMiB <= goalRSSMiB,
	}
	c.TimeGoalMet = c.FirstSyncRatio <= goalTimeRatio && c.OneMoreServiceRatio <= goalTimeRatio
	r.Comparison = c
}

// write puts results.json and results.svg in dir.
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
	return os.WriteFile(filepath.Join(dir, "results.svg"), []byte(r.svg()), 0o644)
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
	if err := os.WriteFile(filepath.Join(cfg.out, "results.svg"), []byte(r.svg()), 0o644); err != nil {
		return err
	}
	fmt.Print(r.table())
	return nil
}

// table is the human summary printed at the end.
func (r *report) table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d services × %d endpoints, kernel %s, %d CPUs, %s\n\n",
		r.Services, r.EndpointsPerService, r.Kernel, r.CPUs, r.NFT)
	fmt.Fprintf(&b, "%-11s %15s %20s %16s %15s %13s\n", "proxy", "first sync (s)", "one more service (s)",
		"(its sync) (s)", "proxy RSS (MiB)", "nft RSS (MiB)")
	for _, res := range r.Results {
		fmt.Fprintf(&b, "%-11s %15.2f %20.2f %16.2f %15.0f %13.0f\n", res.Proxy, res.FirstSyncSeconds,
			res.OneMoreServiceSeconds, res.OneMoreServiceSyncSeconds, res.ProxyPeakRSSMiB, res.NFTPeakRSSMiB)
	}
	if c := r.Comparison; c != nil {
		fmt.Fprintf(&b, "\nnodenet/kube-proxy: first sync %.2f×, one more service %.2f× (goal ≤ %.1f×: %v); "+
			"proxy RSS ≤ %d MiB: %v, nft RSS ≤ %d MiB: %v\n",
			c.FirstSyncRatio, c.OneMoreServiceRatio, goalTimeRatio, c.TimeGoalMet,
			goalRSSMiB, c.ProxyRSSGoalMet, goalRSSMiB, c.NFTRSSGoalMet)
	}
	return b.String()
}
