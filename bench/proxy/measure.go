//go:build linux

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
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

// result is one proxy's figures at one scale.
type result struct {
	Proxy   string `json:"proxy"`
	Version string `json:"version"`
	// DidNotFinish says why there are no figures: the first sync took
	// longer than the run timeout here, or at a smaller scale (then this
	// scale was not tried).
	DidNotFinish string `json:"didNotFinish,omitempty"`
	// FirstSyncSeconds: process start → end of the first successful
	// sync, with every object already in the apiserver.
	FirstSyncSeconds float64 `json:"firstSyncSeconds"`
	// FirstSyncRuleSeconds is the proxy's own sync duration metric for
	// the syncs up to the first success (list + program, not startup).
	FirstSyncRuleSeconds float64 `json:"firstSyncRuleSeconds"`
	// FirstSyncNFTSeconds is the wall time of the nft runs up to then.
	FirstSyncNFTSeconds float64 `json:"firstSyncNFTSeconds"`
	// OneEndpointSeconds is the median of OneEndpointRuns: one endpoint
	// added to an existing EndpointSlice → end of the sync that
	// programmed it; OneEndpointSyncRuns are those syncs' durations.
	OneEndpointSeconds  float64   `json:"oneEndpointSeconds"`
	OneEndpointRuns     []float64 `json:"oneEndpointRuns"`
	OneEndpointSyncRuns []float64 `json:"oneEndpointSyncRuns"`
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
	// Peak resident sets over the whole run (first sync and every change
	// above): the proxy's (VmHWM), its largest nft child's (wait4
	// rusage), and TotalPeakRSSMiB, their sum: every process of the
	// proxy together. The sum is an upper bound — the two peaks need not
	// coincide — and exact for a proxy that runs no children.
	ProxyPeakRSSMiB        float64      `json:"proxyPeakRSSMiB"`
	ProxyRSSAtFirstSyncMiB float64      `json:"proxyPeakRSSAtFirstSyncMiB"`
	NFTPeakRSSMiB          float64      `json:"nftPeakRSSMiB"`
	TotalPeakRSSMiB        float64      `json:"totalPeakRSSMiB"`
	NFTCalls               int          `json:"nftCalls"`
	NFTFailedCalls         int          `json:"nftFailedCalls"`
	SyncFailures           float64      `json:"nftablesSyncFailures"`
	Ruleset                rulesetCheck `json:"ruleset"`
	// Restart: the proxy stopped and started again onto the ruleset it
	// left, with nothing changed in the apiserver.
	Restart *restartResult `json:"restart,omitempty"`
}

// restartResult is what a restart onto a correct table cost.
type restartResult struct {
	DidNotFinish string `json:"didNotFinish,omitempty"`
	// FirstSyncSeconds: new process start → end of its first sync.
	FirstSyncSeconds float64 `json:"firstSyncSeconds"`
	// Writes to the kernel up to that sync: nft transactions (nft -f
	// runs; NFTTransactionBytes is the text they read) and, for a proxy
	// that reports them, its own dataplane write operations
	// (nodenet_proxy_backend_operations_total: one per transaction,
	// whether through nft or over netlink).
	NFTTransactions     int     `json:"nftTransactions"`
	NFTTransactionBytes int64   `json:"nftTransactionBytes"`
	BackendOperations   float64 `json:"backendOperations"`
	PeakRSSMiB          float64 `json:"proxyPeakRSSMiB"`
	NFTPeakRSSMiB       float64 `json:"nftPeakRSSMiB"`
}

// writes is the number of write transactions the restart sent.
func (r *restartResult) writes() float64 {
	return max(float64(r.NFTTransactions), r.BackendOperations)
}

