//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The metrics both proxies expose under kube-proxy's names.
const (
	mLastSync        = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	mSyncSum         = "kubeproxy_sync_proxy_rules_duration_seconds_sum"
	mSyncCount       = "kubeproxy_sync_proxy_rules_duration_seconds_count"
	mProgrammingSum  = "kubeproxy_network_programming_duration_seconds_sum"
	mProgrammingCnt  = "kubeproxy_network_programming_duration_seconds_count"
	mNFTSyncFailures = "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"
	// mBackendOperations is nodenet's own count of dataplane writes
	// (one per nftables transaction, through nft or netlink).
	mBackendOperations = "nodenet_proxy_backend_operations_total"
)

// metrics is one scrape: each family-less metric name → its IPv4 value.
// The benchmark is IPv4-only; a dual-stack kube-proxy also reports an
// (empty) IPv6 proxier, which must not be mistaken for the real one.
type metrics map[string]float64

// get returns the value; an absent metric is zero, as a labelled
// histogram has no series before its first observation.
func (m metrics) get(name string) float64 { return m[name] }

// lastSync is the end of the last successful sync; zero before the first.
func (m metrics) lastSync() time.Time {
	v := m[mLastSync]
	if v <= 0 {
		return time.Time{}
	}
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// scrape fetches and parses a Prometheus text exposition. Samples labelled
// ip_family="IPv6" are dropped; others with the same name are summed.
func scrape(ctx context.Context, client *http.Client, url string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (metrics, error) {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, labels, rest := line, "", ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				return nil, fmt.Errorf("bad sample %q", line)
			}
			name, labels, rest = line[:i], line[i+1:j], line[j+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if strings.Contains(labels, `ip_family="IPv6"`) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("bad sample %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("bad value in %q: %w", line, err)
		}
		if name == mLastSync {
			m[name] = max(m[name], v)
		} else {
			m[name] += v
		}
	}
	return m, sc.Err()
}
