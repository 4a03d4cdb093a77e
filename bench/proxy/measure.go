//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/klog/v2"
)

const (
	pollInterval = 50 * time.Millisecond
	// quiet is how long no sync may happen before the proxy counts as
	// settled; it exceeds the min sync period, so a queued sync shows.
	quiet         = 3 * time.Second
	settleTimeout = 2 * time.Minute
	mib           = 1 << 20
)

// result is one proxy's figures.
type result struct {
	Proxy   string `json:"proxy"`
	Version string `json:"version"`
	// FirstSyncSeconds: process start → end of the first successful
	// sync, with every object already in the apiserver.
	FirstSyncSeconds float64 `json:"firstSyncSeconds"`
	// FirstSyncRuleSeconds is the proxy's own sync duration metric for
	// the syncs up to the first success (list + program, not startup).
	FirstSyncRuleSeconds float64 `json:"firstSyncRuleSeconds"`
	// FirstSyncNFTSeconds is the wall time of the nft runs up to then.
	FirstSyncNFTSeconds float64 `json:"firstSyncNFTSeconds"`
	// OneMoreServiceSeconds is the median of OneMoreServiceRuns: Service +
	// EndpointSlice create → end of the sync that programmed the slice.
	OneMoreServiceSeconds float64   `json:"oneMoreServiceSeconds"`
	OneMoreServiceRuns    []float64 `json:"oneMoreServiceRuns"`
	// NetworkProgrammingRuns is the proxy's own latency metric for the
	// same changes, as a cross-check.
	NetworkProgrammingRuns []float64 `json:"networkProgrammingRuns"`
	// OneMoreServiceSyncSeconds is the median duration (the proxy's sync
	// metric) of the sync that programmed the new EndpointSlice; the rest
	// of OneMoreServiceSeconds is mostly the min sync period, when the
	// Service and its slice land in two syncs (OneMoreServiceSyncs).
	OneMoreServiceSyncSeconds float64   `json:"oneMoreServiceSyncSeconds"`
	OneMoreServiceSyncRuns    []float64 `json:"oneMoreServiceSyncRuns"`
	OneMoreServiceSyncs       []float64 `json:"oneMoreServiceSyncs"`
	// Peak resident sets: the proxy's whole run and the largest nft child.
	ProxyPeakRSSMiB        float64      `json:"proxyPeakRSSMiB"`
	ProxyRSSAtFirstSyncMiB float64      `json:"proxyPeakRSSAtFirstSyncMiB"`
	NFTPeakRSSMiB          float64      `json:"nftPeakRSSMiB"`
	NFTCalls               int          `json:"nftCalls"`
	NFTFailedCalls         int          `json:"nftFailedCalls"`
	SyncFailures           float64      `json:"nftablesSyncFailures"`
	Ruleset                rulesetCheck `json:"ruleset"`
}