// measure runs one proxy in a fresh namespace through the whole sequence
// at the cluster's current scale (c.services Services).
func measure(ctx context.Context, cfg config, c *cluster, spec proxySpec, kubeconfig, work string) (res result, err error) {
	log := klog.FromContext(ctx).WithValues("proxy", spec.name, "services", c.services)
	res = result{Proxy: spec.name, Version: spec.version}
	dir := filepath.Join(work, fmt.Sprintf("%s-%d", spec.name, c.services))
	n, err := newNode(ctx, spec.name)
	if err != nil {
		return res, err
	}
	defer n.delete(context.WithoutCancel(ctx))
	run, err := startProxy(ctx, spec, n, kubeconfig, dir, "first", log)
	if err != nil {
		return res, err
	}
	defer run.p.stop()
	w := run.w

	// 1. First sync.
	firstSync, err := measureFirstSync(ctx, cfg.syncTimeout, w, &res)
	if errors.Is(err, errTimeout) {
		res.DidNotFinish = fmt.Sprintf("first sync did not finish in %v", cfg.syncTimeout)
		log.Info("Gave up", "reason", res.DidNotFinish)
		return res, nil
	}
	if err != nil {
		return res, err
	}
	log.Info("First sync", "seconds", res.FirstSyncSeconds, "syncMetricSeconds", res.FirstSyncRuleSeconds)

	// The next proxy must start from the same objects.
	var extraServices, extraEndpoints []int
	defer func() {
		run.p.stop()
		bg := context.WithoutCancel(ctx)
		for _, i := range extraEndpoints {
			if derr := c.setExtraEndpoint(bg, i, nil, time.Now()); derr != nil && err == nil {
				err = derr
			}
		}
		for _, i := range extraServices {
			if derr := c.deleteService(bg, i); derr != nil && err == nil {
				err = derr
			}
		}
	}()

	// 2. One endpoint added to an existing slice, reps times, each on a
	// settled proxy and another Service.
	for r := range cfg.reps {
		before, err := w.settle(ctx)
		if err != nil {
			return res, fmt.Errorf("settle: %w", err)
		}
		i := r % c.services
		ip := extraEndpointIP(r)
		extraEndpoints = append(extraEndpoints, i)
		s, err := w.change(ctx, cfg.syncTimeout, before, func(t time.Time) error { return c.setExtraEndpoint(ctx, i, &ip, t) })
		if err != nil {
			return res, fmt.Errorf("one endpoint: %w", err)
		}
		res.OneEndpointRuns = append(res.OneEndpointRuns, s.took)
		res.OneEndpointSyncRuns = append(res.OneEndpointSyncRuns, s.sync)
		log.Info("One endpoint", "service", serviceName(i), "seconds", s.took, "lastSyncSeconds", s.sync, "syncs", s.syncs)
	}
	res.OneEndpointSeconds = median(res.OneEndpointRuns)

	// 3. One more service, reps times, each from a settled proxy.
	for r := range cfg.reps {
		before, err := w.settle(ctx)
		if err != nil {
			return res, fmt.Errorf("settle: %w", err)
		}
		i := c.services + r
		extraServices = append(extraServices, i)
		s, err := w.change(ctx, cfg.syncTimeout, before, func(t time.Time) error { return c.createService(ctx, i, t) })
		if err != nil {
			return res, fmt.Errorf("one more service: %w", err)
		}
		res.OneMoreServiceRuns = append(res.OneMoreServiceRuns, s.took)
		res.NetworkProgrammingRuns = append(res.NetworkProgrammingRuns, s.programming)
		res.OneMoreServiceSyncRuns = append(res.OneMoreServiceSyncRuns, s.sync)
		res.OneMoreServiceSyncs = append(res.OneMoreServiceSyncs, s.syncs)
		log.Info("One more service", "service", serviceName(i), "seconds", s.took,
			"networkProgrammingSeconds", s.programming, "lastSyncSeconds", s.sync, "syncs", s.syncs)
	}
	res.OneMoreServiceSeconds = median(res.OneMoreServiceRuns)
	res.OneMoreServiceSyncSeconds = median(res.OneMoreServiceSyncRuns)
	last, err := w.settle(ctx)
	if err != nil {
		return res, fmt.Errorf("settle: %w", err)
	}
	res.SyncFailures = last.get(mNFTSyncFailures)

	// 4. Is everything programmed?
	if err := run.checkProgrammed(ctx, c, c.services+cfg.reps, &res, log); err != nil {
		return res, err
	}

	// 5. Memory, before the restart adds its own nft runs.
	if err := run.measureMemory(firstSync, &res); err != nil {
		return res, err
	}

	// 6. Restart onto the table it left, nothing changed.
	run.p.stop()
	res.Restart, err = measureRestart(ctx, cfg, spec, n, kubeconfig, dir, log)
	return res, err
}

