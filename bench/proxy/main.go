//go:build linux

// Command proxy benchmarks nodenet's nftables service proxy against
// kube-proxy's own nftables mode on one machine: one real kube-apiserver and
// etcd hold the same Services and EndpointSlices for both, and each proxy
// runs in turn in a fresh network namespace. It measures
//
//   - first sync: proxy start → end of the first successful sync, from the
//     proxy's kubeproxy_sync_proxy_rules_last_timestamp_seconds;
//   - one endpoint added to an existing EndpointSlice → end of the sync
//     that programmed it, the same way, cross-checked by
//     kubeproxy_network_programming_duration_seconds (every change stamps
//     its time as endpoints.kubernetes.io/last-change-trigger-time);
//   - one more Service and its EndpointSlice → programmed, the same way;
//     both changes -reps times, the median reported;
//   - peak RSS of the proxy (VmHWM) and of its nft children (wait4 rusage,
//     through bench/proxy/nftrss on the proxy's PATH), and their sum;
//   - restart onto a correct table: the proxy stopped and started again
//     onto the ruleset it left, time to its first sync and the writes it
//     sent (nft transactions and their bytes, and nodenet's own
//     nodenet_proxy_backend_operations_total, one per transaction through
//     nft or netlink);
//
// and checks the resulting ruleset: every ClusterIP and endpoint IP must be
// in it. With -scales it does all of that at each size in turn, growing one
// set of objects in one apiserver; a proxy whose first sync takes longer
// than -sync-timeout is recorded as not finished there and not run at the
// larger sizes. Results go to OUT/results.json, OUT/results.svg (every
// figure at the -services scale) and OUT/scaling.svg (first sync and total
// RSS against size).
//
// Run as root from the repository root:
//
//	go run ./bench/proxy -services 10000 -endpoints 10 -out bench/proxy/results
//	go run ./bench/proxy -scales 1000,5000,10000,25000,50000 -services 10000 -out bench/proxy/results
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/test/apiserver"
)

type config struct {
	services      int
	scales        []int
	endpoints     int
	reps          int
	out           string
	proxies       []string
	kubeProxy     string
	nodenetProxy  string
	minSyncPeriod time.Duration
	syncTimeout   time.Duration
	keepWork      bool
	replot        bool
}