// measure runs one proxy in a fresh namespace through the whole sequence.
func measure(ctx context.Context, cfg config, c *cluster, spec proxySpec, kubeconfig, work string) (res result, err error) {
	log := klog.FromContext(ctx).WithValues("proxy", spec.name)
	res = result{Proxy: spec.name, Version: spec.version}
	dir := filepath.Join(work, spec.name)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return res, err
	}
	realNFT, err := exec.LookPath("nft")
	if err != nil {
		return res, fmt.Errorf("nft: %w", err)
	}
	if err := goBuild(ctx, filepath.Join(dir, "bin", "nft"), "./bench/proxy/nftrss"); err != nil {
		return res, err
	}
	nftLog := filepath.Join(dir, "nft.jsonl")
	argv, err := spec.command(dir, kubeconfig)
	if err != nil {
		return res, err
	}

	n, err := newNode(ctx, spec.name)
	if err != nil {
		return res, err
	}
	defer n.delete(context.WithoutCancel(ctx))

	log.Info("Starting proxy", "argv", argv)
	p, err := startProcess(n.command(argv...), []string{
		"PATH=" + filepath.Join(dir, "bin") + ":" + os.Getenv("PATH"),
		"NODENET_BENCH_NFT=" + realNFT,
		"NODENET_BENCH_NFT_LOG=" + nftLog,
	}, filepath.Join(dir, spec.name+".log"))
	if err != nil {
		return res, err
	}
	defer p.stop()
	w := &watcher{p: p, url: "http://" + nodeAddr + ":" + metricsPort + "/metrics", client: &http.Client{Timeout: 5 * time.Second}}

	// 1. First sync.
	m, err := w.until(ctx, cfg.syncTimeout, func(m metrics) bool { return !m.lastSync().IsZero() })
	if err != nil {
		return res, fmt.Errorf("wait for first sync: %w", err)
	}
	firstSync := m.lastSync()
	res.FirstSyncSeconds = firstSync.Sub(p.started).Seconds()
	res.FirstSyncRuleSeconds = m.get(mSyncSum)
	if rss, err := p.peakRSS(); err == nil {
		res.ProxyRSSAtFirstSyncMiB = float64(rss) / mib
	}
	log.Info("First sync", "seconds", res.FirstSyncSeconds, "syncMetricSeconds", res.FirstSyncRuleSeconds)

	// 2. One more service, reps times, each from a settled proxy.
	var extra []int
	defer func() {
		// The next proxy must start from the same objects.
		p.stop()
		for _, i := range extra {
			if derr := c.deleteService(context.WithoutCancel(ctx), i); derr != nil && err == nil {
				err = derr
			}
		}
	}()
	for r := range cfg.reps {
		before, err := w.settle(ctx)
		if err != nil {
			return res, fmt.Errorf("settle: %w", err)
		}
		i := cfg.services + r
		created := time.Now()
		extra = append(extra, i)
		if err := c.createService(ctx, i, created); err != nil {
			return res, err
		}
		prev := before
		_, err = w.until(ctx, cfg.syncTimeout, func(m metrics) bool {
			if m.get(mProgrammingCnt) > before.get(mProgrammingCnt) {
				return true
			}
			prev = m
			return false
		})
		if err != nil {
			return res, fmt.Errorf("wait for the new service: %w", err)
		}
		// The latency is observed just before the sync's timestamp and
		// duration are; a later scrape sees all three, and no other sync
		// fits in between (the min sync period).
		time.Sleep(100 * time.Millisecond)
		after, err := w.scrape(ctx)
		if err != nil {
			return res, err
		}
		took := after.lastSync().Sub(created).Seconds()
		prog := (after.get(mProgrammingSum) - before.get(mProgrammingSum)) /
			(after.get(mProgrammingCnt) - before.get(mProgrammingCnt))
		// prev was scraped before the slice's sync ended: the difference
		// is that one sync (perhaps after a sync for the Service alone).
		sync := (after.get(mSyncSum) - prev.get(mSyncSum)) / (after.get(mSyncCount) - prev.get(mSyncCount))
		res.OneMoreServiceRuns = append(res.OneMoreServiceRuns, took)
		res.NetworkProgrammingRuns = append(res.NetworkProgrammingRuns, prog)
		res.OneMoreServiceSyncRuns = append(res.OneMoreServiceSyncRuns, sync)
		res.OneMoreServiceSyncs = append(res.OneMoreServiceSyncs, after.get(mSyncCount)-before.get(mSyncCount))
		log.Info("One more service", "service", serviceName(i), "seconds", took,
			"networkProgrammingSeconds", prog, "lastSyncSeconds", sync, "syncs", after.get(mSyncCount)-before.get(mSyncCount))
	}
	res.OneMoreServiceSeconds = median(res.OneMoreServiceRuns)
	res.OneMoreServiceSyncSeconds = median(res.OneMoreServiceSyncRuns)
	last, err := w.settle(ctx)
	if err != nil {
		return res, fmt.Errorf("settle: %w", err)
	}
	res.SyncFailures = last.get(mNFTSyncFailures)

	// 3. Is everything programmed?
	clusterIPs, endpointIPs := c.wantIPs(cfg.services + cfg.reps)
	res.Ruleset, err = checkRuleset(ctx, n, realNFT, clusterIPs, endpointIPs)
	if err != nil {
		return res, err
	}
	log.Info("Ruleset", "check", res.Ruleset)
	if !res.Ruleset.ok() {
		return res, fmt.Errorf("ruleset incomplete: %d ClusterIPs and %d endpoint IPs missing (first: %s)",
			res.Ruleset.MissingClusterIPs, res.Ruleset.MissingEndpointIPs, res.Ruleset.FirstMissing)
	}

	// 4. Memory.
	rss, err := p.peakRSS()
	if err != nil {
		return res, err
	}
	res.ProxyPeakRSSMiB = float64(rss) / mib
	calls, err := readNFTLog(nftLog)
	if err != nil {
		return res, err
	}
	for _, call := range calls {
		res.NFTCalls++
		if call.Exit != 0 {
			res.NFTFailedCalls++
		}
		res.NFTPeakRSSMiB = max(res.NFTPeakRSSMiB, float64(call.MaxRSSKB)/1024)
		if !call.Start.After(firstSync) {
			res.FirstSyncNFTSeconds += call.Seconds
		}
	}
	return res, nil
}

// watcher scrapes one proxy's metrics and notices when it dies.
type watcher struct {
	p      *process
	url    string
	client *http.Client
}

func (w *watcher) scrape(ctx context.Context) (metrics, error) {
	if err := w.p.exited(); err != nil {
		return nil, err
	}
	return scrape(ctx, w.client, w.url)
}

// until polls until cond holds. Scrape errors are retried: the metrics
// server comes up some time after the process.
func (w *watcher) until(ctx context.Context, timeout time.Duration, cond func(metrics) bool) (metrics, error) {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		m, err := w.scrape(ctx)
		switch {
		case err == nil && cond(m):
			return m, nil
		case err != nil:
			if perr := w.p.exited(); perr != nil {
				return nil, perr
			}
			lastErr = err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w after %v (last scrape error: %v)", errTimeout, timeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// settle waits until no sync has ended for `quiet` and returns the last
// scrape.
func (w *watcher) settle(ctx context.Context) (metrics, error) {
	return w.until(ctx, settleTimeout, func(m metrics) bool {
		return time.Since(m.lastSync()) >= quiet
	})
}

type nftCall struct {
	Start    time.Time `json:"start"`
	Seconds  float64   `json:"seconds"`
	MaxRSSKB int64     `json:"maxRSSKiB"`
	Exit     int       `json:"exit"`
}

func readNFTLog(path string) ([]nftCall, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil // a proxy that programs over netlink runs no nft
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var calls []nftCall
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		var c nftCall
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		calls = append(calls, c)
	}
	return calls, sc.Err()
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