// measureRestart starts spec's proxy again in n, whose ruleset is the
// previous run's and still correct, and measures its first sync.
func measureRestart(ctx context.Context, cfg config, spec proxySpec, n *node, kubeconfig, dir string, log klog.Logger) (*restartResult, error) {
	run, err := startProxy(ctx, spec, n, kubeconfig, dir, "restart", log)
	if err != nil {
		return nil, err
	}
	defer run.p.stop()
	var rr restartResult
	m, err := run.w.until(ctx, cfg.syncTimeout, func(m metrics) bool { return !m.lastSync().IsZero() })
	if errors.Is(err, errTimeout) {
		rr.DidNotFinish = fmt.Sprintf("first sync after the restart did not finish in %v", cfg.syncTimeout)
		return &rr, nil
	}
	if err != nil {
		return nil, fmt.Errorf("restart: %w", err)
	}
	firstSync := m.lastSync()
	rr.FirstSyncSeconds = firstSync.Sub(run.p.started).Seconds()
	rr.BackendOperations = m.get(mBackendOperations)
	if rss, err := run.p.peakRSS(); err == nil {
		rr.PeakRSSMiB = float64(rss) / mib
	}
	calls, err := readNFTLog(run.nftLog)
	if err != nil {
		return nil, err
	}
	for _, call := range calls {
		if call.Start.After(firstSync) {
			continue
		}
		rr.NFTPeakRSSMiB = max(rr.NFTPeakRSSMiB, float64(call.MaxRSSKB)/1024)
		if call.transaction() {
			rr.NFTTransactions++
			rr.NFTTransactionBytes += call.StdinBytes
		}
	}
	log.Info("Restart", "firstSyncSeconds", rr.FirstSyncSeconds, "nftTransactions", rr.NFTTransactions,
		"nftTransactionBytes", rr.NFTTransactionBytes, "backendOperations", rr.BackendOperations)
	return &rr, nil
}

// proxyRun is one proxy process running in a node namespace.
type proxyRun struct {
	n       *node
	p       *process
	w       *watcher
	realNFT string // the nft the wrapper runs
	nftLog  string // where the wrapper logs each nft run
}

// startProxy starts spec's proxy in n, with an nft wrapper first on its
// PATH that logs each run's time and peak RSS; tag names this start's
// files in dir.
func startProxy(ctx context.Context, spec proxySpec, n *node, kubeconfig, dir, tag string, log klog.Logger) (*proxyRun, error) {
	realNFT, err := installNFTWrapper(ctx, dir)
	if err != nil {
		return nil, err
	}
	nftLog := filepath.Join(dir, tag+"-nft.jsonl")
	argv, err := spec.command(dir, kubeconfig)
	if err != nil {
		return nil, err
	}
	log.Info("Starting proxy", "start", tag, "argv", argv)
	p, err := startProcess(n.command(argv...), []string{
		"PATH=" + filepath.Join(dir, "bin") + ":" + os.Getenv("PATH"),
		"NODENET_BENCH_NFT=" + realNFT,
		"NODENET_BENCH_NFT_LOG=" + nftLog,
	}, filepath.Join(dir, tag+"-"+spec.name+".log"))
	if err != nil {
		return nil, err
	}
	return &proxyRun{
		n: n, p: p, realNFT: realNFT, nftLog: nftLog,
		w: &watcher{p: p, url: "http://" + nodeAddr + ":" + metricsPort + "/metrics", client: &http.Client{Timeout: 5 * time.Second}},
	}, nil
}

// installNFTWrapper builds the nft wrapper as dir/bin/nft and returns the
// real nft it runs.
func installNFTWrapper(ctx context.Context, dir string) (realNFT string, err error) {
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	realNFT, err = exec.LookPath("nft")
	if err != nil {
		return "", fmt.Errorf("nft: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bin", "nft")); err == nil {
		return realNFT, nil // built for the first start
	}
	if err := goBuild(ctx, filepath.Join(dir, "bin", "nft"), "./bench/proxy/nftrss"); err != nil {
		return "", err
	}
	return realNFT, nil
}

// measureFirstSync waits for the proxy's first successful sync, records it
// in res and returns when it ended.
func measureFirstSync(ctx context.Context, timeout time.Duration, w *watcher, res *result) (time.Time, error) {
	m, err := w.until(ctx, timeout, func(m metrics) bool { return !m.lastSync().IsZero() })
	if err != nil {
		return time.Time{}, fmt.Errorf("wait for first sync: %w", err)
	}
	firstSync := m.lastSync()
	res.FirstSyncSeconds = firstSync.Sub(w.p.started).Seconds()
	res.FirstSyncRuleSeconds = m.get(mSyncSum)
	if rss, err := w.p.peakRSS(); err == nil {
		res.ProxyRSSAtFirstSyncMiB = float64(rss) / mib
	}
	return firstSync, nil
}