func main() {
	var cfg config
	var proxies string
	flag.IntVar(&cfg.services, "services", 10000, "Services to create; with -scales, the scale results.svg shows")
	scales := flag.String("scales", "", "comma-separated numbers of Services to measure at, in one run (default: -services alone)")
	flag.IntVar(&cfg.endpoints, "endpoints", 10, "endpoints per Service (one EndpointSlice each)")
	flag.IntVar(&cfg.reps, "reps", 3, "one-more-service measurements per proxy (the median is reported)")
	flag.StringVar(&cfg.out, "out", "bench/proxy/results", "directory for results.json and results.svg")
	flag.StringVar(&proxies, "proxies", "kube-proxy,nodenet", "proxies to run, in order; NAME=BINARY adds another nodenet-proxy build (a wrapper script may set GOGC and the like)")
	flag.StringVar(&cfg.kubeProxy, "kube-proxy", "", "kube-proxy binary (default $NODENET_KUBE_PROXY, then the hack/build-kube-proxy.sh cache)")
	flag.StringVar(&cfg.nodenetProxy, "nodenet-proxy", "", "nodenet-proxy binary (default: go build ./bench/proxy/nodenet-proxy)")
	flag.DurationVar(&cfg.minSyncPeriod, "min-sync-period", time.Second, "both proxies' minimum time between syncs (kube-proxy's default)")
	flag.DurationVar(&cfg.syncTimeout, "sync-timeout", 10*time.Minute, "how long a proxy may take to sync; one that takes longer is recorded as not finished and skipped at larger scales")
	flag.BoolVar(&cfg.keepWork, "keep-work", false, "keep the work dir (logs, configs) even on success")
	flag.BoolVar(&cfg.replot, "replot", false, "only redraw OUT/results.svg from OUT/results.json")
	klog.InitFlags(nil)
	flag.Parse()
	cfg.proxies = strings.Split(proxies, ",")
	var err error
	if cfg.scales, err = parseScales(*scales, cfg.services); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	do := run
	if cfg.replot {
		do = replot
	}
	if err := do(klog.NewContext(ctx, logger), cfg); err != nil {
		logger.Error(err, "Benchmark failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(ctx context.Context, cfg config) (err error) {
	log := klog.FromContext(ctx)
	if os.Geteuid() != 0 {
		return errors.New("needs root (network namespaces, nftables)")
	}
	if cfg.services < 1 || cfg.endpoints < 1 || cfg.reps < 1 {
		return errors.New("-services, -endpoints and -reps must be positive")
	}
	work, err := os.MkdirTemp("", "nodenet-bench-proxy-")
	if err != nil {
		return fmt.Errorf("make work dir: %w", err)
	}
	defer func() {
		if err != nil || cfg.keepWork {
			log.Info("Work dir kept", "dir", work)
			return
		}
		_ = os.RemoveAll(work)
	}()

	specs, err := proxySpecs(ctx, cfg, work)
	if err != nil {
		return err
	}

	if err := setupBridge(ctx); err != nil {
		return err
	}
	defer deleteBridge(context.WithoutCancel(ctx))

	log.Info("Starting kube-apiserver and etcd", "bind", hostAddr)
	srv, err := apiserver.Start(ctx, apiserver.Options{BindAddress: hostAddr, TempDir: work})
	if err != nil {
		return fmt.Errorf("start apiserver: %w", err)
	}
	defer srv.Stop()
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}

	c, err := newCluster(srv.RESTConfig(), cfg.endpoints)
	if err != nil {
		return err
	}
	rep := newReport(ctx, cfg)
	gaveUp := map[string]string{}
	for _, n := range cfg.scales {
		start := time.Now()
		if err := c.populate(ctx, n); err != nil {
			return err
		}
		log.Info("Objects created", "services", n, "endpointsPerService", cfg.endpoints,
			"took", time.Since(start).Round(time.Millisecond))
		sr := scaleRun{Services: n}
		for _, spec := range specs {
			if why := gaveUp[spec.name]; why != "" {
				sr.Results = append(sr.Results, result{Proxy: spec.name, Version: spec.version, DidNotFinish: why})
				continue
			}
			res, err := measure(ctx, cfg, c, spec, kubeconfig, work)
			if err != nil {
				return fmt.Errorf("%s at %d services: %w", spec.name, n, err)
			}
			if res.DidNotFinish != "" {
				gaveUp[spec.name] = fmt.Sprintf("not run: did not finish at %d services", n)
			}
			sr.Results = append(sr.Results, res)
			log.Info("Measured", "proxy", spec.name, "services", n, "didNotFinish", res.DidNotFinish,
				"firstSyncSeconds", res.FirstSyncSeconds, "oneEndpointSeconds", res.OneEndpointSeconds,
				"oneMoreServiceSeconds", res.OneMoreServiceSeconds, "totalPeakRSSMiB", res.TotalPeakRSSMiB)
		}
		sr.compare()
		rep.Scales = append(rep.Scales, sr)
		// Written after each scale: a long run leaves what it measured.
		if err := rep.write(cfg.out); err != nil {
			return err
		}
	}
	fmt.Print(rep.table())
	return nil
}

// parseScales reads -scales: ascending Service counts, each at least 1;
// empty is def alone.
func parseScales(s string, def int) ([]int, error) {
	if s == "" {
		return []int{def}, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-scales: %q is not a positive number", f)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, fmt.Errorf("-scales: %d after %d: list them in ascending order", n, out[len(out)-1])
		}
		out = append(out, n)
	}
	return out, nil
}
