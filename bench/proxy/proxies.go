//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"k8s.io/klog/v2"

	"github.com/nodenet/nodenet/test/apiserver"
)

const (
	// Both proxies serve metrics and health on the node's address, which
	// the harness reaches over the bench bridge.
	metricsPort = "10249"
	healthzPort = "10256"
	// syncPeriod is kube-proxy's default; both proxies get it.
	syncPeriod = 30 * time.Second
)

// proxySpec says how to run one proxy.
type proxySpec struct {
	name    string
	version string
	// command writes whatever config the proxy needs into dir and returns
	// its argv.
	command func(dir, kubeconfig string) ([]string, error)
}

func proxySpecs(ctx context.Context, cfg config, work string) ([]proxySpec, error) {
	var specs []proxySpec
	for _, name := range cfg.proxies {
		switch name {
		case "kube-proxy":
			bin, err := kubeProxyBinary(cfg.kubeProxy)
			if err != nil {
				return nil, err
			}
			specs = append(specs, kubeProxySpec(bin, cfg))
		case "nodenet":
			bin := cfg.nodenetProxy
			if bin == "" {
				bin = filepath.Join(work, "bin", "nodenet-proxy")
				if err := goBuild(ctx, bin, "./bench/proxy/nodenet-proxy"); err != nil {
					return nil, err
				}
			}
			specs = append(specs, nodenetSpec(bin, cfg))
		default:
			// NAME=BINARY: another nodenet-proxy build, for A/B runs.
			label, bin, ok := strings.Cut(name, "=")
			if !ok || label == "" || bin == "" {
				return nil, fmt.Errorf("unknown proxy %q (want kube-proxy, nodenet or NAME=nodenet-proxy binary)", name)
			}
			spec := nodenetSpec(bin, cfg)
			spec.name, spec.version = label, bin
			specs = append(specs, spec)
		}
	}
	return specs, nil
}

// kubeProxyBinary resolves kube-proxy the way test/apiserver resolves its
// binaries: flag, environment, then hack/build-kube-proxy.sh's cache.
func kubeProxyBinary(explicit string) (string, error) {
	bin := cmpOr(explicit, os.Getenv("NODENET_KUBE_PROXY"))
	if bin == "" {
		root, err := apiserver.CacheRoot()
		if err != nil {
			return "", err
		}
		bin = filepath.Join(root, "kube-"+apiserver.KubeVersion, "kube-proxy")
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("kube-proxy: %w; build it with hack/build-kube-proxy.sh", err)
	}
	return bin, nil
}

// goBuild builds a package of this module (the harness runs from the
// repository root, as `go run ./bench/proxy` does).
func goBuild(ctx context.Context, out, pkg string) error {
	klog.FromContext(ctx).Info("Building", "package", pkg)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// kubeProxyConfig is kube-proxy's nftables mode with the flags' defaults,
// except conntrack: the conntrack sysctls are left alone (zeros), since
// nf_conntrack_max can't be set from a network namespace.
var kubeProxyConfig = template.Must(template.New("").Parse(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: {{.Node}}
clusterCIDR: {{.ClusterCIDR}}
metricsBindAddress: {{.Metrics}}
healthzBindAddress: {{.Healthz}}
clientConnection:
  kubeconfig: {{.Kubeconfig}}
nftables:
  minSyncPeriod: {{.MinSyncPeriod}}
  syncPeriod: {{.SyncPeriod}}
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
`))

func kubeProxySpec(bin string, cfg config) proxySpec {
	return proxySpec{
		name:    "kube-proxy",
		version: binaryVersion(bin),
		command: func(dir, kubeconfig string) ([]string, error) {
			var b strings.Builder
			err := kubeProxyConfig.Execute(&b, map[string]string{
				"Node":          nodeName,
				"ClusterCIDR":   clusterCIDR,
				"Metrics":       nodeAddr + ":" + metricsPort,
				"Healthz":       nodeAddr + ":" + healthzPort,
				"Kubeconfig":    kubeconfig,
				"MinSyncPeriod": cfg.minSyncPeriod.String(),
				"SyncPeriod":    syncPeriod.String(),
			})
			if err != nil {
				return nil, err
			}
			path := filepath.Join(dir, "kube-proxy.yaml")
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				return nil, err
			}
			return []string{bin, "--config=" + path}, nil
		},
	}
}

// nodenetSpec runs bench/proxy/nodenet-proxy, whose flags are named after
// kube-proxy's.
func nodenetSpec(bin string, cfg config) proxySpec {
	return proxySpec{
		name:    "nodenet",
		version: gitDescribe(),
		command: func(dir, kubeconfig string) ([]string, error) {
			return []string{bin,
				"--kubeconfig=" + kubeconfig,
				"--hostname-override=" + nodeName,
				"--cluster-cidr=" + clusterCIDR,
				"--metrics-bind-address=" + nodeAddr + ":" + metricsPort,
				"--healthz-bind-address=" + nodeAddr + ":" + healthzPort,
				"--min-sync-period=" + cfg.minSyncPeriod.String(),
				"--sync-period=" + syncPeriod.String(),
			}, nil
		},
	}
}

func binaryVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func gitDescribe() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

var errTimeout = errors.New("timed out")
