package kubenode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodenet/nodenet/test/netnode"
)

// PodNS opens the network namespace of a running pod's sandbox through
// its pause process (/proc/PID/ns/net), which works whatever mount
// namespace the runtime put the namespace's bind mount in.
func (n *Node) PodNS(ctx context.Context, pod *corev1.Pod) (*netnode.NS, error) {
	id, err := n.Crictl(ctx, "pods", "-q", "--name", pod.Name, "--namespace", pod.Namespace, "--state", "ready")
	if err != nil {
		return nil, err
	}
	id = strings.TrimSpace(id)
	if id == "" || strings.Contains(id, "\n") {
		return nil, fmt.Errorf("want one ready sandbox for %s, got %q", pod.Name, id)
	}
	out, err := n.Crictl(ctx, "inspectp", id)
	if err != nil {
		return nil, err
	}
	var v struct {
		Info struct {
			Pid int `json:"pid"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.Info.Pid == 0 {
		return nil, fmt.Errorf("crictl inspectp %s: no pid (%v)", id, err)
	}
	path := fmt.Sprintf("/proc/%d/ns/net", v.Info.Pid)
	h, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open %s's netns: %w", pod.Name, err)
	}
	return &netnode.NS{Name: "pod " + pod.Name, Path: path, Handle: h}, nil
}

// TrafficInterval is how often Traffic sends each request.
const TrafficInterval = 50 * time.Millisecond

// Traffic is an application's view of the network while the agent is
// restarted, upgraded or killed: from inside a pod's namespace it GETs
// each target over a new TCP connection every TrafficInterval, and
// keeps one long-lived TCP connection, sending a request on it every
// TrafficInterval too. Nothing retries: a request that fails counts.
type Traffic struct {
	Targets   []netip.AddrPort
	LongLived netip.AddrPort

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	stats  TrafficStats
}

// TrafficStats is what Traffic saw.
type TrafficStats struct {
	Requests, Failed int
	// Failures are the first few failures, for messages.
	Failures []string
	// LongLivedRequests were sent on the long-lived connection;
	// LongLivedBroken says when and how it broke (empty: it survived).
	LongLivedRequests int
	LongLivedBroken   string
	Duration          time.Duration
}

// StartTraffic starts Traffic from ns until Stop.
func StartTraffic(ctx context.Context, ns *netnode.NS, targets []netip.AddrPort, longLived netip.AddrPort) (*Traffic, error) {
	conn, err := ns.Dial(ctx, longLived.Addr(), int(longLived.Port()))
	if err != nil {
		return nil, fmt.Errorf("long-lived connection to %s: %w", longLived, err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tr := &Traffic{Targets: targets, LongLived: longLived, cancel: cancel}
	start := time.Now()
	for _, dst := range targets {
		client := &http.Client{Transport: netnode.HTTPTransport(ns, dst), Timeout: 2 * time.Second}
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			tr.every(ctx, func() error {
				resp, err := client.Get("http://" + dst.String() + "/hostname")
				if err != nil {
					return err
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("GET %s: %s", dst, resp.Status)
				}
				return nil
			}, dst.String())
		}()
	}
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		defer conn.Close()
		r := bufio.NewReader(conn)
		tick := time.NewTicker(TrafficInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			_, err := fmt.Fprintf(conn, "GET /hostname HTTP/1.1\r\nHost: %s\r\n\r\n", longLived)
			var resp *http.Response
			if err == nil {
				resp, err = http.ReadResponse(r, nil)
			}
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			tr.mu.Lock()
			tr.stats.LongLivedRequests++
			if err != nil {
				tr.stats.LongLivedBroken = fmt.Sprintf("after %s and %d requests: %v", time.Since(start).Round(time.Millisecond), tr.stats.LongLivedRequests, err)
			}
			tr.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	tr.stats.Duration = -time.Duration(start.UnixNano())
	return tr, nil
}

// every runs req every TrafficInterval until ctx ends, counting.
func (tr *Traffic) every(ctx context.Context, req func() error, what string) {
	tick := time.NewTicker(TrafficInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		err := req()
		tr.mu.Lock()
		tr.stats.Requests++
		if err != nil {
			tr.stats.Failed++
			if len(tr.stats.Failures) < 10 {
				tr.stats.Failures = append(tr.stats.Failures, fmt.Sprintf("%s %s: %v", time.Now().UTC().Format("15:04:05.000"), what, err))
			}
		}
		tr.mu.Unlock()
	}
}

// Stop ends the traffic and returns what it saw.
func (tr *Traffic) Stop() TrafficStats {
	tr.cancel()
	tr.wg.Wait()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	st := tr.stats
	st.Duration = time.Duration(time.Now().UnixNano()) + st.Duration
	return st
}

// Snapshot returns the counts so far.
func (tr *Traffic) Snapshot() TrafficStats {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.stats
}
