package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// startEtcd runs a one-member etcd on two random loopback ports (client and
// peer, so parallel servers never share the default 2380) and waits for
// /health.
func startEtcd(ctx context.Context, bin, dir string, opts Options) (*process, string, error) {
	ports, err := freePorts("127.0.0.1", 2)
	if err != nil {
		return nil, "", err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	dataDir := filepath.Join(dir, "etcd-data")
	// A failed attempt may have left a member behind with other peer URLs.
	if err := os.RemoveAll(dataDir); err != nil {
		return nil, "", fmt.Errorf("clear etcd data dir: %w", err)
	}
	args := []string{
		"--name=nodenet",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=nodenet=" + peerURL,
		"--initial-cluster-state=new",
		// Test data is thrown away; fsync only costs time.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	p, err := startProcess("etcd", bin, args, filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, "", err
	}
	client := &http.Client{}
	err = waitReady(ctx, p, opts.ReadyTimeout, func(ctx context.Context) error {
		return getOK(ctx, client, clientURL+"/health", "")
	})
	if err != nil {
		p.stop()
		return p, "", err
	}
	return p, clientURL, nil
}