// checkProgrammed checks that the node's ruleset has the cluster IPs and
// endpoints of all the services created, recording what it found in res.
func (run *proxyRun) checkProgrammed(ctx context.Context, c *cluster, services int, res *result, log klog.Logger) error {
	clusterIPs, endpointIPs := c.wantIPs(services)
	var err error
	res.Ruleset, err = checkRuleset(ctx, run.n, run.realNFT, clusterIPs, endpointIPs)
	if err != nil {
		return err
	}
	log.Info("Ruleset", "check", res.Ruleset)
	if !res.Ruleset.ok() {
		return fmt.Errorf("ruleset incomplete: %d ClusterIPs and %d endpoint IPs missing (first: %s)",
			res.Ruleset.MissingClusterIPs, res.Ruleset.MissingEndpointIPs, res.Ruleset.FirstMissing)
	}
	return nil
}

// measureMemory records the proxy's peak RSS and, from the wrapper's log,
// its nft runs: their number, failures and peak RSS, and the time of those
// up to firstSync.
func (run *proxyRun) measureMemory(firstSync time.Time, res *result) error {
	rss, err := run.p.peakRSS()
	if err != nil {
		return err
	}
	res.ProxyPeakRSSMiB = float64(rss) / mib
	defer func() { res.TotalPeakRSSMiB = res.ProxyPeakRSSMiB + res.NFTPeakRSSMiB }()
	calls, err := readNFTLog(run.nftLog)
	if err != nil {
		return err
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
	return nil
}

// changeSample is one change measurement; see result.
type changeSample struct {
	took        float64 // seconds from the change to the end of the sync
	programming float64 // the proxy's network programming latency
	sync        float64 // the duration of the sync that programmed it
	syncs       float64 // syncs from before to after
}

// change makes a change (do, given its time, which it stamps as the
// EndpointSlice's trigger time) on a settled proxy, whose last scrape is
// before, and measures until the sync that programmed the slice: the one
// that observed its network programming latency.
func (w *watcher) change(ctx context.Context, timeout time.Duration, before metrics, do func(time.Time) error) (changeSample, error) {
	changed := time.Now()
	if err := do(changed); err != nil {
		return changeSample{}, err
	}
	prev := before
	_, err := w.until(ctx, timeout, func(m metrics) bool {
		if m.get(mProgrammingCnt) > before.get(mProgrammingCnt) {
			return true
		}
		prev = m
		return false
	})
	if err != nil {
		return changeSample{}, fmt.Errorf("wait for the change to be programmed: %w", err)
	}
	// The latency is observed just before the sync's timestamp and
	// duration are; a later scrape sees all three, and no other sync fits
	// in between (the min sync period).
	time.Sleep(100 * time.Millisecond)
	after, err := w.scrape(ctx)
	if err != nil {
		return changeSample{}, err
	}
	return changeSample{
		took: after.lastSync().Sub(changed).Seconds(),
		programming: (after.get(mProgrammingSum) - before.get(mProgrammingSum)) /
			(after.get(mProgrammingCnt) - before.get(mProgrammingCnt)),
		// prev was scraped before the slice's sync ended: the difference
		// is that one sync (perhaps after a sync for a Service alone).
		sync:  (after.get(mSyncSum) - prev.get(mSyncSum)) / (after.get(mSyncCount) - prev.get(mSyncCount)),
		syncs: after.get(mSyncCount) - before.get(mSyncCount),
	}, nil
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

// nftCall is one line of bench/proxy/nftrss's log.
type nftCall struct {
	Start      time.Time `json:"start"`
	Seconds    float64   `json:"seconds"`
	MaxRSSKB   int64     `json:"maxRSSKiB"`
	Exit       int       `json:"exit"`
	Args       []string  `json:"args"`
	StdinBytes int64     `json:"stdinBytes"`
}

// transaction reports whether the call loaded rules (nft -f), not a
// check (-c/--check) or a listing.
func (c nftCall) transaction() bool {
	file := false
	for _, a := range c.Args {
		switch a {
		case "-c", "--check":
			return false
		case "-f", "--file":
			file = true
		}
	}
	return file
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
